//! The read answers a process keeps (`tfreg_http::answer_cache`), in-process
//! on both backends (the embedded store keeps them; DynamoDB has no change
//! counter, so nothing is kept and the same rules hold trivially): every
//! answer is warmed first, then the change is made, then the next answer must
//! show it at once. The clock is frozen, so an answer cannot drop out of the
//! cache by its second ending: only the store's change counter moves it.
//! And a kept answer is only ever given after the caller is authorised.

use std::sync::OnceLock;
use std::time::Duration;

use http::{Method, StatusCode};
use serde_json::{Value, json};
use tfreg_http::registry::{Registry, unix_now};
use tfreg_model::token::Scope;
use tfreg_testkit::{HOST, TestRegistry, TestResponse, TestSigner};

use crate::access::{
    id_of, mirror_versions, provider_versions, publish_module, publish_provider, send, view,
};
use crate::backend_contract::contract;

const A: &str = "alpha";
const B: &str = "beta";

/// One second, for the whole test binary: every answer is made in it.
fn frozen() -> u64 {
    static AT: OnceLock<u64> = OnceLock::new();
    *AT.get_or_init(unix_now)
}

/// `r` with its clock frozen and its token cache warm for 10 s (as `tfreg
/// serve`'s default), private or not.
fn frozen_view(r: &TestRegistry, anonymous_reads: bool) -> TestRegistry {
    view(r, anonymous_reads, Duration::from_secs(10))
        .reconfigure(|reg: Registry| reg.with_clock(frozen))
}

/// GET `path` twice with `token` (the second is a kept answer where the
/// store keeps them); both answers must be the same.
async fn twice(r: &TestRegistry, path: &str, token: &str) -> TestResponse {
    let first = r.get_with(path, token).await;
    let second = r.get_with(path, token).await;
    assert_eq!(first.status, second.status, "{path}");
    assert_eq!(first.body, second.body, "{path}");
    assert_eq!(
        first.headers.get("x-terraform-get"),
        second.headers.get("x-terraform-get")
    );
    second
}

/// Answers are kept on the embedded store (and only there).
fn kept(r: &TestRegistry) -> bool {
    !r.registry.answers.is_empty()
}

