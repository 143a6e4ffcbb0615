//! Bad input and access rules, in-process: every refusal is a 4xx with a short
//! `{"errors": [...]}` body, server faults are 5xx without their detail, and
//! the publish path honours the registry's clock.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use tfreg_http::registry::Registry;
use tfreg_model::router::{PublishStep, PublishTarget};
use tfreg_model::token::Scope;
use tfreg_store::{Condition, Item, ItemStore, Page, StoreError};
use tfreg_testkit::{TestRegistry, TestSigner, provider_release, provider_request};

#[tokio::test]
async fn malformed_requests_are_4xx_with_error_bodies() {
    let r = TestRegistry::embedded().await;
    let discovery = r.get("/.well-known/terraform.json").await;
    assert_eq!(discovery.headers["content-type"], "application/json");
    for service in ["modules.v1", "providers.v1", "tfreg.mirror.v1"] {
        assert!(
            discovery.json()[service].as_str().unwrap().ends_with('/'),
            "{service} must end in /"
        );
    }
    let cases: &[(&str, u16, &str)] = &[
        (
            "/v1/providers/acme/null/v1.0.0/download/linux/amd64",
            400,
            "leading \"v\"",
        ),
        (
            "/v1/providers/acme/null/1.0/download/linux/amd64",
            400,
            "invalid version",
        ),
        (
            "/v1/providers/acme/null/1.0.0+meta/download/linux/amd64",
            400,
            "build metadata",
        ),
        ("/v1/providers/ac%2Fme/null/versions", 400, "malformed"),
        (
            "/v1/providers/-acme/null/versions",
            400,
            "invalid namespace",
        ),
        (
            "/v1/providers/acme/nu_ll/versions",
            400,
            "invalid provider type",
        ),
        (
            "/v1/modules/acme/vpc/AWS!/versions",
            400,
            "invalid module system",
        ),
        (
            "/v1/mirror/not_a_host/acme/null/index.json",
            400,
            "invalid hostname",
        ),
        ("/v1/blobs/archives/x%5C..%5Cregistry.db", 400, "malformed"),
        ("/v1/blobs/archives/~x/a%20b.zip", 400, "malformed"),
        ("/v1/blobs/registry.db", 400, "malformed"),
        ("/v1/providers/acme/null/versions", 404, "not found"),
        (
            "/v1/providers/acme/null/1.0.0/download/linux/amd64",
            404,
            "not found",
        ),
        ("/v1/modules/acme/vpc/aws/versions", 404, "not found"),
        ("/v1/modules/acme/vpc/aws/1.0.0/download", 404, "not found"),
        (
            "/v1/mirror/registry.terraform.io/hashicorp/null/index.json",
            404,
            "not found",
        ),
        (
            "/v1/mirror/registry.terraform.io/hashicorp/null/1.0.0.json",
            404,
            "not found",
        ),
        ("/v1/nope", 404, "no such endpoint"),
        ("/v1/blobs/archives/x/y.zip", 403, "not signed"),
    ];
    for (path, status, needle) in cases {
        let resp = r.get(path).await;
        assert_eq!(resp.status.as_u16(), *status, "{path}: {}", resp.text());
        let msg = resp.error();
        assert!(
            msg.contains(needle),
            "{path}: {msg:?} should mention {needle:?}"
        );
        assert!(msg.len() < 300, "error messages stay short: {msg}");
    }
    // A wrong method names the right ones.
    let resp = r
        .request(
            Method::PUT,
            "/v1/providers/acme/null/versions",
            None,
            &[],
            Bytes::new(),
        )
        .await;
    assert_eq!(resp.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(resp.headers["allow"], "GET, HEAD");
    assert!(resp.error().contains("not allowed"));
    let resp = r.get("/v1/publish/modules/a/b/c/1.0.0/begin").await;
    assert_eq!(resp.headers["allow"], "POST");
}

#[tokio::test]
async fn bad_publish_bodies_are_refused_after_the_token() {
    let r = TestRegistry::embedded().await;
    let token = r.token(Scope::Publish, None).await;
    let begin = "/v1/publish/providers/acme/null/1.0.0/begin";
    let post = |body: Vec<u8>, token: Option<String>| {
        let r = &r;
        async move {
            r.request(Method::POST, begin, token.as_deref(), &[], body)
                .await
        }
    };
    let big = vec![b'x'; 2 * 1024 * 1024];
    // Without a valid token nothing of the body is read: 401, not 413.
    let resp = post(big.clone(), None).await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED);
    assert_eq!(resp.headers["www-authenticate"], "Bearer");
    let resp = post(big.clone(), Some("tfreg_forged".into())).await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED);
    let t = Some(token.clone());
    let resp = post(big, t.clone()).await;
    assert_eq!(resp.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(resp.error().contains("larger than"));
    let resp = post(b"not json".to_vec(), t.clone()).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    assert!(resp.error().contains("invalid publish request"));
    let resp = post(br#"{"files": []}"#.to_vec(), t.clone()).await;
    assert!(
        resp.error().contains("no provider packages"),
        "{}",
        resp.error()
    );
    let zip = r#"{"name":"terraform-provider-null_1.0.0_linux_amd64.zip","size":1,"sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}"#;
    let complete = "/v1/publish/providers/acme/null/1.0.0/complete";
    let resp = r
        .request(
            Method::POST,
            complete,
            Some(&token),
            &[],
            format!(r#"{{"files":[{zip}]}}"#),
        )
        .await;
    assert!(
        resp.error().contains("SHA256SUMS is missing"),
        "{}",
        resp.error()
    );
    let sums = r#"{"name":"terraform-provider-null_1.0.0_SHA256SUMS","size":1,"sha256":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}"#;
    let sig = r#"{"name":"terraform-provider-null_1.0.0_SHA256SUMS.sig","size":1,"sha256":"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"}"#;
    let files = format!(r#""files":[{zip},{sums},{sig}]"#);
    for (body, needle) in [
        (format!("{{{files}}}"), "upload_id is missing"),
        (
            format!(r#"{{{files},"upload_id":"nope"}}"#),
            "malformed upload id",
        ),
        (
            format!(r#"{{{files},"upload_id":"0123456789abcdef0123456789abcdef"}}"#),
            "unknown or already completed",
        ),
    ] {
        let resp = r
            .request(Method::POST, complete, Some(&token), &[], body)
            .await;
        assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{}", resp.text());
        assert!(
            resp.error().contains(needle),
            "{} should mention {needle}",
            resp.error()
        );
    }
}

/// Reads need a token when the registry says so; each scope does what it may.
#[tokio::test]
async fn read_tokens_when_required() {
    let open = TestRegistry::embedded().await;
    let r = open.reconfigure(|mut reg: Registry| {
        reg.config.anonymous_reads = false;
        reg
    });
    let path = "/v1/modules/acme/m/aws/versions";
    assert_eq!(
        r.get("/.well-known/terraform.json").await.status,
        StatusCode::OK
    );
    let resp = r.get(path).await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED);
    assert!(resp.error().contains("requires a token"));
    let resp = r.get_with(path, "tfreg_nope").await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED);
    assert!(resp.error().contains("not valid"));
    for scope in [Scope::Read, Scope::Publish] {
        let token = r.token(scope, None).await;
        assert_eq!(r.get_with(path, &token).await.status, StatusCode::NOT_FOUND);
    }
    let read = r.token(Scope::Read, None).await;
    let target = PublishTarget::try_from("modules/acme/m/aws/1.0.0".to_string()).unwrap();
    let resp = r
        .publish_step(&target, PublishStep::Begin, &read, &Default::default())
        .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN);
    let other = r.token(Scope::Publish, Some("other")).await;
    let resp = r
        .publish_step(&target, PublishStep::Begin, &other, &Default::default())
        .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN);
    assert!(resp.error().contains("namespace acme"));
    let mirror =
        PublishTarget::try_from("mirror/registry.terraform.io/hashicorp/null/1.0.0".to_string())
            .unwrap();
    let ns = r.token(Scope::Publish, Some("hashicorp")).await;
    let resp = r
        .publish_step(&mirror, PublishStep::Begin, &ns, &Default::default())
        .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN);
    assert!(
        resp.error().contains("does not cover the whole registry"),
        "{}",
        resp.error()
    );
}

