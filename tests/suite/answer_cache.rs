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

/// `base` frozen and private, with provider and module 1.0.0 of A
/// published by an admin: the registry, the admin's token, the signer.
async fn published(base: &TestRegistry) -> (TestRegistry, String, TestSigner) {
    let r = frozen_view(base, false);
    let admin = r.token(Scope::Admin, None).await;
    let signer = TestSigner::rsa();
    publish_provider(&r, &admin, A, "1.0.0", &signer)
        .await
        .expect(StatusCode::CREATED, "provider 1.0.0");
    publish_module(&r, &admin, A, "1.0.0")
        .await
        .expect(StatusCode::CREATED, "module 1.0.0");
    (r, admin, signer)
}

/// Publish, deprecate, yank and delete each show in the very next answer of
/// every read endpoint that was answered (and kept) before.
async fn answers_change_at_once_after_every_change(base: TestRegistry) {
    let (r, admin, signer) = published(&base).await;
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
    let (r, _, _) = published(&base).await;
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

/// OpenTofu's OCI requests (issue 40) are kept like the registry
/// protocol's: a tag list (each page its own), a manifest by tag or digest,
/// HEAD and GET alike, and each shows a publish, yank and delete at once; a
/// caller without access gets none of them. (A blob is not kept: it is a
/// download, counted.)
async fn oci_answers_are_kept_and_change_at_once(base: TestRegistry) {
    let (r, admin, signer) = published(&base).await;
    let reader = r.token(Scope::Read, Some(A)).await;
    let tags = |repo: &str, query: &str| format!("/v2/{repo}/tags/list{query}");
    let manifest = |repo: &str, reference: &str| format!("/v2/{repo}/manifests/{reference}");
    let provider = format!("providers/{A}/null");
    let mirrored = format!("mirror/{HOST}/{A}/null");
    let module = format!("modules/{A}/m/aws");
    let tag_list = |resp: &TestResponse| -> Vec<String> {
        serde_json::from_value(resp.json()["tags"].clone()).unwrap()
    };
    let answers_before = r.registry.answers.len();

    // Warm every answer.
    assert_eq!(
        tag_list(&twice(&r, &tags(&provider, ""), &reader).await),
        ["1.0.0"]
    );
    assert_eq!(
        tag_list(&twice(&r, &tags(&provider, "?n=1"), &reader).await),
        ["1.0.0"]
    );
    let index = twice(&r, &manifest(&provider, "1.0.0"), &reader).await;
    index.expect(StatusCode::OK, "the index of 1.0.0");
    let digest = index.headers["docker-content-digest"]
        .to_str()
        .unwrap()
        .to_string();
    twice(&r, &manifest(&provider, &digest), &reader)
        .await
        .expect(StatusCode::OK, "the index by digest");
    let mirror_index = twice(&r, &manifest(&mirrored, "1.0.0"), &reader).await;
    assert_eq!(
        mirror_index.body, index.body,
        "the mirror's host: the same index"
    );
    assert_eq!(
        tag_list(&twice(&r, &tags(&module, ""), &reader).await),
        ["1.0.0", "latest"]
    );
    let latest = twice(&r, &manifest(&module, "latest"), &reader).await;
    latest.expect(StatusCode::OK, "the module's latest");
    let head = r
        .request(
            Method::HEAD,
            &manifest(&provider, "1.0.0"),
            Some(&reader),
            &[],
            "",
        )
        .await;
    head.expect(StatusCode::OK, "HEAD of the index, kept");
    assert!(head.body.is_empty());
    for name in ["content-type", "content-length", "docker-content-digest"] {
        assert_eq!(head.headers.get(name), index.headers.get(name), "{name}");
    }
    let warmed = 7;
    assert_eq!(
        r.registry.answers.len(),
        answers_before + if r.name == "embedded" { warmed } else { 0 },
        "{}: one answer kept per route and query (HEAD and GET share one)",
        r.name
    );

    // A caller without access gets none of them.
    let stranger = r.token(Scope::Read, Some(B)).await;
    for path in [
        tags(&provider, ""),
        manifest(&provider, "1.0.0"),
        manifest(&module, "latest"),
    ] {
        for token in [None, Some("not-a-token"), Some(stranger.as_str())] {
            let resp = r.request(Method::GET, &path, token, &[], "").await;
            assert!(resp.status.is_client_error(), "{path}: {}", resp.status);
            assert!(
                resp.headers.get("docker-content-digest").is_none(),
                "{path}"
            );
        }
    }

    // Publish: tagged at once; the module's latest moves at once.
    publish_provider(&r, &admin, A, "2.0.0", &signer)
        .await
        .expect(StatusCode::CREATED, "2.0.0");
    publish_module(&r, &admin, A, "2.0.0")
        .await
        .expect(StatusCode::CREATED, "module 2.0.0");
    assert_eq!(
        tag_list(&twice(&r, &tags(&provider, ""), &reader).await),
        ["1.0.0", "2.0.0"],
        "{}: a publish is tagged at once",
        r.name
    );
    assert_eq!(
        tag_list(&twice(&r, &tags(&provider, "?n=1"), &reader).await),
        ["1.0.0"]
    );
    let moved = twice(&r, &manifest(&module, "latest"), &reader).await;
    moved.expect(StatusCode::OK, "latest after a publish");
    assert_ne!(moved.body, latest.body, "{}: latest moves at once", r.name);

    // Yank: out of the tags at once, still pulled by digest.
    send(
        &r,
        Method::POST,
        &format!("/v1/admin/providers/{A}/null/1.0.0/yank"),
        &admin,
        json!({"message": "broken"}),
    )
    .await
    .expect(StatusCode::OK, "yank");
    assert_eq!(
        tag_list(&twice(&r, &tags(&provider, ""), &reader).await),
        ["2.0.0"],
        "{}: a yank untags at once",
        r.name
    );
    twice(&r, &manifest(&provider, &digest), &reader)
        .await
        .expect(StatusCode::OK, "a yanked version by digest");

    // Delete: gone at once, by tag and by digest.
    send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/providers/{A}/null/1.0.0"),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::OK, "delete");
    for path in [
        manifest(&provider, "1.0.0"),
        manifest(&provider, &digest),
        manifest(&mirrored, "1.0.0"),
    ] {
        twice(&r, &path, &reader)
            .await
            .expect(StatusCode::NOT_FOUND, &format!("{path}: a deleted version"));
    }
}

contract!(
    answers_change_at_once_after_every_change,
    a_revoked_token_is_refused_at_once_with_its_answer_kept,
    a_caller_without_access_never_gets_a_kept_answer,
    an_archive_is_kept_behind_its_signature_and_gone_at_once,
    oci_answers_are_kept_and_change_at_once,
);
