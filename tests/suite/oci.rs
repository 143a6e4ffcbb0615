//! The OCI view (issue 40): providers served as OCI artifacts, as OpenTofu
//! 1.10+ reads them with `oci_mirror`.
//!
//! OpenTofu cannot be installed here, so its sequence (from
//! opentofu/opentofu v1.12 and oras-go) is reproduced request by request on
//! both backends, private: the repository's `401` and its `Bearer`
//! challenge, the token endpoint with Basic credentials, the tag list in
//! pages, HEAD then GET of the tag's index, the platform's manifest by
//! digest (exactly one `archive/zip` layer, under 4 MiB), the blob. The
//! pulled zip's sha256 is the SHA256SUMS line, its `zh:` and `h1:` those
//! of the registry protocol. Then real OCI clients pull from a real `tfreg
//! serve` over HTTPS: skopeo (Debian) and the ORAS Python SDK (PyPI).

use std::io::Read as _;
use std::path::Path;
use std::process::Command;

use base64::Engine as _;
use http::{Method, StatusCode};
use serde_json::Value;
use tfreg_model::address::ProviderName;
use tfreg_model::hashing::sha256_hex;
use tfreg_model::oci::{self, ImageIndex, ImageManifest};
use tfreg_model::router::{AdminRoute, LifecycleAction, PublishTarget, Route};
use tfreg_model::token::Scope;
use tfreg_model::version::Version;
use tfreg_testkit::TestSigner;
use tfreg_testkit::{PUBLIC_URL, TestRegistry, TestResponse, module_archive};
use tfreg_testkit::{provider_release, provider_request};

use crate::backend_contract::contract;
use crate::cache_mirror::{LogOnFailure, Origin, Rig, files_named};
use crate::support::dist::provider_dist;
use crate::support::gpg::Gpg;
use crate::support::server::Server;
use crate::support::tools::Tools;

const REPO: &str = "providers/acme/widget";
const PLATFORMS: [&str; 2] = ["linux_amd64", "darwin_arm64"];

fn target(version: &str) -> PublishTarget {
    PublishTarget::Provider {
        provider: ProviderName::parse("acme", "widget").unwrap(),
        version: Version::parse(version).unwrap(),
    }
}

/// Publish acme/widget `versions`, signed; the files of each.
async fn publish(r: &TestRegistry, versions: &[&str]) -> Vec<Vec<(String, Vec<u8>)>> {
    let signer = TestSigner::rsa();
    let token = r.token(Scope::Publish, Some("acme")).await;
    let mut all = Vec::new();
    for version in versions {
        let files = provider_release("widget", version, &PLATFORMS, &signer);
        r.publish(&target(version), &token, &files, provider_request(&signer))
            .await
            .expect(StatusCode::CREATED, "publish");
        all.push(files);
    }
    all
}

fn header<'a>(resp: &'a TestResponse, name: &str) -> &'a str {
    resp.headers
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header: {:?}", resp.headers))
        .to_str()
        .unwrap()
}

/// `key="value"` of a `WWW-Authenticate: Bearer ...` challenge.
fn challenge_param(challenge: &str, key: &str) -> String {
    let rest = challenge
        .strip_prefix("Bearer ")
        .expect("a Bearer challenge");
    rest.split("\",")
        .filter_map(|kv| kv.split_once("=\""))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.trim_end_matches('"').to_string())
        .unwrap_or_else(|| panic!("no {key} in {challenge}"))
}

fn basic(password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("opentofu:{password}"))
    )
}

async fn get_as(
    r: &TestRegistry,
    method: Method,
    path: &str,
    bearer: Option<&str>,
) -> TestResponse {
    let accept = [(
        "accept",
        "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json",
    )];
    r.request(method, path, bearer, &accept, bytes::Bytes::new())
        .await
}

/// What oras-go does on a `401`: read the challenge, ask its realm for a
/// bearer of its scope with Basic credentials. The bearer.
async fn bearer_for(r: &TestRegistry, refused: &TestResponse, token: &str) -> String {
    assert_eq!(
        refused.status,
        StatusCode::UNAUTHORIZED,
        "{}",
        refused.text()
    );
    let challenge = header(refused, "www-authenticate");
    let realm = challenge_param(challenge, "realm");
    let service = challenge_param(challenge, "service");
    let scope = challenge_param(challenge, "scope");
    assert_eq!(realm, format!("{PUBLIC_URL}/v2/token"));
    assert_eq!(service, "registry.test");
    let path = format!(
        "{}?scope={}&service={service}",
        realm.strip_prefix(PUBLIC_URL).unwrap(),
        scope.replace(':', "%3A").replace('/', "%2F")
    );
    let auth = basic(token);
    let resp = r
        .request(
            Method::GET,
            &path,
            None,
            &[("authorization", &auth)],
            bytes::Bytes::new(),
        )
        .await;
    resp.expect(StatusCode::OK, "the token endpoint");
    let body = resp.json();
    assert_eq!(body["expires_in"], 300);
    body["token"].as_str().unwrap().to_string()
}

