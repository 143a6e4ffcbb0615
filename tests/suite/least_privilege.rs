//! Least privilege, proven statically (issue 36), in-process: every
//! function's role in template.yaml grants exactly the AWS calls its code
//! makes (infra/aws-calls.json, which the role-scoped runs on moto keep
//! equal to what they record: `roles`), on exactly their resources, with
//! conditions that admit them, and nothing else; in the stack a first
//! `sam deploy --guided` makes and with every option on. The checker is
//! shown to find each kind of excess and shortfall, the two found from
//! outside among them.

use serde_json::json;

use crate::support::cfn::{Stack, template_yaml};
use crate::support::iam::{CallsList, Role, Statement, check, sam_roles};

/// An RSA 2048 public key as infra/archive-key prints it (a parameter value).
const PUBLIC_KEY: &str = "MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAt0599aQJ0sspSnmtGLRO.\
    qJI1oUQHMj3Opp9htcFWqo3i/NOhVgmKV3paHwKO0e2+HMjX7IoqmXoFRdSkhSPA.\
    CyMK00iIySMLqbSd8wjnS+DJHqg8PNJXgiRQoqi7FJVZHPDro2/TvoD3guSBdfVU.\
    JyOWJRYvFZXFeU5m3/5Vu8tkM99WSrrnRF3Vzu9oEn2Jrq7vPNtb30TfNwDheCUU.\
    R776n1/JdL/f7zIrmnjdA1vsnamY2Z5m2kSeP9JeeBl/RdlGMLrJgQr6INjfnZ4+.\
    lMDDlyA248ethTfV+dcB25bhLXCigLZysfuS9ptkcJPS/QORfH2kqY63yXeaPBKW.\
    EwIDAQAB";

/// The configurations: a first `sam deploy --guided` (every default, the
/// archive key of slot A in SSM), every option on (the client secret in
/// SSM or in Secrets Manager; archive keys in both slots, in Secrets
/// Manager, slot B signing), archives presigned, and no download counts
/// (the read functions may then write no usage item).
pub const STACKS: [(&str, &[(&str, &str)]); 5] = [
    ("basic", &[("ArchiveSigningPublicKeyA", PUBLIC_KEY)]),
    (
        "no download counts",
        &[
            ("ArchiveSigningPublicKeyA", PUBLIC_KEY),
            ("DownloadCounts", "false"),
        ],
    ),
    ("presigned archives", &[("ArchiveDelivery", "presigned")]),
    (
        "full, secret in SSM",
        &[
            ("ArchiveSigningPublicKeyA", PUBLIC_KEY),
            ("DomainName", "registry.example.com"),
            (
                "CertificateArn",
                "arn:aws:acm:us-east-1:123456789012:certificate/abc",
            ),
            ("OidcIssuer", "https://login.example.com"),
            ("OidcClientId", "tfreg"),
            ("OidcClientSecretParameter", "/tfreg/oidc-client-secret"),
            ("CiIssuers", "https://token.actions.githubusercontent.com"),
        ],
    ),
    (
        "full, secret in Secrets Manager",
        &[
            ("OidcIssuer", "https://login.example.com"),
            ("OidcClientId", "tfreg"),
            (
                "OidcClientSecretArn",
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:tfreg-oidc-AbCdEf",
            ),
            ("CiIssuers", "https://gitlab.com"),
            ("ArchiveSigningPublicKeyA", PUBLIC_KEY),
            ("ArchiveSigningPublicKeyB", PUBLIC_KEY),
            ("ArchiveSigningKeySlot", "B"),
            ("ArchiveSigningKeyStore", "secretsmanager"),
        ],
    ),
];

#[test]
fn every_role_grants_exactly_the_calls_its_function_makes() {
    let template = template_yaml();
    let list = CallsList::read();
    let mut seen = std::collections::BTreeSet::new();
    for (name, params) in STACKS {
        let stack = Stack::new(&template, params);
        let roles = sam_roles(&stack);
        let mut findings = vec![];
        for (function, role) in &roles {
            seen.insert(function.clone());
            assert!(
                list.functions.contains_key(function),
                "infra/aws-calls.json lists no calls of {function}"
            );
            findings.extend(check(function, role, &list.of(function, &stack), &stack));
        }
        assert!(
            findings.is_empty(),
            "{name}: the roles are not the calls:\n{}",
            findings.join("\n")
        );
    }
    // The recorder is the tests': never deployed.
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml")).unwrap();
    assert!(!text.contains(tfreg_store::aws::record::RECORD_AWS_CALLS));
    let listed: std::collections::BTreeSet<String> = list.functions.keys().cloned().collect();
    assert_eq!(
        listed, seen,
        "the list names exactly the template's functions"
    );
    // Each call says which run makes it, or why none does.
    for (function, calls) in &list.functions {
        for l in calls {
            assert!(
                l.made_in.is_empty() != l.unrecorded.is_none(),
                "{function}: {:?} names the runs that make it or (only) why none does",
                l.call
            );
            for run in &l.made_in {
                assert!(["guided", "full"].contains(&run.as_str()), "{run}");
            }
        }
    }
}

fn statement(
    sid: &str,
    actions: &[&str],
    resources: &[&str],
    condition: serde_json::Value,
) -> Statement {
    Statement {
        sid: sid.into(),
        effect: "Allow".into(),
        actions: actions.iter().map(|a| a.to_string()).collect(),
        resources: resources.iter().map(|r| r.to_string()).collect(),
        condition,
    }
}