/// Publish, deprecate, yank and delete each show in the very next answer of
/// every read endpoint that was answered (and kept) before.
async fn answers_change_at_once_after_every_change(base: TestRegistry) {
    let r = frozen_view(&base, false);
    let admin = r.token(Scope::Admin, None).await;
    let signer = TestSigner::rsa();
    publish_provider(&r, &admin, A, "1.0.0", &signer)
        .await
        .expect(StatusCode::CREATED, "1.0.0");
    publish_module(&r, &admin, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "module");
    let versions = format!("/v1/providers/{A}/null/versions");
    let download = |v: &str| format!("/v1/providers/{A}/null/{v}/download/linux/amd64");
    let mirror_index = format!("/v1/mirror/{HOST}/{A}/null/index.json");
    let mirror_version = |v: &str| format!("/v1/mirror/{HOST}/{A}/null/{v}.json");
    let module_versions = format!("/v1/modules/{A}/m/aws/versions");
    let module_download = |v: &str| format!("/v1/modules/{A}/m/aws/{v}/download");
    let change = |path: String, method: Method, body: Value| {
        let r = &r;
        let admin = &admin;
        async move {
            send(r, method, &path, admin, body)
                .await
                .expect(StatusCode::OK, &path)
                .json()
        }
    };

    // Warm every answer.
    assert_eq!(
        provider_versions(&twice(&r, &versions, &admin).await),
        ["1.0.0"]
    );
    twice(&r, &download("1.0.0"), &admin)
        .await
        .expect(StatusCode::OK, "download");
    twice(&r, &download("2.0.0"), &admin)
        .await
        .expect(StatusCode::NOT_FOUND, "not yet published");
    assert_eq!(
        mirror_versions(&twice(&r, &mirror_index, &admin).await),
        ["1.0.0"]
    );
    twice(&r, &mirror_version("1.0.0"), &admin)
        .await
        .expect(StatusCode::OK, "mirror version");
    twice(&r, &module_versions, &admin)
        .await
        .expect(StatusCode::OK, "module versions");
    twice(&r, &module_download("1.0.0"), &admin)
        .await
        .expect(StatusCode::NO_CONTENT, "module download");
    assert_eq!(
        kept(&r),
        r.name == "embedded",
        "{}: the embedded store keeps answers, DynamoDB none",
        r.name
    );

    // Publish: listed at once, downloadable at once.
    publish_provider(&r, &admin, A, "2.0.0", &signer)
        .await
        .expect(StatusCode::CREATED, "2.0.0");
    assert_eq!(
        provider_versions(&twice(&r, &versions, &admin).await),
        ["1.0.0", "2.0.0"],
        "{}: a publish shows in the versions list at once",
        r.name
    );
    twice(&r, &download("2.0.0"), &admin)
        .await
        .expect(StatusCode::OK, "a publish is downloadable at once");
    assert_eq!(
        mirror_versions(&twice(&r, &mirror_index, &admin).await),
        ["1.0.0", "2.0.0"]
    );

    // Deprecate: the warning at once.
    change(
        format!("/v1/admin/providers/{A}/null/1.0.0/deprecate"),
        Method::POST,
        json!({"message": "use 2.0.0"}),
    )
    .await;
    let warnings = twice(&r, &versions, &admin).await.json()["warnings"].clone();
    assert!(
        warnings
            .as_array()
            .is_some_and(|w| w.len() == 1 && w[0].as_str().unwrap().contains("use 2.0.0")),
        "{}: a deprecation warns at once: {warnings}",
        r.name
    );
    change(
        format!("/v1/admin/modules/{A}/m/aws/1.0.0/deprecate"),
        Method::POST,
        json!({"message": "moved"}),
    )
    .await;
    let modules = twice(&r, &module_versions, &admin).await.json();
    assert_eq!(
        modules["modules"][0]["versions"][0]["deprecation"]["reason"], "moved",
        "{}: a module's deprecation shows at once",
        r.name
    );

    // Yank: unlisted at once.
    change(
        format!("/v1/admin/providers/{A}/null/1.0.0/yank"),
        Method::POST,
        json!({"message": "broken"}),
    )
    .await;
    assert_eq!(
        provider_versions(&twice(&r, &versions, &admin).await),
        ["2.0.0"],
        "{}: a yank unlists at once",
        r.name
    );
    assert_eq!(
        mirror_versions(&twice(&r, &mirror_index, &admin).await),
        ["2.0.0"]
    );

    // Delete: gone at once from every answer.
    change(
        format!("/v1/admin/providers/{A}/null/1.0.0"),
        Method::DELETE,
        Value::Null,
    )
    .await;
    twice(&r, &download("1.0.0"), &admin)
        .await
        .expect(StatusCode::NOT_FOUND, "a deleted version's download");
    twice(&r, &mirror_version("1.0.0"), &admin)
        .await
        .expect(StatusCode::NOT_FOUND, "a deleted version in the mirror");
    change(
        format!("/v1/admin/modules/{A}/m/aws/1.0.0"),
        Method::DELETE,
        Value::Null,
    )
    .await;
    twice(&r, &module_download("1.0.0"), &admin)
        .await
        .expect(StatusCode::NOT_FOUND, "a deleted module version");
    twice(&r, &module_versions, &admin)
        .await
        .expect(StatusCode::NOT_FOUND, "a module without versions");
}

/// A token revoked here is refused at once, though the answer it read is
/// kept (and its verification cached); other tokens still get that answer.
async fn a_revoked_token_is_refused_at_once_with_its_answer_kept(base: TestRegistry) {
    let r = frozen_view(&base, false);
    let admin = r.token(Scope::Admin, None).await;
    publish_module(&r, &admin, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "module");
    let reader = r.token(Scope::Read, None).await;
    let other = r.token(Scope::Read, None).await;
    let path = format!("/v1/modules/{A}/m/aws/versions");
    let answer = twice(&r, &path, &reader).await;
    answer.expect(StatusCode::OK, "before the revoke");
    send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/tokens/{}", id_of(&reader)),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::OK, "revoke");
    let refused = r.get_with(&path, &reader).await;
    refused.expect(StatusCode::UNAUTHORIZED, "a revoked token, answer kept");
    assert_ne!(refused.body, answer.body);
    let still = r.get_with(&path, &other).await;
    still.expect(StatusCode::OK, "another token");
    assert_eq!(still.body, answer.body);
}