/// The token endpoint, asked as oras-go asks it (Basic credentials, the
/// repository's pull scope), refuses `token` a bearer for `repo`: 403.
async fn no_bearer_for(r: &TestRegistry, repo: &str, token: &str) {
    let asked = r
        .request(
            Method::GET,
            &format!("/v2/token?scope=repository:{repo}:pull&service=registry.test"),
            None,
            &[("authorization", &basic(token))],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(asked.status, StatusCode::FORBIDDEN, "{}", asked.text());
}

/// OpenTofu's first request to `repo` (at `path` under it) refused with
/// the challenge of that repository's scope; the bearer it then gets for
/// `token`.
async fn signed_in(r: &TestRegistry, repo: &str, path: &str, token: &str) -> String {
    let refused = get_as(r, Method::GET, &format!("/v2/{repo}/{path}"), None).await;
    assert!(refused.error().contains("token"), "{}", refused.text());
    assert_eq!(
        challenge_param(header(&refused, "www-authenticate"), "scope"),
        format!("repository:{repo}:pull")
    );
    bearer_for(r, &refused, token).await
}

/// OpenTofu's way from a tag to a platform's zip; the zip and the digests
/// it went through (index, manifest).
async fn pull(
    r: &TestRegistry,
    repo: &str,
    tag: &str,
    platform: (&str, &str),
    bearer: &str,
) -> (Vec<u8>, String, String) {
    let head = get_as(
        r,
        Method::HEAD,
        &format!("/v2/{repo}/manifests/{tag}"),
        Some(bearer),
    )
    .await;
    head.expect(StatusCode::OK, "HEAD of the tag");
    assert!(head.body.is_empty());
    assert_eq!(header(&head, "content-type"), oci::INDEX_MEDIA_TYPE);
    let index_digest = header(&head, "docker-content-digest").to_string();
    let length: usize = header(&head, "content-length").parse().unwrap();

    let got = get_as(
        r,
        Method::GET,
        &format!("/v2/{repo}/manifests/{tag}"),
        Some(bearer),
    )
    .await;
    got.expect(StatusCode::OK, "GET of the tag");
    assert_eq!(got.body.len(), length, "HEAD's Content-Length is GET's");
    assert!(got.body.len() <= oci::MAX_MANIFEST_BYTES);
    assert_eq!(format!("sha256:{}", sha256_hex(&got.body)), index_digest);
    assert_eq!(header(&got, "docker-content-digest"), index_digest);
    let raw: Value = serde_json::from_slice(&got.body).unwrap();
    let index: ImageIndex = serde_json::from_value(raw.clone()).unwrap();
    assert_eq!(index.media_type, oci::INDEX_MEDIA_TYPE);
    assert_eq!(index.artifact_type.as_deref(), Some(oci::PROVIDER_ARTIFACT));
    // OpenTofu skips an entry whose platform has more than os and architecture.
    let entry = raw["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["artifactType"] == oci::PROVIDER_TARGET_ARTIFACT
                && m["platform"]["os"] == platform.0
                && m["platform"]["architecture"] == platform.1
                && m["platform"].as_object().unwrap().len() == 2
        })
        .unwrap_or_else(|| panic!("no {platform:?} in {raw}"));
    let manifest_digest = entry["digest"].as_str().unwrap().to_string();

    let got = get_as(
        r,
        Method::GET,
        &format!("/v2/{repo}/manifests/{manifest_digest}"),
        Some(bearer),
    )
    .await;
    got.expect(StatusCode::OK, "the platform's manifest");
    assert_eq!(header(&got, "content-type"), oci::MANIFEST_MEDIA_TYPE);
    assert_eq!(format!("sha256:{}", sha256_hex(&got.body)), manifest_digest);
    assert_eq!(entry["size"], got.body.len());
    let manifest: ImageManifest = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(
        manifest.artifact_type.as_deref(),
        Some(oci::PROVIDER_TARGET_ARTIFACT)
    );
    let zip = the_zip_layer(r, repo, &manifest, bearer).await;
    // The config OpenTofu ignores is the empty one, also served.
    let config = get_as(
        r,
        Method::GET,
        &format!("/v2/{repo}/blobs/{}", manifest.config.digest),
        Some(bearer),
    )
    .await;
    config.expect(StatusCode::OK, "the empty config");
    assert_eq!(&config.body[..], b"{}");
    (zip, index_digest, manifest_digest)
}

/// A manifest's one layer, `archive/zip`, as OpenTofu takes it: the blob's
/// redirect followed, the bytes those the layer names (sha256 and size).
async fn the_zip_layer(
    r: &TestRegistry,
    repo: &str,
    manifest: &ImageManifest,
    bearer: &str,
) -> Vec<u8> {
    let [layer] = manifest.layers.as_slice() else {
        panic!("exactly one layer: {manifest:?}")
    };
    assert_eq!(layer.media_type, oci::ZIP_LAYER);
    let path = format!("/v2/{repo}/blobs/{}", layer.digest);
    let blob = get_as(r, Method::GET, &path, Some(bearer)).await;
    assert_eq!(
        blob.status,
        StatusCode::TEMPORARY_REDIRECT,
        "{}",
        blob.text()
    );
    let zip = r.download(header(&blob, "location")).await;
    zip.expect(StatusCode::OK, "the zip");
    assert_eq!(format!("sha256:{}", sha256_hex(&zip.body)), layer.digest);
    assert_eq!(zip.body.len() as u64, layer.size);
    zip.body.to_vec()
}