/// What the checker says of `function`'s role in the basic stack once
/// `change` has been made to it.
fn findings_after(function: &str, change: impl FnOnce(&mut Role)) -> Vec<String> {
    let template = template_yaml();
    let stack = Stack::new(&template, STACKS[0].1);
    let list = CallsList::read();
    let mut roles = sam_roles(&stack);
    let role = roles.get_mut(function).unwrap();
    change(role);
    check(function, role, &list.of(function, &stack), &stack)
}

fn assert_finds(findings: &[String], needle: &str) {
    assert!(
        findings.iter().any(|f| f.contains(needle)),
        "expected a finding with {needle:?}, got {findings:#?}"
    );
}

/// The two found from outside, as the template had them, and each kind of
/// excess: the checker is not a test that cannot fail.
#[test]
fn the_checker_finds_shortfalls_and_excess() {
    // blob granted GetItem only: the cached archive's Query is refused.
    let f = findings_after("BlobFunction", |r| {
        r.statements
            .retain(|s| !s.actions.contains(&"dynamodb:Query".to_string()))
    });
    assert_finds(&f, "dynamodb:Query on arn:Table (CACHE#*) is not granted");
    // The token stamp's statement as it was: StringEquals ReturnValues NONE
    // refuses an UpdateItem that sends no ReturnValues.
    let template = template_yaml();
    let stack = Stack::new(&template, &[]);
    let list = CallsList::read();
    let role = &sam_roles(&stack)["ProviderVersionsFunction"];
    let mut calls: Vec<_> = list
        .of("ProviderVersionsFunction", &stack)
        .into_iter()
        .cloned()
        .collect();
    for l in &mut calls {
        l.call.return_values = None;
    }
    let mut strict = Role {
        statements: role.statements.clone(),
        managed: vec![],
    };
    for s in &mut strict.statements {
        if s.sid == "RecordTokenUse" {
            let rv = s.condition["StringEqualsIfExists"].take();
            s.condition["StringEquals"] = rv;
            s.condition
                .as_object_mut()
                .unwrap()
                .remove("StringEqualsIfExists");
        }
    }
    let refs: Vec<_> = calls.iter().collect();
    assert_finds(
        &check("ProviderVersionsFunction", &strict, &refs, &stack),
        "StringEquals dynamodb:ReturnValues",
    );
    // With IfExists, a stamp sending none passes (DynamoDB's default is NONE).
    let lenient = check("ProviderVersionsFunction", role, &refs, &stack);
    assert!(
        !lenient.iter().any(|f| f.contains("is not granted")),
        "{lenient:#?}"
    );

    // Excess: an action no call uses, a wildcard, a resource beyond the
    // prefixes, a partition no call writes, a managed policy.
    let f = findings_after("ProviderVersionsFunction", |r| {
        r.statements.push(statement(
            "Extra",
            &["dynamodb:PutItem"],
            &["arn:Table"],
            json!(null),
        ))
    });
    assert_finds(
        &f,
        "grants dynamodb:PutItem on arn:Table, which no call uses",
    );
    let f = findings_after("AdminFunction", |r| {
        r.statements
            .push(statement("All", &["s3:*"], &["*"], json!(null)))
    });
    assert_finds(&f, "wildcard action s3:*");
    assert_finds(&f, "resource *");
    let f = findings_after("PublishFunction", |r| {
        for s in &mut r.statements {
            for res in &mut s.resources {
                if res.ends_with("/uploads/*") {
                    *res = "arn:Bucket/*".into();
                }
            }
        }
    });
    assert_finds(&f, "on arn:Bucket/uploads/* (no partition) is not granted");
    assert_finds(&f, "on arn:Bucket/*, which no call uses");
    let f = findings_after("UiFunction", |r| {
        for s in &mut r.statements {
            if s.sid == "EndSessions" {
                s.condition["ForAllValues:StringEquals"]["dynamodb:LeadingKeys"] =
                    json!(["SIGNEDOUT", "AUDIT", "TOKENS"]);
            }
        }
    });
    assert_finds(&f, "allows dynamodb:LeadingKeys TOKENS, which no call uses");
    // The archive signing key: the signing slot's parameter only, and only
    // for the functions that sign.
    let key = "arn:aws:ssm:us-east-1:123456789012:parameter/tfreg/archive-signing-key-a";
    let f = findings_after("ProviderDownloadFunction", |r| {
        for s in &mut r.statements {
            if s.sid == "ReadArchiveSigningKey" {
                s.resources = vec!["arn:aws:ssm:us-east-1:123456789012:parameter/tfreg/*".into()];
            }
        }
    });
    assert_finds(
        &f,
        &format!("ssm:GetParameter on {key} (no partition) is not granted"),
    );
    let f = findings_after("ProviderVersionsFunction", |r| {
        r.statements.push(statement(
            "ReadArchiveSigningKey",
            &["ssm:GetParameter"],
            &[key],
            json!(null),
        ))
    });
    assert_finds(
        &f,
        &format!("grants ssm:GetParameter on {key}, which no call uses"),
    );
    let f = findings_after("UiFunction", |r| {
        r.managed.push("AmazonDynamoDBFullAccess".into())
    });
    assert_finds(
        &f,
        "managed policy or policy template AmazonDynamoDBFullAccess",
    );
}
