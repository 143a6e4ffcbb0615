use super::*;
use crate::router::{OciRoute, Route, route};

fn zip_digest() -> Digest {
    Digest::of_sha256(&"ab".repeat(32)).unwrap()
}

fn linux() -> Platform {
    Platform::parse("linux", "amd64").unwrap()
}

fn darwin() -> Platform {
    Platform::parse("darwin", "arm64").unwrap()
}

#[test]
fn manifests_are_byte_stable() {
    // The digests a client pins in its lock file and `?digest=` sources:
    // they may never change for the same package (a change here breaks
    // every one of them).
    let target = Manifest::of_zip(
        PROVIDER_TARGET_ARTIFACT,
        &zip_digest(),
        1234,
        "p_1.0.0_linux_amd64.zip",
    );
    assert_eq!(
        String::from_utf8(target.bytes.clone()).unwrap(),
        concat!(
            r#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","#,
            r#""artifactType":"application/vnd.opentofu.provider-target","#,
            r#""config":{"mediaType":"application/vnd.oci.empty.v1+json","#,
            r#""digest":"sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","size":2},"#,
            r#""layers":[{"mediaType":"archive/zip","digest":"sha256:abababababababababababababababababababababababababababababababab","size":1234,"annotations":{"org.opencontainers.image.title":"p_1.0.0_linux_amd64.zip"}}]}"#
        )
    );
    let other = Manifest::of_zip(
        PROVIDER_TARGET_ARTIFACT,
        &zip_digest(),
        99,
        "p_1.0.0_darwin_arm64.zip",
    );
    let index = Manifest::provider_index(&[(linux(), target.clone()), (darwin(), other.clone())]);
    let swapped = Manifest::provider_index(&[(darwin(), other), (linux(), target.clone())]);
    assert_eq!(index, swapped, "the platforms' order does not matter");
    assert_eq!(index.media_type, INDEX_MEDIA_TYPE);
    let parsed: ImageIndex = serde_json::from_slice(&index.bytes).unwrap();
    assert_eq!(parsed.artifact_type.as_deref(), Some(PROVIDER_ARTIFACT));
    let os: Vec<&str> = parsed
        .manifests
        .iter()
        .map(|m| m.platform.as_ref().unwrap().os.as_str())
        .collect();
    assert_eq!(os, ["darwin", "linux"]);
    assert_eq!(parsed.manifests[1].digest, target.digest().to_string());
    assert_eq!(parsed.manifests[1].size, target.bytes.len() as u64);
    assert_eq!(
        index.digest().to_string(),
        "sha256:ff0579cea936bdd0c06deae97f9bfc2baeb2bf6f18adcb84824de175439aff80",
        "the index's digest is pinned"
    );
    let module = Manifest::of_zip(MODULE_ARTIFACT, &zip_digest(), 10, "vpc-1.0.0.zip");
    assert_eq!(
        module.digest().to_string(),
        "sha256:4d35db0419d048a0c643014ee559c9c9a025dd32f722d86c17af8e4b05e817c8",
        "a module's digest is pinned"
    );
}

