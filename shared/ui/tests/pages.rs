//! The UI in-process, through the one router and authorisation, on the
//! embedded store: who may see which page, the session cookie's life, what
//! the pages show and the headers every page carries. The browser tests
//! (tests/suite/browser.rs) drive the same pages in Chromium.

use bytes::Bytes;
use http::{Method, StatusCode, header};

use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::router::PublishTarget;
use tfreg_model::token::Scope;
use tfreg_model::version::Version;
use tfreg_testkit::{
    TestRegistry, TestResponse, TestSigner, module_archive, provider_release, provider_request,
};

const README: &str = "# VPC\n\nCreates a VPC with subnets.\n\n<script>window.pwned = 1</script>\n\n[click](javascript:alert(1))\n";
const VARIABLES: &str = r#"
variable "name" {
  description = "Name of everything"
  type        = string
}
variable "cidr" {
  type    = string
  default = "10.0.0.0/16"
  validation {
    condition     = can(cidrhost(var.cidr, 0))
    error_message = "Must be a CIDR block."
  }
}
variable "password" {
  type      = string
  sensitive = true
  default   = null
}
output "id" { value = 1 }
resource "aws_vpc" "this" {}
"#;

/// A private registry with a module in `team`, a provider in `team` and a
/// module in `other`.
async fn registry() -> (TestRegistry, String) {
    let reg = TestRegistry::embedded().await;
    let reg = reg.reconfigure(|mut r| {
        r.config.anonymous_reads = false;
        r
    });
    let admin = reg.token(Scope::Admin, None).await;
    let module = |ns: &str, name: &str, v: &str| PublishTarget::Module {
        module: ModuleName::parse(ns, name, "aws").unwrap(),
        version: Version::parse(v).unwrap(),
    };
    let archive = module_archive(&[
        ("README.md", README),
        ("variables.tf", VARIABLES),
        ("modules/flow-log/main.tf", "variable \"vpc_id\" {}\n"),
    ]);
    for (target, files) in [
        (module("team", "vpc", "1.2.0"), archive.clone()),
        (module("team", "vpc", "1.3.0"), archive.clone()),
        (
            module("other", "secret", "0.1.0"),
            module_archive(&[("main.tf", "# secret\n")]),
        ),
    ] {
        reg.publish(
            &target,
            &admin,
            &[("m.tar.gz".into(), files)],
            Default::default(),
        )
        .await
        .expect(StatusCode::CREATED, "publish a module");
    }
    let signer = TestSigner::rsa();
    let files = provider_release("cloud", "2.1.0", &["linux_amd64", "darwin_arm64"], &signer);
    reg.publish(
        &PublishTarget::Provider {
            provider: ProviderName::parse("team", "cloud").unwrap(),
            version: Version::parse("2.1.0").unwrap(),
        },
        &admin,
        &files,
        provider_request(&signer),
    )
    .await
    .expect(StatusCode::CREATED, "publish a provider");
    (reg, admin)
}

async fn get(reg: &TestRegistry, path: &str, cookie: Option<&str>) -> TestResponse {
    let headers: Vec<(&str, &str)> = cookie.map(|c| ("cookie", c)).into_iter().collect();
    reg.request(Method::GET, path, None, &headers, Bytes::new())
        .await
}

async fn post(
    reg: &TestRegistry,
    path: &str,
    form: &str,
    headers: &[(&str, &str)],
) -> TestResponse {
    let mut all = vec![("content-type", "application/x-www-form-urlencoded")];
    all.extend_from_slice(headers);
    reg.request(Method::POST, path, None, &all, form.as_bytes().to_vec())
        .await
}

/// Sign in with `token`; the `cookie` header value of the session.
async fn sign_in(reg: &TestRegistry, token: &str) -> String {
    let resp = post(
        reg,
        "/ui/sign-in",
        &format!("token={token}&next=%2Fui%2Fsearch"),
        &[],
    )
    .await;
    assert_eq!(resp.status, StatusCode::SEE_OTHER, "{}", resp.text());
    assert_eq!(resp.headers[header::LOCATION], "/ui/search");
    let set = resp.headers[header::SET_COOKIE].to_str().unwrap();
    assert!(!set.contains(token), "the token is never in the cookie");
    set.split(';').next().unwrap().to_string()
}

