//! Each Lambda function links only what it serves, proven from `cargo tree`
//! (the resolved graph of its package alone, as `sam build` builds it, on
//! each platform that ships: the functions' arm64 and this machine's), so a heavy dependency cannot quietly come back:
//! `read` and `blob` carry no OpenPGP, archive, HCL, Markdown, sanitiser or
//! template code, and of the RSA code only the signer of CloudFront URLs
//! (issue 37: `rsa` and `sha1`, and nothing else the `cloudfront` feature
//! brings: no SSM or Secrets Manager client); `publish` and `admin` no UI; `ui` no OpenPGP; only `blob`,
//! `publish` and `admin` the S3 client; none a regular expression engine;
//! only `auth` sign-in's JWT code, the HTTP client it reaches the identity
//! provider with, and the SSM / Secrets Manager clients it reads the
//! provider's client secret with; only `fill` the pull-through cache's
//! origin client (`tfreg-cache`, and reqwest, its HTTP client); only
//! `read` and `blob` the code that invokes the fill function, and none
//! aws-sdk-lambda (they send the one `Invoke` on the DynamoDB client's SDK
//! runtime); and a function depends on no other function's handler group.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Packages whose code is OpenPGP, archives, HCL, Markdown, HTML
/// sanitising or templates.
const PGP: &[&str] = &["pgp", "rsa", "tfreg-verify", "tfreg-publish"];
/// OpenPGP without `rsa`, which the read and blob functions link to sign
/// CloudFront URLs (tfreg-lambda's feature `cloudfront`).
const PGP_BUT_RSA: &[&str] = &["pgp", "tfreg-verify", "tfreg-publish"];
const ARCHIVES: &[&str] = &["zip", "tar"];
const DOCS: &[&str] = &["hcl-rs", "pulldown-cmark", "ammonia", "html5ever"];
const UI: &[&str] = &["askama", "tfreg-ui"];
/// Only the functions that touch archives (blob, publish, admin) link S3.
const S3: &[&str] = &["aws-sdk-s3"];
/// No function links a regular expression engine: its log filter is a
/// `Targets`, not tracing-subscriber's `env-filter` (which lambda_http's
/// default `tracing` feature would also bring).
const REGEX: &[&str] = &["regex-automata", "matchers"];
/// Sign-in (issue 21): the group, its JWT library and the HTTP client it
/// reaches the identity provider with, linked by `tfreg serve` and the
/// auth function only.
const SIGNIN: &[&str] = &["tfreg-auth", "jsonwebtoken", "reqwest"];
/// The clients the auth function reads its client secret with (the CLI
/// has no use for them).
const SECRETS: &[&str] = &["aws-sdk-ssm", "aws-sdk-secretsmanager"];

/// The pull-through cache's fill engine and origin client: only the fill
/// function (and `tfreg serve`) reach upstream registries.
const CACHE: &[&str] = &["tfreg-cache"];
/// Where an outbound fetch may connect: the cache's and sign-in's.
const OUTBOUND: &[&str] = &["tfreg-outbound"];
/// The Lambda SDK: the mirror, cache and blob functions start a fill with
/// one `Invoke` on the SDK runtime the DynamoDB client links
/// (tfreg-lambda's feature `invoke`), so no function links it.
const LAMBDA_SDK: &[&str] = &["aws-sdk-lambda"];

