//! The functions never drift from the router: one binary per endpoint, and
//! every route `cargo lambda watch` knows leads to one of them.

use std::collections::BTreeSet;

use tfreg::router::Endpoint;

/// The binaries of this crate, as cargo built them for this test.
fn binaries() -> Vec<(&'static str, &'static str)> {
    vec![
        ("discovery", env!("CARGO_BIN_EXE_discovery")),
        ("provider-versions", env!("CARGO_BIN_EXE_provider-versions")),
        ("provider-download", env!("CARGO_BIN_EXE_provider-download")),
        ("module-versions", env!("CARGO_BIN_EXE_module-versions")),
        ("module-download", env!("CARGO_BIN_EXE_module-download")),
        ("mirror-index", env!("CARGO_BIN_EXE_mirror-index")),
        ("mirror-version", env!("CARGO_BIN_EXE_mirror-version")),
        ("blob", env!("CARGO_BIN_EXE_blob")),
        ("publish", env!("CARGO_BIN_EXE_publish")),
    ]
}

#[test]
fn one_binary_per_endpoint() {
    let endpoints: BTreeSet<&str> = Endpoint::ALL.iter().map(|e| e.name()).collect();
    let bins: BTreeSet<&str> = binaries().iter().map(|(n, _)| *n).collect();
    assert_eq!(bins, endpoints);
    let on_disk: BTreeSet<String> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/bin"))
            .unwrap()
            .map(|e| {
                e.unwrap()
                    .path()
                    .file_stem()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
    assert_eq!(on_disk, endpoints.iter().map(|s| s.to_string()).collect());
    for (_, path) in binaries() {
        assert!(std::path::Path::new(path).exists(), "{path}");
    }
}

#[test]
fn every_watch_route_leads_to_a_function_and_every_function_has_a_route() {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml")).unwrap();
    let section = manifest
        .split("[workspace.metadata.lambda.watch.router]")
        .nth(1)
        .expect("the workspace Cargo.toml routes functions for cargo lambda watch");
    let routes: Vec<(String, String)> = section
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once(" = "))
        .map(|(path, f)| {
            (
                path.trim_matches('"').to_string(),
                f.trim().trim_matches('"').to_string(),
            )
        })
        .collect();
    let endpoints: BTreeSet<&str> = Endpoint::ALL.iter().map(|e| e.name()).collect();
    let routed: BTreeSet<&str> = routes.iter().map(|(_, f)| f.as_str()).collect();
    assert_eq!(
        routed, endpoints,
        "every function has a route and every route a function"
    );
    // And the shared router agrees: a sample path of each watch route is routed
    // to the endpoint of the function it names.
    for (pattern, function) in &routes {
        let sample = pattern
            .replace("{namespace}", "acme")
            .replace("{type}", "null")
            .replace("{name}", "vpc")
            .replace("{system}", "aws")
            .replace("{version}/download/", "1.0.0/download/")
            .replace("{version}/download", "1.0.0/download")
            .replace("{version}", "1.0.0.json")
            .replace("{os}", "linux")
            .replace("{arch}", "amd64")
            .replace("{hostname}", "registry.terraform.io")
            .replace("{*key}", "archives/abc/x.zip")
            .replace("{*operation}", "providers/acme/null/1.0.0/begin");
        let method = if function == "publish" {
            http::Method::POST
        } else {
            http::Method::GET
        };
        let route =
            tfreg::router::route(&method, &sample).unwrap_or_else(|e| panic!("{sample}: {e}"));
        assert_eq!(route.endpoint().name(), function, "{pattern}");
    }
}