#[test]
fn the_empty_config_is_the_well_known_one() {
    assert_eq!(
        empty_config().digest,
        "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
}

#[test]
fn repositories_round_trip_and_refuse_near_misses() {
    for name in [
        "providers/acme/widget",
        "mirror/registry.terraform.io/hashicorp/null",
        "mirror/localhost_8443/acme/widget",
        "mirror/xn--bcher-kva.example/acme/widget",
        "mirror/127.0.0.1_9000/acme/widget",
        "modules/my_org/vpc/aws",
    ] {
        let parts: Vec<&str> = name.split('/').collect();
        let repository = Repository::parse(&parts).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(repository.name(), name);
    }
    let port = Repository::parse(&["mirror", "localhost_8443", "acme", "widget"]).unwrap();
    assert!(
        matches!(port, Repository::Mirrored { ref hostname, .. } if hostname.as_str() == "localhost:8443")
    );
    for bad in [
        "providers/acme",
        "providers/Acme/widget",
        "providers/acme/widget/extra",
        "modules/acme/vpc",
        "mirror/acme/widget",
        "other/acme/widget",
        "mirror/bad_host_1/acme/widget",
        "providers/-acme/widget",
    ] {
        let parts: Vec<&str> = bad.split('/').collect();
        assert!(Repository::parse(&parts).is_err(), "{bad}");
    }
}

#[test]
fn tags_are_versions_with_underscores_for_plus() {
    let v = crate::version::Version::parse("1.2.3-rc.1").unwrap();
    assert_eq!(tag_of(&v), "1.2.3-rc.1");
    assert_eq!(version_of_tag("1.2.3-rc.1"), Some(v));
    // Build metadata is never a version here: `_` reads as `+`, refused.
    assert_eq!(version_of_tag("1.2.3_build"), None);
    assert_eq!(version_of_tag("latest"), None);
    assert_eq!(version_of_tag("v1.2.3"), None);
    assert_eq!(Reference::parse("latest").unwrap(), Reference::Latest);
    assert!(matches!(
        Reference::parse("nightly"),
        Err(RouteError::NotFound(_))
    ));
    assert!(matches!(
        Reference::parse("sha256:ABC"),
        Err(RouteError::BadRequest(_))
    ));
    assert!(matches!(
        Reference::parse("sha512:abc"),
        Err(RouteError::BadRequest(_))
    ));
}

#[test]
fn tag_pages_follow_last_and_n() {
    let tags: Vec<String> = ["1.1.0", "1.0.0", "2.0.0", "1.10.0"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let all = page_of_tags(tags.clone(), None, None);
    assert_eq!(all.tags, ["1.0.0", "1.1.0", "1.10.0", "2.0.0"]);
    assert!(!all.more);
    let first = page_of_tags(tags.clone(), Some(2), None);
    assert_eq!(first.tags, ["1.0.0", "1.1.0"]);
    assert!(first.more);
    let second = page_of_tags(tags.clone(), Some(2), Some("1.1.0"));
    assert_eq!(second.tags, ["1.10.0", "2.0.0"]);
    assert!(!second.more);
    let after = page_of_tags(tags.clone(), Some(2), Some("3"));
    assert!(after.tags.is_empty() && !after.more);
    let none = page_of_tags(tags, Some(0), None);
    assert!(none.tags.is_empty() && !none.more);
}

#[test]
fn scopes_name_repositories_to_pull() {
    let got = pull_scopes([
        "repository:providers/acme/widget:pull",
        "repository:modules/acme/vpc/aws:pull,push registry:catalog:*",
        "repository:providers/acme/other:push",
    ])
    .unwrap();
    assert_eq!(
        got.iter().map(Repository::name).collect::<Vec<_>>(),
        ["providers/acme/widget", "modules/acme/vpc/aws"]
    );
    assert!(pull_scopes(["repository:nothing/here:pull"]).is_err());
    assert!(pull_scopes(["repository:nocolon"]).is_err());
    assert!(pull_scopes(Vec::<&str>::new()).unwrap().is_empty());
}

#[test]
fn routes_under_v2() {
    let get = http::Method::GET;
    let r = |p: &str| route(&get, p);
    assert!(matches!(
        r("/v2/"),
        Ok(Route::Read(crate::router::ReadRoute::Oci(OciRoute::Base)))
    ));
    assert!(matches!(
        r("/v2"),
        Ok(Route::Read(crate::router::ReadRoute::Oci(OciRoute::Base)))
    ));
    assert!(matches!(
        r("/v2/token"),
        Ok(Route::Read(crate::router::ReadRoute::Oci(OciRoute::Token)))
    ));
    for path in [
        "/v2/providers/acme/widget/tags/list",
        "/v2/providers/acme/widget/manifests/1.0.0",
        "/v2/mirror/localhost_8443/acme/widget/manifests/sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "/v2/modules/acme/vpc/aws/blobs/sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "/v2/modules/acme/vpc/aws/manifests/latest",
    ] {
        let route = r(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(route.path(), path);
    }
    assert!(matches!(
        r("/v2/providers/acme/widget/manifests/nightly"),
        Err(RouteError::NotFound(_))
    ));
    assert!(matches!(
        r("/v2/providers/acme/widget/blobs/sha256:zz"),
        Err(RouteError::BadRequest(_))
    ));
    assert!(matches!(
        r("/v2/providers/acme/widget"),
        Err(RouteError::NotFound(_))
    ));
    assert!(matches!(r("/v2/tags/list"), Err(RouteError::NotFound(_))));
    assert!(matches!(
        route(
            &http::Method::PUT,
            "/v2/providers/acme/widget/manifests/1.0.0"
        ),
        Err(RouteError::MethodNotAllowed { .. })
    ));
}