/// An item store that fails every call with `error` (a unit-level stand-in for
/// a broken store; issue-level fault tests break real stores).
struct FailingStore(fn() -> StoreError);

#[async_trait::async_trait]
impl ItemStore for FailingStore {
    async fn get(&self, _: &str, _: &str) -> Result<Option<Item>, StoreError> {
        Err((self.0)())
    }
    async fn query_page(&self, _: &str, _: &str, _: Option<&str>) -> Result<Page, StoreError> {
        Err((self.0)())
    }
    async fn put(&self, _: Item, _: Condition) -> Result<(), StoreError> {
        Err((self.0)())
    }
    async fn take(&self, _: &str, _: &str) -> Result<Option<Item>, StoreError> {
        Err((self.0)())
    }
    async fn touch(&self, _: &str, _: &str, _: u64, _: u64) -> Result<bool, StoreError> {
        Err((self.0)())
    }
    async fn add(&self, _: tfreg_store::Add) -> Result<(), StoreError> {
        Err((self.0)())
    }
}

/// A store that is down is a 503 with Retry-After; corrupt data and our own
/// bugs are a 500; neither tells the client the detail.
#[tokio::test]
async fn store_faults_are_503_or_500_without_detail() {
    let r = TestRegistry::embedded().await;
    let path = "/v1/providers/acme/null/versions";
    let down = r.reconfigure(|mut reg: Registry| {
        reg.items = Arc::new(FailingStore(|| {
            StoreError::Unavailable("dynamodb: ThrottlingException secret-table".into())
        }));
        reg
    });
    let resp = down.get(path).await;
    assert_eq!(resp.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(resp.headers["retry-after"], "5");
    assert!(resp.error().contains("retry later"));
    assert!(!resp.text().contains("secret-table"));

    // A corrupt release item.
    r.registry
        .items
        .put(
            Item::new("PROVIDER#acme/null", "VERSION#1.0.0", b"{not json".to_vec()),
            Condition::Always,
        )
        .await
        .unwrap();
    let resp = r.get(path).await;
    assert_eq!(resp.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(resp.error().contains("internal error"));
    assert!(!resp.text().contains("PROVIDER#"), "{}", resp.text());
}

/// Key and signature expiry are checked against the registry's clock.
#[tokio::test]
async fn publishing_honours_the_registry_clock() {
    let r = TestRegistry::embedded().await;
    let token = r.token(Scope::Publish, None).await;
    // A key made 2020-01-01 that expired 2020-01-02, signing at 2020-01-01T06:00.
    let signer = TestSigner::expired();
    let files = provider_release("clock", "1.0.0", &["linux_amd64"], &signer);
    let target = PublishTarget::try_from("providers/acme/clock/1.0.0".to_string()).unwrap();
    let resp = r
        .publish(&target, &token, &files, provider_request(&signer))
        .await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST, "{}", resp.text());
    assert!(
        resp.error().contains("expired on 2020-01-02"),
        "{}",
        resp.error()
    );
    // 2020-01-01T12:00:00Z: the key is valid then.
    let then = r.reconfigure(|reg: Registry| reg.with_clock(|| 1_577_880_000));
    let resp = then
        .publish(&target, &token, &files, provider_request(&signer))
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text());
}

/// The longest addresses and versions publish (nothing derived from them must
/// outgrow a key).
#[tokio::test]
async fn the_longest_module_addresses_publish() {
    let r = TestRegistry::embedded().await;
    let token = r.token(Scope::Publish, None).await;
    let address = format!("{}/{}/aws", "n".repeat(64), "m".repeat(64));
    let version = format!("1.0.0-{}", "r".repeat(100));
    let target = PublishTarget::try_from(format!("modules/{address}/{version}")).unwrap();
    let archive = tfreg_testkit::module_archive(&[("main.tf", "")]);
    let resp = r
        .publish(
            &target,
            &token,
            &[("module.tar.gz".to_string(), archive)],
            Default::default(),
        )
        .await;
    assert_eq!(resp.status, StatusCode::CREATED, "{}", resp.text());
    let resp = r
        .get(&format!("/v1/modules/{address}/{version}/download"))
        .await;
    assert_eq!(resp.status, StatusCode::NO_CONTENT);
}
