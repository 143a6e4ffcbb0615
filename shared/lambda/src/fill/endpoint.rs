//! Where the Lambda API is, as aws-sdk-lambda's endpoint rules resolve it
//! (its `config::endpoint::DefaultResolver`, rules and partitions of
//! aws-sdk-lambda 1.115): an endpoint override as given, else
//! `https://lambda[-fips].<region>.<DNS suffix of the region's partition>`,
//! the dual-stack suffix when asked for. SSM's and Secrets Manager's
//! (the archive signing key's, feature `cloudfront`; aws-sdk-ssm 1.103,
//! aws-sdk-secretsmanager 1.99) are the same rules with their own host
//! names and two exceptions each ([`Api`]). The tests compare every case
//! with the SDKs' own resolvers (dev-dependencies).

/// An endpoint that cannot be resolved: the same cases, in the same words,
/// as the SDK's resolver (which reports them at each request, not at init).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{service}'s endpoint: Invalid Configuration: {reason}")]
pub struct EndpointError {
    service: &'static str,
    reason: &'static str,
}

/// A partition: the regions it names besides those its pattern matches
/// (`<prefix>\w+-\d+`), and its DNS suffixes (plain and dual-stack).
struct Partition {
    global: &'static str,
    prefix: &'static str,
    dns_suffix: &'static str,
    dual_stack_dns_suffix: &'static str,
}

/// Every partition but `aws`, which takes any region none of them claims
/// (its own pattern and names included), as the SDK's partition resolver
/// does. Each supports FIPS and dual-stack.
const PARTITIONS: [Partition; 7] = [
    Partition {
        global: "aws-cn-global",
        prefix: "cn-",
        dns_suffix: "amazonaws.com.cn",
        dual_stack_dns_suffix: "api.amazonwebservices.com.cn",
    },
    Partition {
        global: "",
        prefix: "eusc-de-",
        dns_suffix: "amazonaws.eu",
        dual_stack_dns_suffix: "api.amazonwebservices.eu",
    },
    Partition {
        global: "aws-iso-global",
        prefix: "us-iso-",
        dns_suffix: "c2s.ic.gov",
        dual_stack_dns_suffix: "api.aws.ic.gov",
    },
    Partition {
        global: "aws-iso-b-global",
        prefix: "us-isob-",
        dns_suffix: "sc2s.sgov.gov",
        dual_stack_dns_suffix: "api.aws.scloud",
    },
    Partition {
        global: "aws-iso-e-global",
        prefix: "eu-isoe-",
        dns_suffix: "cloud.adc-e.uk",
        dual_stack_dns_suffix: "api.cloud-aws.adc-e.uk",
    },
    Partition {
        global: "aws-iso-f-global",
        prefix: "us-isof-",
        dns_suffix: "csp.hci.ic.gov",
        dual_stack_dns_suffix: "api.aws.hci.ic.gov",
    },
    Partition {
        global: "aws-us-gov-global",
        prefix: "us-gov-",
        dns_suffix: "amazonaws.com",
        dual_stack_dns_suffix: "api.aws",
    },
];

const AWS: Partition = Partition {
    global: "aws-global",
    prefix: "",
    dns_suffix: "amazonaws.com",
    dual_stack_dns_suffix: "api.aws",
};

impl Partition {
    /// `region` is this partition's: named, or `<prefix>\w+-\d+` (the
    /// partition's regular expression, `\w` and `\d` ASCII as in regex-lite).
    fn claims(&self, region: &str) -> bool {
        if region == self.global {
            return true;
        }
        let Some((word, number)) = region
            .strip_prefix(self.prefix)
            .and_then(|rest| rest.split_once('-'))
        else {
            return false;
        };
        !word.is_empty()
            && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit())
    }
}

/// The Lambda API's URL for these settings (the SDK's endpoint parameters:
/// region, FIPS, dual-stack, and an endpoint override).
pub fn lambda_endpoint(
    region: Option<&str>,
    use_fips: bool,
    use_dual_stack: bool,
    endpoint: Option<&str>,
) -> Result<String, EndpointError> {
    service_endpoint(Api::Lambda, region, use_fips, use_dual_stack, endpoint)
}