/// `h1:` of a zip, as Terraform computes it (its files' sha256, sorted).
fn h1_of(zip: &[u8]) -> String {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
    let mut entries = Vec::new();
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).unwrap();
        if file.is_dir() {
            continue;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).unwrap();
        entries.push((file.name().to_string(), sha256_hex(&bytes)));
    }
    tfreg_model::hashing::h1_from_file_hashes(entries)
}

/// Bad input: each path answers its 4xx with `{"errors": [...]}`.
async fn bad_input_refused<const N: usize>(
    r: &TestRegistry,
    bearer: &str,
    cases: [(String, StatusCode); N],
) {
    for (path, status) in cases {
        let resp = get_as(r, Method::GET, &path, Some(bearer)).await;
        assert_eq!(resp.status, status, "{path}: {}", resp.text());
        assert!(!resp.error().is_empty(), "{path}");
    }
}

async fn admin(r: &TestRegistry, token: &str, route: AdminRoute) {
    let body = match route {
        AdminRoute::Lifecycle { .. } => r#"{"message": "broken"}"#,
        _ => "",
    };
    let route = Route::Admin(route);
    let method = route.methods()[0].clone();
    let headers = [("content-type", "application/json")];
    r.request(
        method,
        &route.path(),
        Some(token),
        &headers,
        bytes::Bytes::from(body),
    )
    .await
    .expect(StatusCode::OK, &route.path());
}