/// A page's text with the template engine's entities decoded.
fn plain(html: &str) -> String {
    [
        ("&#34;", "\""),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&#60;", "<"),
        ("&lt;", "<"),
        ("&#62;", ">"),
        ("&gt;", ">"),
        ("&#38;", "&"),
        ("&amp;", "&"),
    ]
    .iter()
    .fold(html.to_string(), |text, (entity, c)| {
        text.replace(entity, c)
    })
}

fn location(resp: &TestResponse) -> &str {
    resp.headers[header::LOCATION].to_str().unwrap()
}

#[tokio::test]
async fn a_private_registry_sends_browsers_to_sign_in_and_back() {
    let (reg, _) = registry().await;
    for path in ["/ui/home", "/ui/search?q=vpc", "/ui/modules/team/vpc/aws"] {
        let resp = get(&reg, path, None).await;
        assert_eq!(resp.status, StatusCode::SEE_OTHER, "{path}");
        let to = location(&resp);
        assert!(to.starts_with("/ui/sign-in?next=%2Fui%2F"), "{path}: {to}");
        assert!(
            !resp.text().contains("vpc"),
            "nothing of the registry shown"
        );
    }
    for root in ["/", "/ui", "/ui/"] {
        let resp = get(&reg, root, None).await;
        assert_eq!(
            (resp.status, location(&resp)),
            (StatusCode::SEE_OTHER, "/ui/home")
        );
    }
    let form = get(&reg, "/ui/sign-in?next=%2Fui%2Fsearch", None).await;
    form.expect(StatusCode::OK, "the sign-in page is public");
    assert!(form.text().contains("value=\"/ui/search\""));
    // Only this registry's own pages are places to come back to.
    for evil in [
        "https%3A%2F%2Fevil.example",
        "%2F%2Fevil.example",
        "%2Fv1%2Fadmin",
    ] {
        let page = get(&reg, &format!("/ui/sign-in?next={evil}"), None).await;
        assert!(page.text().contains("value=\"/ui/home\""), "{evil}");
    }
}