/// An API whose endpoints these rules resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Lambda,
    /// As Lambda, except that FIPS alone in aws-us-gov is the plain host.
    Ssm,
    /// As Lambda, except that dual-stack in aws and aws-us-gov (and in
    /// aws-cn without FIPS) is the plain DNS suffix: those endpoints are
    /// dual-stack already.
    SecretsManager,
}

impl Api {
    /// Its name in errors.
    pub fn name(self) -> &'static str {
        match self {
            Api::Lambda => "Lambda",
            Api::Ssm => "SSM",
            Api::SecretsManager => "Secrets Manager",
        }
    }

    fn host(self) -> &'static str {
        match self {
            Api::Lambda => "lambda",
            Api::Ssm => "ssm",
            Api::SecretsManager => "secretsmanager",
        }
    }
}

/// The URL of `api` for these settings.
pub fn service_endpoint(
    api: Api,
    region: Option<&str>,
    use_fips: bool,
    use_dual_stack: bool,
    endpoint: Option<&str>,
) -> Result<String, EndpointError> {
    let invalid = |reason| EndpointError {
        service: api.name(),
        reason,
    };
    if let Some(url) = endpoint {
        if use_fips {
            return Err(invalid("FIPS and custom endpoint are not supported"));
        }
        if use_dual_stack {
            return Err(invalid("Dualstack and custom endpoint are not supported"));
        }
        return Ok(url.to_string());
    }
    let region = region.ok_or(invalid("Missing Region"))?;
    let partition = PARTITIONS.iter().find(|p| p.claims(region)).unwrap_or(&AWS);
    let (aws, gov, cn) = (
        partition.global == AWS.global,
        partition.global == "aws-us-gov-global",
        partition.global == "aws-cn-global",
    );
    let fips = match api {
        Api::Ssm if gov && use_fips && !use_dual_stack => "",
        _ if use_fips => "-fips",
        _ => "",
    };
    let suffix = match api {
        Api::SecretsManager if use_dual_stack && (aws || gov || (cn && !use_fips)) => {
            partition.dns_suffix
        }
        _ if use_dual_stack => partition.dual_stack_dns_suffix,
        _ => partition.dns_suffix,
    };
    Ok(format!("https://{}{fips}.{region}.{suffix}", api.host()))
}

#[cfg(test)]
mod tests {
    use aws_sdk_lambda::config::endpoint::{DefaultResolver, Params, ResolveEndpoint};

    use super::*;

    /// The SDK's answer for the same parameters.
    async fn sdk(
        region: Option<&str>,
        fips: bool,
        dual_stack: bool,
        endpoint: Option<&str>,
    ) -> Result<String, String> {
        let params = Params::builder()
            .set_region(region.map(str::to_string))
            .use_fips(fips)
            .use_dual_stack(dual_stack)
            .set_endpoint(endpoint.map(str::to_string))
            .build()
            .unwrap();
        ResolveEndpoint::resolve_endpoint(&DefaultResolver::new(), &params)
            .await
            .map(|e| e.url().to_string())
            .map_err(|e| e.to_string())
    }

    const REGIONS: &[&str] = &[
        // The four the brief names, then each partition by pattern and by
        // its global name, and regions no partition names (the SDK's aws
        // fallback).
        "us-east-1",
        "eu-west-1",
        "cn-north-1",
        "us-gov-west-1",
        "us-gov-east-1",
        "aws-us-gov-global",
        "cn-northwest-1",
        "aws-cn-global",
        "aws-global",
        "ap-southeast-7",
        "mx-central-1",
        "eusc-de-east-1",
        "us-iso-east-1",
        "aws-iso-global",
        "us-isob-east-1",
        "aws-iso-b-global",
        "eu-isoe-west-1",
        "aws-iso-e-global",
        "us-isof-south-1",
        "aws-iso-f-global",
        "xx-unknown-1",
        "us-gov-west",
        "cn-north-1a",
        "us-gov--1",
        "cn-nörth-1",
        "local",
    ];