async fn opentofu_pulls_providers_over_oci(r: TestRegistry) {
    let files = publish(&r, &["1.0.0", "1.1.0"]).await;
    let r = r.reconfigure(|mut registry| {
        registry.config.anonymous_reads = false;
        registry
    });
    let read = r.token(Scope::Read, Some("acme")).await;

    // OpenTofu never asks GET /v2/; the repository endpoint's 401 names
    // the token endpoint.
    let bearer = signed_in(&r, REPO, "tags/list", &read).await;

    // The tag list, in pages of one (`n`, `last`, `Link`).
    let first = get_as(
        &r,
        Method::GET,
        &format!("/v2/{REPO}/tags/list?n=1"),
        Some(&bearer),
    )
    .await;
    first.expect(StatusCode::OK, "tags");
    assert_eq!(first.json()["tags"], serde_json::json!(["1.0.0"]));
    assert_eq!(first.json()["name"], REPO);
    let link = header(&first, "link");
    assert_eq!(
        link,
        format!("</v2/{REPO}/tags/list?n=1&last=1.0.0>; rel=\"next\"")
    );
    let next = link.trim_start_matches('<').split('>').next().unwrap();
    let second = get_as(&r, Method::GET, next, Some(&bearer)).await;
    assert_eq!(second.json()["tags"], serde_json::json!(["1.1.0"]));
    assert!(second.headers.get("link").is_none());

    // Each platform's zip: the SHA256SUMS line, the registry protocol's zh:
    // and h1:.
    let mut index_digests = Vec::new();
    for (platform, os_arch) in [
        ("linux_amd64", ("linux", "amd64")),
        ("darwin_arm64", ("darwin", "arm64")),
    ] {
        let (zip, index, _) = pull(&r, REPO, "1.1.0", os_arch, &bearer).await;
        index_digests.push(index);
        let name = format!("terraform-provider-widget_1.1.0_{platform}.zip");
        let published = &files[1].iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(&zip, published, "the zip, byte for byte");
        let download = r
            .get_with(
                &format!(
                    "/v1/providers/acme/widget/1.1.0/download/{}/{}",
                    os_arch.0, os_arch.1
                ),
                &read,
            )
            .await;
        assert_eq!(download.json()["shasum"], sha256_hex(&zip));
        let mirror = r
            .get_with("/v1/mirror/registry.test/acme/widget/1.1.0.json", &read)
            .await;
        let hashes = &mirror.json()["archives"][platform]["hashes"];
        let hashes: Vec<&str> = hashes
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap())
            .collect();
        assert!(
            hashes.contains(&tfreg_model::hashing::zh_hash(&sha256_hex(&zip)).as_str()),
            "{hashes:?}"
        );
        assert!(hashes.contains(&h1_of(&zip).as_str()), "{hashes:?}");
    }
    assert_eq!(index_digests[0], index_digests[1], "one index per version");
    let index_110 = index_digests[0].clone();

    // The network mirror's host names the same releases: the same digests.
    let mirrored = "mirror/registry.test/acme/widget";
    let refused = get_as(
        &r,
        Method::GET,
        &format!("/v2/{mirrored}/manifests/1.1.0"),
        Some(&bearer),
    )
    .await;
    let mirror_bearer = bearer_for(&r, &refused, &read).await;
    let (_, index, _) = pull(&r, mirrored, "1.1.0", ("linux", "amd64"), &mirror_bearer).await;
    assert_eq!(index, index_110);

    // A raw tfreg token is a bearer too (curl, scripts).
    get_as(
        &r,
        Method::GET,
        &format!("/v2/{REPO}/tags/list"),
        Some(&read),
    )
    .await
    .expect(StatusCode::OK, "a tfreg token as the bearer");

    // A bearer is for its repository only.
    let other = get_as(
        &r,
        Method::GET,
        "/v2/providers/acme/other/tags/list",
        Some(&bearer),
    )
    .await;
    assert_eq!(other.status, StatusCode::UNAUTHORIZED, "{}", other.text());
    assert!(
        other.error().contains("not for repository"),
        "{}",
        other.text()
    );
    // A token for another namespace gets no bearer for this one.
    let stranger = r.token(Scope::Read, Some("other")).await;
    no_bearer_for(&r, REPO, &stranger).await;
    // Bad input: clear 4xx, `{"errors": [...]}`.
    bad_input_refused(
        &r,
        &bearer,
        [
            (
                format!("/v2/{REPO}/manifests/sha256:zz"),
                StatusCode::BAD_REQUEST,
            ),
            (
                format!("/v2/{REPO}/manifests/nightly"),
                StatusCode::NOT_FOUND,
            ),
            (format!("/v2/{REPO}/manifests/9.9.9"), StatusCode::NOT_FOUND),
            (
                format!("/v2/{REPO}/manifests/sha256:{}", "0".repeat(64)),
                StatusCode::NOT_FOUND,
            ),
            (
                format!("/v2/{REPO}/blobs/sha256:{}", "0".repeat(64)),
                StatusCode::NOT_FOUND,
            ),
            (
                format!("/v2/{REPO}/tags/list?n=many"),
                StatusCode::BAD_REQUEST,
            ),
            (
                "/v2/nothing/here/tags/list".to_string(),
                StatusCode::NOT_FOUND,
            ),
        ],
    )
    .await;
    let no_basic = r
        .request(
            Method::GET,
            "/v2/token",
            None,
            &[("authorization", "Basic !!")],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(
        no_basic.status,
        StatusCode::UNAUTHORIZED,
        "{}",
        no_basic.text()
    );

    // Yanked: out of the tag list, still pulled by digest (lock files).
    let (_, index_100, manifest_100) = pull(&r, REPO, "1.0.0", ("linux", "amd64"), &bearer).await;
    let admin_token = r.token(Scope::Admin, None).await;
    admin(
        &r,
        &admin_token,
        AdminRoute::Lifecycle {
            release: target("1.0.0"),
            action: LifecycleAction::Yank,
        },
    )
    .await;
    let tags = get_as(
        &r,
        Method::GET,
        &format!("/v2/{REPO}/tags/list"),
        Some(&bearer),
    )
    .await;
    assert_eq!(tags.json()["tags"], serde_json::json!(["1.1.0"]));
    for digest in [&index_100, &manifest_100] {
        let got = get_as(
            &r,
            Method::GET,
            &format!("/v2/{REPO}/manifests/{digest}"),
            Some(&bearer),
        )
        .await;
        got.expect(StatusCode::OK, "a yanked version by digest");
        assert_eq!(header(&got, "docker-content-digest"), digest.as_str());
    }

    // A revoked token: refused at the token endpoint, and its bearers at
    // every repository endpoint.
    let id =
        &tfreg_model::token::presented_hash(&read).unwrap()[..tfreg_model::token::TOKEN_ID_LEN];
    admin(
        &r,
        &admin_token,
        AdminRoute::RevokeToken { id: id.to_string() },
    )
    .await;
    let asked = r
        .request(
            Method::GET,
            &format!("/v2/token?scope=repository:{REPO}:pull"),
            None,
            &[("authorization", &basic(&read))],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(asked.status, StatusCode::UNAUTHORIZED, "{}", asked.text());
    for path in [
        format!("/v2/{REPO}/tags/list"),
        format!("/v2/{REPO}/manifests/1.1.0"),
        format!("/v2/{REPO}/manifests/{index_110}"),
        format!("/v2/{REPO}/blobs/{}", oci::Digest::of(oci::EMPTY_CONFIG)),
    ] {
        let resp = get_as(&r, Method::GET, &path, Some(&bearer)).await;
        assert_eq!(
            resp.status,
            StatusCode::UNAUTHORIZED,
            "{path}: {}",
            resp.text()
        );
        assert!(resp.headers.get("www-authenticate").is_some(), "{path}");
    }
}

/// A public registry (anonymous reads): no challenge, the same answers.
async fn a_public_registry_serves_oci_without_a_token(r: TestRegistry) {
    publish(&r, &["1.0.0"]).await;
    let tags = get_as(&r, Method::GET, &format!("/v2/{REPO}/tags/list"), None).await;
    tags.expect(StatusCode::OK, "anonymous tags");
    let index = get_as(
        &r,
        Method::GET,
        &format!("/v2/{REPO}/manifests/1.0.0"),
        None,
    )
    .await;
    index.expect(StatusCode::OK, "anonymous index");
    // The same digest every time, on every backend (pinned by the model's tests).
    let again = get_as(
        &r,
        Method::GET,
        &format!("/v2/{REPO}/manifests/1.0.0"),
        None,
    )
    .await;
    assert_eq!(index.body, again.body);
    let base = get_as(&r, Method::GET, "/v2/", None).await;
    base.expect(StatusCode::OK, "GET /v2/");
    assert_eq!(
        header(&base, "docker-distribution-api-version"),
        "registry/2.0"
    );
}

/// A zip's files: name and text.
fn zip_files(zip: &[u8]) -> Vec<(String, String)> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
    let mut files = Vec::new();
    for i in 0..archive.len() {
        let mut file = archive.by_index(i).unwrap();
        if file.is_dir() {
            continue;
        }
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        files.push((file.name().to_string(), text));
    }
    files.sort();
    files
}