#[tokio::test]
async fn sign_in_opens_a_session_that_sign_out_and_revocation_end() {
    let (reg, admin) = registry().await;
    let bad = post(&reg, "/ui/sign-in", "token=tfreg_nope", &[]).await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);
    assert!(
        bad.text().contains("not valid for this registry"),
        "{}",
        bad.text()
    );
    assert!(bad.headers.get(header::SET_COOKIE).is_none());
    let junk = post(&reg, "/ui/sign-in", "token=hello", &[]).await;
    assert_eq!(junk.status, StatusCode::UNAUTHORIZED);
    let cross = post(
        &reg,
        "/ui/sign-in",
        &format!("token={admin}"),
        &[("sec-fetch-site", "cross-site")],
    )
    .await;
    assert_eq!(
        cross.status,
        StatusCode::FORBIDDEN,
        "a form posted from another site"
    );
    // A browser that sends no Sec-Fetch-Site still sends Origin: another
    // site's (or an opaque one) is refused, the registry's own is not.
    let own = reg.registry.config.public_url.clone();
    for origin in [
        "https://evil.example",
        "null",
        "https://registry.example.com.evil.example",
        "http://evil.example:443",
    ] {
        let forced = post(
            &reg,
            "/ui/sign-in",
            &format!("token={admin}"),
            &[("origin", origin)],
        )
        .await;
        assert_eq!(forced.status, StatusCode::FORBIDDEN, "Origin: {origin}");
        assert!(forced.headers.get(header::SET_COOKIE).is_none());
    }
    let ours = post(
        &reg,
        "/ui/sign-in",
        &format!("token={admin}&next=%2Fui%2Fsearch"),
        &[("origin", own.to_uppercase().as_str())],
    )
    .await;
    assert_eq!(ours.status, StatusCode::SEE_OTHER, "Origin: {own}");
    let by_host = post(
        &reg,
        "/ui/sign-in",
        &format!("token={admin}"),
        &[
            ("origin", "https://ui.example.net:8443"),
            ("host", "ui.example.net:8443"),
        ],
    )
    .await;
    assert_eq!(
        by_host.status,
        StatusCode::SEE_OTHER,
        "the Host it was sent to"
    );

    let reader = reg.token(Scope::Read, None).await;
    let reader_id = tfreg_model::token::id_of(&tfreg_model::token::hash_of(&reader));
    let cookie = sign_in(&reg, &reader).await;
    let home = get(&reg, "/ui/home", Some(&cookie)).await;
    home.expect(StatusCode::OK, "signed in");
    assert!(home.text().contains("team/vpc/aws") && home.text().contains("Sign out"));

    let forced_out = post(
        &reg,
        "/ui/sign-out",
        "",
        &[("cookie", &cookie), ("origin", "https://evil.example")],
    )
    .await;
    assert_eq!(
        forced_out.status,
        StatusCode::FORBIDDEN,
        "a sign-out forced from elsewhere"
    );
    let out = post(&reg, "/ui/sign-out", "", &[("cookie", &cookie)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(
        out.headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
    // Signed out on the server too: the cookie replayed is refused (to the
    // sign-in page, the cookie cleared), even where anyone may read.
    for anonymous_reads in [false, true] {
        let view = reg.reconfigure(|mut r| {
            r.config.anonymous_reads = anonymous_reads;
            r
        });
        let replayed = get(&view, "/ui/home", Some(&cookie)).await;
        assert_eq!(
            replayed.status,
            StatusCode::SEE_OTHER,
            "replayed after sign-out (anonymous reads {anonymous_reads})"
        );
        assert!(location(&replayed).starts_with("/ui/sign-in?next="));
        assert!(!replayed.text().contains("team/vpc/aws"));
        assert!(
            replayed.headers[header::SET_COOKIE]
                .to_str()
                .unwrap()
                .contains("Max-Age=0")
        );
    }
    // Signing out again changes nothing; the sign-out was audited once,
    // under the token whose session ended (and the forced one as refused).
    let again = post(&reg, "/ui/sign-out", "", &[("cookie", &cookie)]).await;
    assert_eq!(again.status, StatusCode::SEE_OTHER);
    let events = tfreg_store::catalog::audit::recent(reg.registry.items.as_ref(), 100)
        .await
        .unwrap();
    let ended: Vec<(u16, &str)> = events
        .iter()
        .filter(|e| e.action == "session.end")
        .map(|e| (e.status, e.actor.token_id.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(ended, [(303, &reader_id[..]), (403, &reader_id[..])]);
    // A new session of the same token works; so does another one opened
    // before that sign-out, on another browser.
    let other = sign_in(&reg, &reader).await;
    let cookie = sign_in(&reg, &reader).await;
    get(&reg, "/ui/home", Some(&cookie))
        .await
        .expect(StatusCode::OK, "signed in again");
    let out = post(&reg, "/ui/sign-out", "", &[("cookie", &other)]).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    get(&reg, "/ui/home", Some(&cookie)).await.expect(
        StatusCode::OK,
        "another session's sign-out ends only that one",
    );

    // A tampered cookie is no session.
    let forged = cookie.replacen('.', ".9", 1);
    assert_eq!(
        get(&reg, "/ui/home", Some(&forged)).await.status,
        StatusCode::SEE_OTHER
    );

    // Revoking the token ends its sessions (this process forgets it at once).
    let id = tfreg_store::catalog::tokens::list(reg.registry.items.as_ref())
        .await
        .unwrap()
        .into_iter()
        .find(|t| t.record.describe_grants() == "read:*")
        .unwrap()
        .record
        .id;
    reg.request(
        Method::DELETE,
        &format!("/v1/admin/tokens/{id}"),
        Some(&admin),
        &[],
        Bytes::new(),
    )
    .await
    .expect(StatusCode::OK, "revoke");
    let after = get(&reg, "/ui/home", Some(&cookie)).await;
    assert_eq!(after.status, StatusCode::SEE_OTHER, "{}", after.text());
    assert!(location(&after).starts_with("/ui/sign-in"));
    assert!(
        after.headers[header::SET_COOKIE]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
}

#[tokio::test]
async fn a_namespace_token_sees_only_its_namespace() {
    let (reg, _) = registry().await;
    let team = reg.token(Scope::Read, Some("team")).await;
    let cookie = sign_in(&reg, &team).await;
    let home = get(&reg, "/ui/home", Some(&cookie)).await.text();
    assert!(home.contains("team/vpc/aws") && home.contains("team/cloud"));
    assert!(!home.contains("other/secret"), "{home}");
    let search = get(&reg, "/ui/search?q=secret", Some(&cookie)).await.text();
    assert!(!search.contains("other/secret/aws"), "{search}");
    let page = get(&reg, "/ui/modules/other/secret/aws", Some(&cookie)).await;
    assert_eq!(page.status, StatusCode::FORBIDDEN);
    assert!(
        page.text().contains("does not cover namespace other"),
        "{}",
        page.text()
    );
    assert!(!page.text().contains("# secret"));
    let ns = get(&reg, "/ui/namespaces/other", Some(&cookie)).await;
    assert_eq!(ns.status, StatusCode::FORBIDDEN);
    // The API's bearer token works for pages too (scripts, load tests).
    let resp = reg
        .request(
            Method::GET,
            "/ui/namespaces/team",
            Some(&team),
            &[],
            Bytes::new(),
        )
        .await;
    resp.expect(StatusCode::OK, "a namespace page with a bearer token");
}

#[tokio::test]
async fn a_module_page_shows_its_docs_usage_and_versions() {
    let (reg, admin) = registry().await;
    let cookie = sign_in(&reg, &admin).await;
    reg.request(
        Method::POST,
        "/v1/admin/modules/team/vpc/aws/1.2.0/deprecate",
        Some(&admin),
        &[("content-type", "application/json")],
        br#"{"message":"use 1.3"}"#.to_vec(),
    )
    .await
    .expect(StatusCode::OK, "deprecate");
    let page = get(&reg, "/ui/modules/team/vpc/aws", Some(&cookie)).await;
    page.expect(StatusCode::OK, "the module page");
    let html = page.text();
    assert!(
        html.contains("registry.test/team/vpc/aws <span class=\"version\">1.3.0"),
        "the latest"
    );
    assert!(plain(&html).contains("version = \"~> 1.3\""), "{html}");
    assert!(html.contains("data-input=\"name\""));
    assert!(html.contains("Must hold: Must be a CIDR block."));
    assert!(html.contains("Creates a VPC with subnets."));
    assert!(html.contains("Submodule <code>modules/flow-log</code>"));
    assert!(
        !html.contains("<script>window.pwned"),
        "the README's script is gone"
    );
    assert!(!html.contains("javascript:"), "and its javascript: link");
    // Only required inputs are placeholders in the snippet.
    assert!(plain(&html).contains("  # name = string\n}"), "{html}");
    assert!(!plain(&html).contains("# cidr"));
    let old = get(&reg, "/ui/modules/team/vpc/aws/1.2.0", Some(&cookie))
        .await
        .text();
    assert!(
        old.contains("<strong>Deprecated:</strong> use 1.3"),
        "{old}"
    );
    let missing = get(&reg, "/ui/modules/team/vpc/aws/9.9.9", Some(&cookie)).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(missing.text().contains("Not found"));
}

#[tokio::test]
async fn a_provider_page_shows_platforms_key_and_lock_hashes() {
    let (reg, admin) = registry().await;
    let cookie = sign_in(&reg, &admin).await;
    let page = get(&reg, "/ui/providers/team/cloud", Some(&cookie)).await;
    page.expect(StatusCode::OK, "the provider page");
    let html = page.text();
    assert!(
        html.contains("data-platform=\"darwin_arm64\"")
            && html.contains("data-platform=\"linux_amd64\"")
    );
    let text = plain(&html);
    assert!(
        text.contains("source  = \"registry.test/team/cloud\""),
        "{html}"
    );
    assert!(text.contains("version = \"~> 2.1\""), "{html}");
    assert_eq!(
        text.matches("\"h1:").count(),
        2,
        "one h1 per platform: {html}"
    );
    assert_eq!(
        text.matches("\"zh:").count(),
        2,
        "one zh per platform: {html}"
    );
    assert!(html.contains("id=\"key-id\""));
}

#[tokio::test]
async fn every_page_carries_the_security_headers_and_escapes_what_it_echoes() {
    let (reg, admin) = registry().await;
    let cookie = sign_in(&reg, &admin).await;
    let search = get(
        &reg,
        "/ui/search?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        Some(&cookie),
    )
    .await;
    search.expect(StatusCode::OK, "search");
    assert!(!search.text().contains("<script>alert(1)"));
    let text = search.text();
    assert!(
        text.contains("&lt;script&gt;") || text.contains("&#60;script&#62;"),
        "{text}"
    );
    for resp in [
        search,
        get(&reg, "/ui/nope", Some(&cookie)).await,
        get(&reg, "/ui/modules/Bad%20Name/x/y", Some(&cookie)).await,
        get(&reg, "/ui/home", None).await,
        get(&reg, "/ui/sign-in", None).await,
    ] {
        let h = &resp.headers;
        assert_eq!(h[header::CONTENT_SECURITY_POLICY], tfreg_ui::CSP);
        assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
        assert!(tfreg_ui::CSP.contains("frame-ancestors 'none'"));
        assert!(!tfreg_ui::CSP.contains("unsafe-inline"));
    }
    let nope = get(&reg, "/ui/nope", Some(&cookie)).await;
    assert_eq!(nope.status, StatusCode::NOT_FOUND);
    assert!(
        nope.headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    let css = tfreg_ui::assets::Asset::Css;
    let asset = get(&reg, &format!("/ui/static/{}", css.file_name()), None).await;
    asset.expect(StatusCode::OK, "a static file needs no session");
    assert!(
        asset.headers[header::CACHE_CONTROL]
            .to_str()
            .unwrap()
            .contains("immutable")
    );
}

#[tokio::test]
async fn search_matches_every_word_and_filters_by_kind() {
    let (reg, admin) = registry().await;
    let cookie = sign_in(&reg, &admin).await;
    let text = |q: &'static str| {
        let reg = &reg;
        let cookie = cookie.clone();
        async move {
            get(reg, &format!("/ui/search?q={q}"), Some(&cookie))
                .await
                .text()
        }
    };
    let vpc = text("subnets+team").await;
    assert!(
        vpc.contains("team/vpc/aws") && !vpc.contains("team/cloud"),
        "{vpc}"
    );
    let providers = text("team&kind=provider").await;
    assert!(providers.contains("team/cloud") && !providers.contains("team/vpc/aws"));
    assert!(text("nothing-like-this").await.contains("0 of 3 match"));
}

#[tokio::test]
async fn the_header_names_the_session_its_token_and_grants() {
    use tfreg_model::grants::TokenGrant;
    use tfreg_model::token::NewToken;
    let (reg, _) = registry().await;
    let grants = vec![
        TokenGrant::parse("read").unwrap(),
        TokenGrant::parse("publish:team").unwrap(),
    ];
    let token = reg
        .token_with(NewToken::with_grants("alice<b>", grants))
        .await;
    let cookie = sign_in(&reg, &token).await;
    for path in [
        "/ui/home",
        "/ui/modules/other/secret/aws",
        "/ui/namespaces/nothing",
    ] {
        let page = get(&reg, path, Some(&cookie)).await;
        let html = page.text();
        assert!(html.contains("id=\"signed-in-as\""), "{path}: {html}");
        assert!(
            plain(&html).contains("alice<b> · read:*, publish:team"),
            "{path}: {html}"
        );
        assert!(!html.contains("alice<b>"), "escaped: {html}");
    }
    // No session, no name (a bearer token is no session).
    let by_header = reg
        .request(Method::GET, "/ui/home", Some(&token), &[], Bytes::new())
        .await;
    by_header.expect(StatusCode::OK, "a bearer token reads the UI");
    assert!(!by_header.text().contains("signed-in-as"));
}

/// What the pull-through cache holds, written through the store's own API
/// (as a fill writes it): an online upstream with a provider version (one
/// of its two platforms stored) and a module (a pinned git version, and one
/// passed through for the credentials in its source); a second, sealed
/// upstream with nothing cached.
async fn cache_something(reg: &TestRegistry) {
    use std::collections::BTreeMap;
    use tfreg_model::cache::module::{CachedModuleRelease, ModuleOrigin, StoredModule};
    use tfreg_model::cache::{
        CachedArchive, CachedRelease, OriginList, OriginVersion, StoredArchive,
    };
    use tfreg_model::upstream::{CredentialRef, Mode, Serves, UpstreamHost, UpstreamSettings};
    use tfreg_store::catalog::cache::CachedProvider;
    use tfreg_store::catalog::cached_module::CachedModule;
    use tfreg_store::catalog::upstreams;

    let items = reg.registry.items.as_ref();
    let host = "origin.example.test";
    let mut settings = UpstreamSettings::new(Serves {
        providers: true,
        modules: true,
    });
    settings.credentials = Some(CredentialRef::Env("ORIGIN_TOKEN_VARIABLE".into()));
    let upstream = UpstreamHost::parse(host).unwrap();
    upstreams::put_upstream(items, &upstream, settings.clone(), "operator", 1)
        .await
        .unwrap();
    settings.mode = Mode::Sealed;
    settings.serves.modules = false;
    let sealed = UpstreamHost::parse("sealed.example.test").unwrap();
    upstreams::put_upstream(items, &sealed, settings, "operator", 1)
        .await
        .unwrap();

    let list = |versions: &[&str]| OriginList {
        versions: versions
            .iter()
            .map(|v| OriginVersion {
                version: v.to_string(),
                protocols: vec!["5.0".into()],
                platforms: vec!["linux_amd64".into(), "darwin_arm64".into()],
            })
            .collect(),
        warnings: vec![],
        fetched_at: 1_795_392_000 + 9 * 3600 + 30 * 60,
        failed_at: None,
    };
    let provider = CachedProvider::new(host, "hashicorp", "null");
    provider
        .put_origin_list(items, &list(&["1.0.0", "0.9.0"]))
        .await
        .unwrap();
    let archive = |os_arch: &str| CachedArchive {
        filename: format!("terraform-provider-null_1.0.0_{os_arch}.zip"),
        sha256: "ab".repeat(32),
        stored: None,
    };
    provider
        .keep_release(
            items,
            &CachedRelease {
                version: "1.0.0".into(),
                protocols: vec!["5.0".into()],
                shasums_sha256: "cd".repeat(32),
                signature_sha256: Some("ef".repeat(32)),
                signed_by: Some("34365D9472D7468F".into()),
                key_expired: false,
                signing_keys: "{}".into(),
                platforms: BTreeMap::from([
                    ("linux_amd64".to_string(), archive("linux_amd64")),
                    ("darwin_arm64".to_string(), archive("darwin_arm64")),
                ]),
                verified_at: 2,
            },
        )
        .await
        .unwrap();
    provider
        .archive_stored(
            items,
            "1.0.0",
            "linux_amd64",
            StoredArchive {
                size: 10,
                h1: None,
                stored_at: 3,
            },
        )
        .await
        .unwrap();

    let module = CachedModule::new(host, "hashicorp", "consul", "aws");
    module
        .put_origin_list(items, &list(&["0.1.0", "0.2.0"]))
        .await
        .unwrap();
    for release in [
        CachedModuleRelease {
            version: "0.1.0".into(),
            origin_source: "git::https://github.com/hashicorp/consul.git?ref=v0.1.0".into(),
            source: ModuleOrigin::Git {
                repo: "https://github.com/hashicorp/consul.git".into(),
                reference: Some("v0.1.0".into()),
                commit: "0123456789abcdef0123456789abcdef01234567".into(),
                subdir: None,
            },
            resolved_at: 4,
            stored: Some(StoredModule {
                sha256: "12".repeat(32),
                size: 100,
                stored_at: 4,
            }),
        },
        CachedModuleRelease {
            version: "0.2.0".into(),
            origin_source: "git::https://x-access-token:ghp_origin_secret@github.com/h/c.git"
                .into(),
            source: ModuleOrigin::PassThrough {
                why: "credentials in the URL".into(),
            },
            resolved_at: 5,
            stored: None,
        },
    ] {
        module.keep_release(items, &release).await.unwrap();
    }
}

/// The cache's page (issue 22) needs what `GET /v1/admin/cache` needs: an
/// admin token over the whole registry, by session or bearer token; it
/// shows each upstream with what is cached from it, and no credential.
#[tokio::test]
async fn the_cache_page_shows_what_is_cached_from_where_to_admins_only() {
    let (reg, admin) = registry().await;
    cache_something(&reg).await;

    // No session: sign in first, and nothing of the cache shown.
    let resp = get(&reg, "/ui/cache", None).await;
    assert_eq!(resp.status, StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/ui/sign-in?next=%2Fui%2Fcache");
    assert!(!resp.text().contains("origin.example.test"));

    // A token that may read everything, publish everything, or administer
    // one namespace: 403, as the admin API answers it.
    let reader = reg.token(Scope::Read, None).await;
    let publisher = reg.token(Scope::Publish, None).await;
    let team_admin = reg.token(Scope::Admin, Some("team")).await;
    for (token, why) in [
        (&reader, "needs the admin scope"),
        (&publisher, "needs the admin scope"),
        (&team_admin, "does not cover the whole registry"),
    ] {
        let cookie = sign_in(&reg, token).await;
        let page = get(&reg, "/ui/cache", Some(&cookie)).await;
        assert_eq!(page.status, StatusCode::FORBIDDEN, "{}", page.text());
        let html = page.text();
        assert!(html.contains("HTTP 403") && html.contains(why), "{html}");
        assert!(!html.contains("origin.example.test"), "{html}");
        let home = get(&reg, "/ui/home", Some(&cookie)).await.text();
        assert!(!home.contains("/ui/cache"), "no link offered: {home}");
        let api = reg
            .request(
                Method::GET,
                "/v1/admin/cache",
                Some(token),
                &[],
                Bytes::new(),
            )
            .await;
        assert_eq!(api.status, StatusCode::FORBIDDEN, "the API agrees");
    }

    // Anonymous reads open the read pages, not this one.
    let open = reg.reconfigure(|mut r| {
        r.config.anonymous_reads = true;
        r
    });
    let resp = get(&open, "/ui/cache", None).await;
    assert_eq!(resp.status, StatusCode::SEE_OTHER);
    assert!(location(&resp).starts_with("/ui/sign-in?next="));
    get(&open, "/ui/home", None)
        .await
        .expect(StatusCode::OK, "anonymous home");
    let resp = open
        .request(Method::GET, "/ui/cache", Some(&reader), &[], Bytes::new())
        .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN);

    // The admin: linked from the header, and the page.
    let cookie = sign_in(&reg, &admin).await;
    let home = get(&reg, "/ui/home", Some(&cookie)).await.text();
    assert!(
        home.contains("<a id=\"nav-cache\" href=\"/ui/cache\">"),
        "{home}"
    );
    let page = get(&reg, "/ui/cache", Some(&cookie)).await;
    page.expect(StatusCode::OK, "the cache page");
    assert_eq!(page.headers[header::CACHE_CONTROL], "no-store");
    let html = plain(&page.text());
    for shown in [
        "data-host=\"origin.example.test\"",
        "mode-online",
        "Serves providers and modules.",
        "data-host=\"sealed.example.test\"",
        "mode-sealed",
        "Serves providers; sealed",
        "origin.example.test/hashicorp/null",
        "List fetched 2026-11-23 09:30 UTC",
        "<tr data-version=\"1.0.0\">",
        "<code class=\"key-id\">34365D9472D7468F</code>",
        "<code class=\"platform\">linux_amd64</code>",
        "origin.example.test/hashicorp/consul/aws",
        "git::https://github.com/hashicorp/consul.git?ref=v0.1.0",
        "<code class=\"commit\">0123456789abcdef0123456789abcdef01234567</code>",
        "<span class=\"mark stored\">stored</span>",
        "passed through</span> credentials in the URL",
        "git::https://***@github.com/h/c.git",
    ] {
        assert!(html.contains(shown), "{shown} not in {html}");
    }
    // Listed but not stored: darwin_arm64 is no stored platform; 0.9.0 was
    // never cached (only listed).
    assert!(!html.contains("darwin_arm64"), "{html}");
    assert!(!html.contains("0.9.0"), "{html}");
    // No secret: neither the credential in a source nor where the
    // upstream's credentials are read from.
    assert!(!html.contains("ghp_origin_secret"), "{html}");
    assert!(!html.contains("ORIGIN_TOKEN_VARIABLE"), "{html}");
    // Newest first.
    let newer = html.find("data-version=\"0.2.0\"").unwrap();
    let older = html.find("data-version=\"0.1.0\"").unwrap();
    assert!(newer < older);
    // By bearer token too (as GET /v1/admin/cache).
    let resp = reg
        .request(Method::GET, "/ui/cache", Some(&admin), &[], Bytes::new())
        .await;
    resp.expect(StatusCode::OK, "the cache page with an admin bearer token");
}

#[tokio::test]
async fn the_cache_page_says_when_nothing_is_cached() {
    let (reg, admin) = registry().await;
    let cookie = sign_in(&reg, &admin).await;
    let page = get(&reg, "/ui/cache", Some(&cookie)).await;
    page.expect(StatusCode::OK, "the empty cache page");
    assert!(page.text().contains("id=\"no-upstreams\""));
}