    #[tokio::test]
    async fn every_region_resolves_as_the_sdk_resolves_it() {
        for region in REGIONS {
            for (fips, dual_stack) in [(false, false), (true, false), (false, true), (true, true)] {
                let ours = lambda_endpoint(Some(region), fips, dual_stack, None)
                    .map_err(|e| e.to_string());
                let theirs = sdk(Some(region), fips, dual_stack, None).await;
                assert_eq!(ours, theirs, "{region} fips {fips} dual-stack {dual_stack}");
            }
        }
        assert_eq!(
            lambda_endpoint(Some("us-east-1"), false, false, None).unwrap(),
            "https://lambda.us-east-1.amazonaws.com"
        );
        assert_eq!(
            lambda_endpoint(Some("cn-north-1"), false, false, None).unwrap(),
            "https://lambda.cn-north-1.amazonaws.com.cn"
        );
        assert_eq!(
            lambda_endpoint(Some("us-gov-west-1"), false, false, None).unwrap(),
            "https://lambda.us-gov-west-1.amazonaws.com"
        );
    }

    /// SSM's and Secrets Manager's resolvers for the same parameters.
    async fn ssm_and_secrets_manager(
        region: Option<&str>,
        fips: bool,
        dual_stack: bool,
    ) -> [Result<String, String>; 2] {
        use aws_sdk_secretsmanager::config::endpoint as sm;
        use aws_sdk_ssm::config::endpoint as ssm;
        let p = ssm::Params::builder()
            .set_region(region.map(str::to_string))
            .use_fips(fips)
            .use_dual_stack(dual_stack)
            .build()
            .unwrap();
        let a = ssm::ResolveEndpoint::resolve_endpoint(&ssm::DefaultResolver::new(), &p)
            .await
            .map(|e| e.url().to_string())
            .map_err(|e| e.to_string());
        let p = sm::Params::builder()
            .set_region(region.map(str::to_string))
            .use_fips(fips)
            .use_dual_stack(dual_stack)
            .build()
            .unwrap();
        let b = sm::ResolveEndpoint::resolve_endpoint(&sm::DefaultResolver::new(), &p)
            .await
            .map(|e| e.url().to_string())
            .map_err(|e| e.to_string());
        [a, b]
    }

    #[tokio::test]
    async fn ssm_and_secrets_manager_resolve_as_their_sdks_resolve_them() {
        for region in REGIONS {
            for (fips, dual_stack) in [(false, false), (true, false), (false, true), (true, true)] {
                let ours = [Api::Ssm, Api::SecretsManager].map(|api| {
                    service_endpoint(api, Some(region), fips, dual_stack, None)
                        .map_err(|e| e.to_string())
                });
                let theirs = ssm_and_secrets_manager(Some(region), fips, dual_stack).await;
                assert_eq!(ours, theirs, "{region} fips {fips} dual-stack {dual_stack}");
            }
        }
    }

    #[tokio::test]
    async fn an_override_is_taken_as_given_and_refused_as_the_sdk_refuses_it() {
        for url in [
            "http://127.0.0.1:9001",
            "https://lambda.example.test/prefix/",
        ] {
            for region in [Some("eu-west-1"), None] {
                for (fips, dual_stack) in
                    [(false, false), (true, false), (false, true), (true, true)]
                {
                    let ours = lambda_endpoint(region, fips, dual_stack, Some(url))
                        .map_err(|e| e.to_string());
                    let theirs = sdk(region, fips, dual_stack, Some(url)).await;
                    // The SDK's message is ours without the prefix.
                    let ours = ours
                        .map_err(|e| e.strip_prefix("Lambda's endpoint: ").unwrap().to_string());
                    assert_eq!(ours, theirs, "{url} {region:?} {fips} {dual_stack}");
                }
            }
        }
        let missing = lambda_endpoint(None, false, false, None).unwrap_err();
        assert_eq!(
            Err(missing.to_string().replace("Lambda's endpoint: ", "")),
            sdk(None, false, false, None).await
        );
    }
}