/// OpenTofu's module installer on `oci://registry.test/<repo>?tag=` or
/// `?digest=`: the manifest (GET, `modulepkg`, exactly one `archive/zip`
/// layer, under 4 MiB), then the blob. The manifest's digest and the zip.
async fn pull_module(
    r: &TestRegistry,
    repo: &str,
    reference: &str,
    bearer: &str,
) -> (String, Vec<u8>) {
    let got = get_as(
        r,
        Method::GET,
        &format!("/v2/{repo}/manifests/{reference}"),
        Some(bearer),
    )
    .await;
    got.expect(StatusCode::OK, &format!("the manifest of {reference}"));
    assert_eq!(header(&got, "content-type"), oci::MANIFEST_MEDIA_TYPE);
    assert!(got.body.len() <= oci::MAX_MANIFEST_BYTES);
    let digest = format!("sha256:{}", sha256_hex(&got.body));
    assert_eq!(header(&got, "docker-content-digest"), digest);
    let manifest: ImageManifest = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(
        manifest.artifact_type.as_deref(),
        Some(oci::MODULE_ARTIFACT)
    );
    let zip = the_zip_layer(r, repo, &manifest, bearer).await;
    (digest, zip)
}

const MODULE_REPO: &str = "modules/acme/net/aws";

/// Modules over OCI, private: the tag list (versions and `latest`, the
/// newest that is no prerelease), a manifest by tag, `latest` and digest,
/// the zip holding the published files (a subdirectory too, for `//sub`);
/// the same digest every time; yanked out of the tags but pulled by
/// digest; another namespace's token refused.
async fn opentofu_pulls_modules_over_oci(r: TestRegistry) {
    let publisher = r.token(Scope::Publish, Some("acme")).await;
    for version in ["1.0.0", "1.1.0", "2.0.0-beta.1"] {
        let archive = module_archive(&[
            ("main.tf", &format!("# {version}\n")),
            ("modules/sub/main.tf", "# sub\n"),
        ]);
        let resp = crate::backend_contract::publish_module(
            &r,
            &publisher,
            "acme/net/aws",
            version,
            &archive,
        )
        .await;
        assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text());
    }
    let r = r.reconfigure(|mut registry| {
        registry.config.anonymous_reads = false;
        registry
    });
    let read = r.token(Scope::Read, Some("acme")).await;
    let bearer = signed_in(&r, MODULE_REPO, "manifests/latest", &read).await;

    let tags = get_as(
        &r,
        Method::GET,
        &format!("/v2/{MODULE_REPO}/tags/list"),
        Some(&bearer),
    )
    .await;
    tags.expect(StatusCode::OK, "module tags");
    assert_eq!(
        tags.json()["tags"],
        serde_json::json!(["1.0.0", "1.1.0", "2.0.0-beta.1", "latest"])
    );

    // `latest` (OpenTofu's default tag) is 1.1.0: the prerelease is not.
    let (latest, zip) = pull_module(&r, MODULE_REPO, "latest", &bearer).await;
    let (tagged, again) = pull_module(&r, MODULE_REPO, "1.1.0", &bearer).await;
    assert_eq!(latest, tagged);
    assert_eq!(zip, again, "one zip per version");
    assert_eq!(
        zip_files(&zip),
        [
            ("main.tf".to_string(), "# 1.1.0\n".to_string()),
            ("modules/sub/main.tf".to_string(), "# sub\n".to_string()),
        ]
    );
    let (by_digest, _) = pull_module(&r, MODULE_REPO, &tagged, &bearer).await;
    assert_eq!(by_digest, tagged);
    let (prerelease, zip) = pull_module(&r, MODULE_REPO, "2.0.0-beta.1", &bearer).await;
    assert_ne!(prerelease, tagged);
    assert_eq!(zip_files(&zip)[0].1, "# 2.0.0-beta.1\n");

    // Another namespace's token gets no bearer for it; a provider bearer
    // is not a module one.
    let stranger = r.token(Scope::Read, Some("other")).await;
    let asked = r
        .request(
            Method::GET,
            &format!("/v2/token?scope=repository:{MODULE_REPO}:pull"),
            None,
            &[("authorization", &basic(&stranger))],
            bytes::Bytes::new(),
        )
        .await;
    assert_eq!(asked.status, StatusCode::FORBIDDEN, "{}", asked.text());
    let other = get_as(
        &r,
        Method::GET,
        "/v2/modules/acme/net/gcp/tags/list",
        Some(&bearer),
    )
    .await;
    assert_eq!(other.status, StatusCode::UNAUTHORIZED, "{}", other.text());

    // Yanked: out of the tags, and no longer `latest`; still by digest.
    let admin_token = r.token(Scope::Admin, None).await;
    admin(
        &r,
        &admin_token,
        AdminRoute::Lifecycle {
            release: crate::backend_contract::module("acme/net/aws", "1.1.0"),
            action: LifecycleAction::Yank,
        },
    )
    .await;
    let tags = get_as(
        &r,
        Method::GET,
        &format!("/v2/{MODULE_REPO}/tags/list"),
        Some(&bearer),
    )
    .await;
    assert_eq!(
        tags.json()["tags"],
        serde_json::json!(["1.0.0", "2.0.0-beta.1", "latest"])
    );
    let (latest, zip) = pull_module(&r, MODULE_REPO, "latest", &bearer).await;
    assert_ne!(latest, tagged);
    assert_eq!(zip_files(&zip)[0].1, "# 1.0.0\n");
    let (pinned, _) = pull_module(&r, MODULE_REPO, &tagged, &bearer).await;
    assert_eq!(pinned, tagged, "a yanked version by digest");

    bad_input_refused(
        &r,
        &bearer,
        [
            (
                format!("/v2/{MODULE_REPO}/manifests/3.0.0"),
                StatusCode::NOT_FOUND,
            ),
            (
                format!("/v2/{MODULE_REPO}/manifests/sha256:{}", "0".repeat(64)),
                StatusCode::NOT_FOUND,
            ),
            (
                format!("/v2/{MODULE_REPO}/blobs/sha256:{}", "1".repeat(64)),
                StatusCode::NOT_FOUND,
            ),
            (
                format!("/v2/{MODULE_REPO}/manifests/sha256:Z"),
                StatusCode::BAD_REQUEST,
            ),
            (
                "/v2/modules/acme/net/tags/list".to_string(),
                StatusCode::NOT_FOUND,
            ),
        ],
    )
    .await;
}

