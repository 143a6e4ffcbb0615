//! Where the Lambda API is, as aws-sdk-lambda's endpoint rules resolve it
//! (its `config::endpoint::DefaultResolver`, rules and partitions of
//! aws-sdk-lambda 1.115): an endpoint override as given, else
//! `https://lambda[-fips].<region>.<DNS suffix of the region's partition>`,
//! the dual-stack suffix when asked for. The tests compare every case with
//! the SDK's own resolver (a dev-dependency).

/// An endpoint that cannot be resolved: the same cases, in the same words,
/// as the SDK's resolver (which reports them at each request, not at init).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("Lambda's endpoint: Invalid Configuration: {0}")]
pub struct EndpointError(&'static str);

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
    if let Some(url) = endpoint {
        if use_fips {
            return Err(EndpointError("FIPS and custom endpoint are not supported"));
        }
        if use_dual_stack {
            return Err(EndpointError(
                "Dualstack and custom endpoint are not supported",
            ));
        }
        return Ok(url.to_string());
    }
    let region = region.ok_or(EndpointError("Missing Region"))?;
    let partition = PARTITIONS.iter().find(|p| p.claims(region)).unwrap_or(&AWS);
    let host = if use_fips { "lambda-fips" } else { "lambda" };
    let suffix = if use_dual_stack {
        partition.dual_stack_dns_suffix
    } else {
        partition.dns_suffix
    };
    Ok(format!("https://{host}.{region}.{suffix}"))
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