/// A kept answer goes only to a caller allowed to read it: none to a
/// missing, malformed or unknown token, nor to one of another namespace.
async fn a_caller_without_access_never_gets_a_kept_answer(base: TestRegistry) {
    let r = frozen_view(&base, false);
    let admin = r.token(Scope::Admin, None).await;
    let signer = TestSigner::rsa();
    publish_provider(&r, &admin, A, "1.0.0", &signer)
        .await
        .expect(StatusCode::CREATED, "provider");
    publish_module(&r, &admin, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "module");
    let of_a = r.token(Scope::Read, Some(A)).await;
    let of_b = r.token(Scope::Read, Some(B)).await;
    let paths = [
        format!("/v1/providers/{A}/null/versions"),
        format!("/v1/providers/{A}/null/1.0.0/download/linux/amd64"),
        format!("/v1/mirror/{HOST}/{A}/null/index.json"),
        format!("/v1/mirror/{HOST}/{A}/null/1.0.0.json"),
        format!("/v1/modules/{A}/m/aws/versions"),
        format!("/v1/modules/{A}/m/aws/1.0.0/download"),
    ];
    for path in &paths {
        let answer = twice(&r, path, &of_a).await;
        assert!(answer.status.is_success(), "{path}: {}", answer.status);
        let refusals = [
            (None, StatusCode::UNAUTHORIZED, "no token"),
            (
                Some("not-a-token"),
                StatusCode::UNAUTHORIZED,
                "an unknown token",
            ),
            (
                Some(of_b.as_str()),
                StatusCode::FORBIDDEN,
                "another namespace's token",
            ),
        ];
        for (token, status, who) in refusals {
            let resp = r.request(Method::GET, path, token, &[], "").await;
            resp.expect(status, &format!("{path}: {who}"));
            assert_ne!(resp.body, answer.body, "{path}: {who}");
            assert!(
                resp.headers.get("x-terraform-get").is_none(),
                "{path}: {who}"
            );
        }
        let malformed = r
            .request(
                Method::GET,
                path,
                None,
                &[("authorization", "Basic abc")],
                "",
            )
            .await;
        malformed.expect(StatusCode::UNAUTHORIZED, &format!("{path}: malformed"));
    }
    assert_eq!(kept(&r), r.name == "embedded", "{}", r.name);
}

/// A small archive answered by the registry itself (the embedded store's
/// blobs) is kept like a route's answer: GET and HEAD answer the same bytes
/// and headers from it, its URL's signature is still checked on every
/// request, and a deleted version's archive is gone at once. Where archives
/// are redirected to S3 nothing is kept.
async fn an_archive_is_kept_behind_its_signature_and_gone_at_once(base: TestRegistry) {
    let r = frozen_view(&base, false);
    let admin = r.token(Scope::Admin, None).await;
    publish_module(&r, &admin, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "module");
    let download = format!("/v1/modules/{A}/m/aws/1.0.0/download");
    let url = twice(&r, &download, &admin).await.headers["x-terraform-get"]
        .to_str()
        .unwrap()
        .to_string();
    let answers_before = r.registry.answers.len();
    let fetch = |method: Method, url: String| {
        let r = &r;
        async move { r.send_url(method, &url, &[], bytes::Bytes::new()).await }
    };
    // Terraform 1.11.0-1.12.0 ask HEAD first: its read of a small archive is
    // kept for the GET.
    let head_first = fetch(Method::HEAD, url.clone()).await;
    let first = fetch(Method::GET, url.clone()).await;
    if r.name != "embedded" {
        first.expect(StatusCode::TEMPORARY_REDIRECT, "S3: a redirect");
        assert_eq!(r.registry.answers.len(), answers_before, "{}", r.name);
        return;
    }
    head_first.expect(StatusCode::OK, "HEAD first");
    assert!(head_first.body.is_empty());
    first.expect(StatusCode::OK, "the archive");
    assert_eq!(
        r.registry.answers.len(),
        answers_before + 1,
        "the archive's answer is kept, once"
    );
    let second = fetch(Method::GET, url.clone()).await;
    second.expect(StatusCode::OK, "the archive, kept");
    assert_eq!(second.body, first.body);
    let head = fetch(Method::HEAD, url.clone()).await;
    head.expect(StatusCode::OK, "HEAD, kept");
    assert!(head.body.is_empty());
    for answer in [&second, &head, &head_first] {
        for name in [
            "content-type",
            "content-length",
            "content-disposition",
            "x-content-type-options",
            "cache-control",
        ] {
            assert_eq!(answer.headers.get(name), first.headers.get(name), "{name}");
        }
    }
    assert_eq!(
        head.headers["content-length"].to_str().unwrap(),
        first.body.len().to_string()
    );
    // The signature is checked before a kept answer is looked up.
    for bad in [url.replace("expires=", "expires=1"), format!("{url}x")] {
        for method in [Method::GET, Method::HEAD] {
            fetch(method.clone(), bad.clone())
                .await
                .expect(StatusCode::FORBIDDEN, &format!("{method} {bad}"));
        }
    }
    send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/modules/{A}/m/aws/1.0.0"),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::OK, "delete");
    for method in [Method::GET, Method::HEAD] {
        fetch(method.clone(), url.clone()).await.expect(
            StatusCode::NOT_FOUND,
            &format!("{method}: a deleted version's archive, at once"),
        );
    }
}

contract!(
    answers_change_at_once_after_every_change,
    a_revoked_token_is_refused_at_once_with_its_answer_kept,
    a_caller_without_access_never_gets_a_kept_answer,
    an_archive_is_kept_behind_its_signature_and_gone_at_once,
);