/// A module version published before the OCI view has no zip: its
/// manifest is a `404` naming `tfreg reindex`, which makes the zip; the
/// digest is then the one a publish makes (the zip is the same bytes).
async fn reindex_makes_the_zips_of_modules_published_before(r: TestRegistry) {
    let publisher = r.token(Scope::Publish, None).await;
    let archive = module_archive(&[("main.tf", "# old\n")]);
    let resp =
        crate::backend_contract::publish_module(&r, &publisher, "acme/old/aws", "1.0.0", &archive)
            .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text());
    let repo = "modules/acme/old/aws";
    let read = r.token(Scope::Read, None).await;
    let (published, zip) = pull_module(&r, repo, "1.0.0", &read).await;

    let m = tfreg_model::address::ModuleName::parse("acme", "old", "aws").unwrap();
    let items = r.registry.items.as_ref();
    let release =
        tfreg_store::catalog::module_release(items, &m, &Version::parse("1.0.0").unwrap())
            .await
            .unwrap()
            .unwrap();
    let pk = tfreg_store::catalog::schema::module_pk(&m);
    let sk = tfreg_store::catalog::schema::zip_sk(
        &Version::parse("1.0.0").unwrap(),
        &release.file.sha256,
    );
    items.take(&pk, &sk).await.unwrap().expect("the zip's item");
    let gone = get_as(
        &r,
        Method::GET,
        &format!("/v2/{repo}/manifests/1.0.0"),
        Some(&read),
    )
    .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{}", gone.text());
    assert!(gone.error().contains("tfreg reindex"), "{}", gone.text());

    let (ok, text) = crate::support::tools::tfreg_on_stores(&r, &["reindex"]);
    assert!(ok, "{}: {text}", r.name);
    assert!(text.contains("OCI zips made for 1"), "{text}");
    let (remade, again) = pull_module(&r, repo, "1.0.0", &read).await;
    assert_eq!(remade, published, "the same digest as at publish");
    assert_eq!(again, zip);
    let (ok, text) = crate::support::tools::tfreg_on_stores(&r, &["reindex"]);
    assert!(ok && text.contains("OCI zips made for 0"), "{text}");
}

const IMPORTED: &str = "mirror/registry.terraform.io/hashicorp/null";

/// A provider imported into the network mirror (`tfreg mirror import`:
/// zips only) is pulled over OCI under its origin's hostname, private, as
/// OpenTofu pulls it: the same zips, the mirror's `zh:` and `h1:`; a token
/// of one namespace gets no bearer for it (the mirror is registry-wide).
async fn imported_providers_are_pulled_over_oci(r: TestRegistry) {
    let signer = TestSigner::rsa();
    let importer = r.token(Scope::Publish, None).await;
    let zips: Vec<(String, Vec<u8>)> = provider_release("null", "1.0.0", &PLATFORMS, &signer)
        .into_iter()
        .filter(|(name, _)| name.ends_with(".zip"))
        .collect();
    let target = PublishTarget::try_from(format!("{IMPORTED}/1.0.0")).unwrap();
    r.publish(&target, &importer, &zips, Default::default())
        .await
        .expect(StatusCode::CREATED, "mirror import");
    let r = r.reconfigure(|mut registry| {
        registry.config.anonymous_reads = false;
        registry
    });
    let read = r.token(Scope::Read, None).await;
    let bearer = signed_in(&r, IMPORTED, "tags/list", &read).await;
    let tags = get_as(
        &r,
        Method::GET,
        &format!("/v2/{IMPORTED}/tags/list"),
        Some(&bearer),
    )
    .await;
    tags.expect(StatusCode::OK, "the imported provider's tags");
    assert_eq!(tags.json()["tags"], serde_json::json!(["1.0.0"]));
    let mirror = r
        .get_with(
            "/v1/mirror/registry.terraform.io/hashicorp/null/1.0.0.json",
            &read,
        )
        .await;
    mirror.expect(StatusCode::OK, "the mirror's version");
    for (platform, os_arch) in [
        ("linux_amd64", ("linux", "amd64")),
        ("darwin_arm64", ("darwin", "arm64")),
    ] {
        let (zip, _, _) = pull(&r, IMPORTED, "1.0.0", os_arch, &bearer).await;
        let name = format!("terraform-provider-null_1.0.0_{platform}.zip");
        let imported = &zips.iter().find(|(n, _)| *n == name).unwrap().1;
        assert_eq!(&zip, imported, "the imported zip, byte for byte");
        let hashes: Vec<String> =
            serde_json::from_value(mirror.json()["archives"][platform]["hashes"].clone()).unwrap();
        assert!(
            hashes.contains(&tfreg_model::hashing::zh_hash(&sha256_hex(&zip))),
            "{hashes:?}"
        );
        assert!(hashes.contains(&h1_of(&zip)), "{hashes:?}");
    }
    let stranger = r.token(Scope::Read, Some("hashicorp")).await;
    no_bearer_for(&r, IMPORTED, &stranger).await;
}