/// The function packages and what each must not link.
fn forbidden() -> Vec<(&'static str, Vec<&'static str>)> {
    fn groups(except: &'static str) -> impl Iterator<Item = &'static str> {
        [
            "tfreg-read",
            "tfreg-publish",
            "tfreg-admin",
            "tfreg-ui",
            "tfreg-auth",
            "tfreg-cache",
        ]
        .into_iter()
        .filter(move |g| *g != except)
    }
    fn all(lists: &[&[&'static str]]) -> Vec<&'static str> {
        lists.iter().flat_map(|l| l.iter().copied()).collect()
    }
    vec![
        (
            "tfreg-function-read",
            all(&[
                PGP_BUT_RSA,
                ARCHIVES,
                DOCS,
                UI,
                S3,
                REGEX,
                SIGNIN,
                SECRETS,
                CACHE,
                OUTBOUND,
                LAMBDA_SDK,
            ])
            .into_iter()
            .chain(groups("tfreg-read"))
            .collect(),
        ),
        (
            "tfreg-function-blob",
            all(&[
                PGP_BUT_RSA,
                ARCHIVES,
                DOCS,
                UI,
                REGEX,
                SIGNIN,
                SECRETS,
                CACHE,
                OUTBOUND,
                LAMBDA_SDK,
            ])
            .into_iter()
            .chain(groups("tfreg-read"))
            .collect(),
        ),
        (
            "tfreg-function-publish",
            all(&[UI, REGEX, SIGNIN, SECRETS, CACHE, OUTBOUND, LAMBDA_SDK])
                .into_iter()
                .chain(groups("tfreg-publish"))
                .collect(),
        ),
        (
            "tfreg-function-admin",
            all(&[UI, REGEX, SIGNIN, SECRETS, CACHE, OUTBOUND, LAMBDA_SDK])
                .into_iter()
                .chain(groups("tfreg-admin"))
                .collect(),
        ),
        (
            "tfreg-function-ui",
            ["pgp", "rsa", "tfreg-verify", "aws-sdk-s3"]
                .into_iter()
                .chain(REGEX.iter().copied())
                .chain(SIGNIN.iter().copied())
                .chain(SECRETS.iter().copied())
                .chain(CACHE.iter().copied())
                .chain(OUTBOUND.iter().copied())
                .chain(LAMBDA_SDK.iter().copied())
                .chain(groups("tfreg-ui"))
                .collect(),
        ),
        (
            // rsa and p256 come with jsonwebtoken's rust_crypto backend.
            "tfreg-function-auth",
            all(&[ARCHIVES, DOCS, UI, S3, REGEX, CACHE, LAMBDA_SDK])
                .into_iter()
                .chain(["pgp", "tfreg-verify"])
                .chain(groups("tfreg-auth"))
                .collect(),
        ),
        (
            // Verifies origins' signatures (pgp) and packs modules (tar):
            // publish's rules, from tfreg-verify. No handler group at all.
            "tfreg-function-fill",
            all(&[UI, REGEX, SECRETS, LAMBDA_SDK])
                .into_iter()
                .chain(["jsonwebtoken"])
                .chain(groups("tfreg-cache"))
                .collect(),
        ),
    ]
}

/// What only the auth function links, it does link.
#[test]
fn the_auth_function_links_sign_in_and_the_secret_clients() {
    let deps = dependencies("tfreg-function-auth");
    for name in SIGNIN.iter().chain(SECRETS) {
        assert!(deps.contains(*name), "tfreg-function-auth lacks {name}");
    }
}

/// The fill function links the cache's origin client; the functions that
/// start fills, and only they, link the code that invokes it (tfreg-lambda
/// with `invoke`) and the SDK runtime it is sent with.
#[test]
fn the_fill_function_links_the_origin_client_and_its_callers_the_invoke_code() {
    let fill = dependencies("tfreg-function-fill");
    for name in CACHE
        .iter()
        .chain(OUTBOUND)
        .chain(["reqwest", "aws-sdk-s3"].iter())
    {
        assert!(fill.contains(*name), "tfreg-function-fill lacks {name}");
    }
    for (package, _) in forbidden() {
        let invokes = lambda_features(package).contains("invoke");
        let callers = ["tfreg-function-read", "tfreg-function-blob"];
        assert_eq!(
            invokes,
            callers.contains(&package),
            "{package}: tfreg-lambda's feature `invoke`"
        );
        if invokes {
            let deps = dependencies(package);
            for name in ["aws-runtime", "aws-smithy-runtime", "aws-sigv4"] {
                assert!(deps.contains(name), "{package} lacks {name}");
            }
        }
    }
}

/// The functions that sign CloudFront URLs, and only they, are built with
/// tfreg-lambda's feature `cloudfront`, link `rsa`, and gain from it only
/// `rsa`, `sha1` and what they depend on: the graph of tfreg-lambda with
/// `cloudfront` beside `invoke` has no other package than with `invoke`
/// alone (the key is read on the SDK runtime `invoke` links, not through
/// an SSM or Secrets Manager client).
#[test]
fn only_the_signing_functions_link_rsa_and_it_brings_nothing_else() {
    let signers = ["tfreg-function-read", "tfreg-function-blob"];
    for (package, _) in forbidden() {
        let signs = lambda_features(package).contains("cloudfront");
        assert_eq!(
            signs,
            signers.contains(&package),
            "{package}: tfreg-lambda's feature `cloudfront`"
        );
        if signs {
            assert!(dependencies(package).contains("rsa"), "{package} lacks rsa");
        }
    }
    let lambda = |features: &str| {
        let mut args = vec!["--features", features, "-e", "normal,build"];
        args.extend(SHIPPED_TARGETS);
        args.extend(["--prefix", "none", "--format", "{p}"]);
        cargo_tree("tfreg-lambda", &args)
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .map(str::to_string)
            .collect::<BTreeSet<String>>()
    };
    let invoke = lambda("invoke");
    let signing = lambda("invoke,cloudfront");
    let gained: BTreeSet<&String> = signing.difference(&invoke).collect();
    let mut rsa = dependencies("rsa");
    rsa.extend(dependencies("sha1"));
    let other: Vec<&&String> = gained
        .iter()
        .filter(|p| !rsa.contains(p.as_str()))
        .collect();
    assert!(
        other.is_empty(),
        "`cloudfront` brings more than rsa and sha1: {other:?}"
    );
    assert!(gained.contains(&"rsa".to_string()), "{gained:?}");
    assert!(!invoke.contains("rsa"), "rsa without `cloudfront`");
}

/// `cargo tree -p package` with `args` (offline, the lock file as it is);
/// fails the test, with cargo's message, when cargo does.
fn cargo_tree(package: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .args(["tree", "--locked", "--offline", "-p", package])
        .args(args)
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The features tfreg-lambda is built with for `package`.
fn lambda_features(package: &str) -> BTreeSet<String> {
    let tree = cargo_tree(
        package,
        &[
            "-e",
            "normal",
            "--prefix",
            "none",
            "-i",
            "tfreg-lambda",
            "--format",
            "{p} {f}",
        ],
    );
    let line = tree
        .lines()
        .find(|l| l.starts_with("tfreg-lambda "))
        .unwrap_or_else(|| panic!("{package}: no tfreg-lambda in\n{tree}"));
    line.rsplit(' ')
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect()
}

/// The platforms whose graphs are checked: the Lambda functions'
/// (template.yaml's `arm64`) and this machine's (`tfreg serve`, the
/// functions under `scripts/lambda-local`). Not `--target all`: that needs
/// the sources of every platform's dependencies (core-foundation, windows-sys,
/// ...), which a cargo home that has only built for Linux does not hold, and
/// the test runs `--offline`.
const SHIPPED_TARGETS: [&str; 4] = [
    "--target",
    "aarch64-unknown-linux-gnu",
    "--target",
    "host-tuple",
];

/// The names of every package in `package`'s normal and build dependency
/// graph, on each platform that ships ([`SHIPPED_TARGETS`]).
fn dependencies(package: &str) -> BTreeSet<String> {
    let mut args = vec!["-e", "normal,build"];
    args.extend(SHIPPED_TARGETS);
    args.extend(["--prefix", "none", "--format", "{p}"]);
    cargo_tree(package, &args)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

#[test]
fn each_function_links_only_what_it_serves() {
    let mut found = Vec::new();
    for (package, forbidden) in forbidden() {
        let deps = dependencies(package);
        // The check sees the graph: the package's own group and the runtime are in it.
        assert!(deps.contains(package), "{package}: {deps:?}");
        assert!(deps.contains("tfreg-lambda"), "{package}: {deps:?}");
        assert!(deps.contains("lambda_http"), "{package}: {deps:?}");
        for name in forbidden {
            if deps.contains(name) {
                found.push(format!("{package} depends on {name}"));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The check can fail: the `tfreg` CLI, which serves every group, has each
/// of the crates the functions must not link in its graph.
#[test]
fn the_forbidden_crates_are_named_as_cargo_names_them() {
    let cli = dependencies("tfreg");
    for name in PGP
        .iter()
        .chain(ARCHIVES)
        .chain(DOCS)
        .chain(UI)
        .chain(S3)
        .chain(REGEX)
        .chain(SIGNIN)
        .chain(CACHE)
    {
        assert!(
            cli.contains(*name),
            "no package named {name} in tfreg's graph"
        );
    }
    // The Lambda SDK is a dev-dependency only: tfreg-lambda's tests compare
    // its `Invoke` with the SDK's.
    let dev = cargo_tree(
        "tfreg-lambda",
        &[
            "-e", "dev", "--depth", "1", "--prefix", "none", "--format", "{p}",
        ],
    );
    for name in LAMBDA_SDK {
        assert!(
            dev.lines()
                .any(|l| l.split_whitespace().next() == Some(*name)),
            "no package named {name} among tfreg-lambda's dev-dependencies:\n{dev}"
        );
    }
}