contract!(
    opentofu_pulls_providers_over_oci,
    imported_providers_are_pulled_over_oci,
    a_public_registry_serves_oci_without_a_token,
    opentofu_pulls_modules_over_oci,
    reindex_makes_the_zips_of_modules_published_before,
);

/// A directory holding `ca` as skopeo's `--cert-dir` reads it (`*.crt`).
fn cert_dir(ca: &Path, dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(ca, dir.join("ca.crt")).unwrap();
    dir.to_str().unwrap().to_string()
}

fn run(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The ORAS Python SDK: log in (the challenge, the token endpoint), read the
/// index, pull the platform's manifest; prints what it got.
const ORAS_PULL: &str = r#"
import hashlib, json, os, sys
import oras.client
host, repo, tag, token, out = sys.argv[1:6]
client = oras.client.OrasClient(hostname=host)
client.login(username="opentofu", password=token, hostname=host)
index = client.get_manifest(f"{host}/{repo}:{tag}")
entry = next(m for m in index["manifests"] if m["platform"] == {"os": "linux", "architecture": "amd64"})
files = client.pull(target=f"{host}/{repo}@{entry['digest']}", outdir=out)
print(json.dumps({
    "index_artifact": index.get("artifactType"),
    "files": [os.path.basename(f) for f in files],
    "sha256": [hashlib.sha256(open(f, "rb").read()).hexdigest() for f in files],
}))
"#;

/// skopeo and the ORAS Python SDK against a private `tfreg serve` over
/// real HTTPS, with the token as their password: the zip they pull is the
/// published one (its sha256 the SHA256SUMS line).
#[test]
fn skopeo_and_oras_pull_providers_from_tfreg_serve() {
    let tools = Tools::get();
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(&tmp.path().join("data"), &["--private"]);
    let gpg = Gpg::new("rsa2048");
    let dist = tmp.path().join("dist");
    let zips = provider_dist(&dist, "widget", "1.0.0", &PLATFORMS, &gpg);
    let publish = server.token("publish", Some("acme"));
    let out = server.publish_provider(&publish, &dist, "acme", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = server.token("read", Some("acme"));
    let linux_zip = std::fs::read(&zips[0]).unwrap();
    let linux_sha = sha256_hex(&linux_zip);
    let certs = cert_dir(&server.ca, &tmp.path().join("certs"));
    let creds = format!("opentofu:{read}");
    let image = format!("docker://{}/{REPO}", server.host);

    // skopeo: the index, raw, as the registry answers it.
    let skopeo = tools.path("TFREG_SKOPEO");
    let raw = run(
        Command::new(&skopeo).args([
            "inspect",
            "--raw",
            "--cert-dir",
            &certs,
            "--creds",
            &creds,
            &format!("{image}:1.0.0"),
        ]),
        "skopeo inspect",
    );
    let index: ImageIndex = serde_json::from_str(&raw).unwrap();
    assert_eq!(index.artifact_type.as_deref(), Some(oci::PROVIDER_ARTIFACT));
    let linux = index
        .manifests
        .iter()
        .find(|m| m.platform.as_ref().is_some_and(|p| p.os == "linux"))
        .unwrap();
    // Without credentials, skopeo is refused.
    let anonymous = Command::new(&skopeo)
        .args([
            "inspect",
            "--raw",
            "--cert-dir",
            &certs,
            &format!("{image}:1.0.0"),
        ])
        .output()
        .unwrap();
    assert!(!anonymous.status.success());
    // skopeo copy of the platform's artifact: the zip, byte for byte.
    let copied = tmp.path().join("copied");
    run(
        Command::new(&skopeo).args([
            "copy",
            "--src-cert-dir",
            &certs,
            "--src-creds",
            &creds,
            &format!("{image}@{}", linux.digest),
            &format!("dir:{}", copied.display()),
        ]),
        "skopeo copy",
    );
    let blob =
        std::fs::read(copied.join(&linux_sha)).expect("skopeo wrote the zip under its digest");
    assert_eq!(blob, linux_zip);

    // The ORAS Python SDK.
    let pulled = tmp.path().join("pulled");
    let stdout = run(
        Command::new(tools.path("TFREG_VENV_BIN").join("python"))
            .args([
                "-c",
                ORAS_PULL,
                &server.host,
                REPO,
                "1.0.0",
                &read,
                pulled.to_str().unwrap(),
            ])
            .env("REQUESTS_CA_BUNDLE", &server.ca),
        "oras pull",
    );
    let got: Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    assert_eq!(got["index_artifact"], oci::PROVIDER_ARTIFACT);
    assert_eq!(
        got["files"],
        serde_json::json!(["terraform-provider-widget_1.0.0_linux_amd64.zip"])
    );
    assert_eq!(got["sha256"], serde_json::json!([linux_sha]));
    let sums =
        std::fs::read_to_string(dist.join("terraform-provider-widget_1.0.0_SHA256SUMS")).unwrap();
    assert!(sums.contains(&format!(
        "{linux_sha}  terraform-provider-widget_1.0.0_linux_amd64.zip"
    )));
}

/// GET `path` of `rig`'s registry as OpenTofu asks it (the index and
/// manifest media types accepted), with `token` as the bearer: status,
/// `Docker-Content-Digest`, body.
fn rig_get(rig: &Rig, path: &str, token: &str) -> (u16, String, Vec<u8>) {
    let resp = rig
        .server
        .http
        .get(rig.server.url(path))
        .bearer_auth(token)
        .header(
            "accept",
            "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json",
        )
        .send()
        .unwrap();
    let status = resp.status().as_u16();
    let digest = resp
        .headers()
        .get("docker-content-digest")
        .map(|d| d.to_str().unwrap().to_string())
        .unwrap_or_default();
    (status, digest, resp.bytes().unwrap().to_vec())
}

/// The pull-through cache's providers over OCI (`oci_mirror` of
/// `mirror/<upstream>/...`), on `tfreg serve` caching a second `tfreg
/// serve`: a reader without `--fill` makes nothing fetch; a fill token's
/// index fetches every platform first (a digest may not depend on who
/// asks), each layer the origin's zip, byte for byte, its sha256 the
/// origin's signed SHA256SUMS line; afterwards every reader gets the same
/// digests, and so it stays once the origin is gone.
#[test]
fn cached_providers_are_pulled_over_oci_as_they_fill() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = Origin::start(tmp.path(), "127.0.0.160", "origin-oci.example.test");
    let rig = Rig::start(tmp.path(), &origin, &[]);
    let _log = LogOnFailure(&rig.server);
    let reader = rig.server.token("read", None);
    let repo = format!("mirror/{}/hashicorp/null", origin.host);

    let (status, _, body) = rig_get(&rig, &format!("/v2/{repo}/manifests/1.0.0"), &reader);
    assert_eq!(status, 404, "{}", String::from_utf8_lossy(&body));
    assert!(rig.cached_objects().is_empty(), "a reader fetched nothing");

    let (status, _, tags) = rig_get(&rig, &format!("/v2/{repo}/tags/list"), &rig.fill);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&tags));
    let tags: Value = serde_json::from_slice(&tags).unwrap();
    assert_eq!(tags["tags"], serde_json::json!(["1.0.0"]));

    let (status, index_digest, index) =
        rig_get(&rig, &format!("/v2/{repo}/manifests/1.0.0"), &rig.fill);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&index));
    assert_eq!(index_digest, format!("sha256:{}", sha256_hex(&index)));
    let index: ImageIndex = serde_json::from_slice(&index).unwrap();
    assert_eq!(index.manifests.len(), 2, "every platform: {index:?}");
    let zips = files_named(&rig.server_data(), |name| name.ends_with(".zip"));
    assert_eq!(zips.len(), 2, "both platforms fetched first: {zips:?}");

    let mut layers = Vec::new();
    for entry in &index.manifests {
        let (status, digest, manifest) = rig_get(
            &rig,
            &format!("/v2/{repo}/manifests/{}", entry.digest),
            &rig.fill,
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&manifest));
        assert_eq!(digest, entry.digest);
        let manifest: ImageManifest = serde_json::from_slice(&manifest).unwrap();
        let [layer] = manifest.layers.as_slice() else {
            panic!("exactly one layer: {manifest:?}")
        };
        assert_eq!(layer.media_type, oci::ZIP_LAYER);
        layers.push(layer.digest.clone());
    }
    let linux = format!("sha256:{}", sha256_hex(&origin.linux_zip));
    assert!(layers.contains(&linux), "the origin's zip: {layers:?}");
    let blob = rig
        .server
        .http
        .get(rig.server.url(&format!("/v2/{repo}/blobs/{linux}")))
        .bearer_auth(&rig.fill)
        .send()
        .unwrap();
    assert_eq!(blob.status().as_u16(), 307);
    let location = blob.headers()["location"].to_str().unwrap().to_string();
    let (status, zip) = rig.download(&location);
    assert_eq!(status, 200);
    assert!(zip == origin.linux_zip, "the origin's zip, byte for byte");
    let (_, version) = rig.get(&format!(
        "/v1/mirror/{}/hashicorp/null/1.0.0.json",
        origin.host
    ));
    assert!(
        version["archives"]["linux_amd64"]["hashes"]
            .as_array()
            .unwrap()
            .contains(&Value::from(tfreg_model::hashing::zh_hash(&sha256_hex(
                &zip
            )))),
        "the mirror's zh: is the layer's: {version}"
    );

    // Cached now: the reader gets the same digests; so does anyone once
    // the origin is gone.
    let (status, digest, _) = rig_get(&rig, &format!("/v2/{repo}/manifests/1.0.0"), &reader);
    assert_eq!((status, digest.as_str()), (200, index_digest.as_str()));
    drop(origin.server);
    for token in [&reader, &rig.fill] {
        let (status, digest, _) = rig_get(&rig, &format!("/v2/{repo}/manifests/1.0.0"), token);
        assert_eq!((status, digest.as_str()), (200, index_digest.as_str()));
    }
}
