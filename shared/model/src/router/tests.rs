use strum::VariantArray as _;

use super::*;
use crate::address::Platform;
use crate::token::Realm;

fn get(path: &str) -> Result<Route, RouteError> {
    route(&Method::GET, path)
}

fn provider() -> ProviderName {
    ProviderName::parse("h", "null").unwrap()
}

fn v(s: &str) -> Version {
    Version::parse(s).unwrap()
}

#[test]
fn routes_every_protocol_endpoint() {
    assert_eq!(
        get("/.well-known/terraform.json").unwrap(),
        Route::Discovery
    );
    assert!(matches!(
        get("/v1/providers/HashiCorp/null/versions").unwrap(),
        Route::Read(ReadRoute::ProviderVersions { provider }) if provider.namespace == "hashicorp"
    ));
    assert!(matches!(
        get("/v1/providers/h/null/2.1.2/download/linux/amd64").unwrap(),
        Route::Read(ReadRoute::ProviderDownload { platform, .. }) if platform.to_string() == "linux_amd64"
    ));
    assert!(matches!(
        get("/v1/modules/ns/vpc/aws/versions").unwrap(),
        Route::Read(ReadRoute::ModuleVersions { .. })
    ));
    assert!(matches!(
        get("/v1/modules/ns/vpc/aws/1.0.0/download").unwrap(),
        Route::Read(ReadRoute::ModuleDownload { .. })
    ));
    assert!(matches!(
        get("/v1/mirror/registry.terraform.io/hashicorp/null/index.json").unwrap(),
        Route::Read(ReadRoute::MirrorIndex { .. })
    ));
    assert!(matches!(
        get("/v1/mirror/localhost%3A8443/ns/null/2.1.2.json").unwrap(),
        Route::Read(ReadRoute::MirrorVersion { hostname, version, .. })
            if hostname.as_str() == "localhost:8443" && version.to_string() == "2.1.2"
    ));
    assert!(matches!(
        get("/v1/blobs/archives/ab/x.zip").unwrap(),
        Route::Blob(key) if key.as_str() == "archives/ab/x.zip"
    ));
    assert!(matches!(
        route(&Method::POST, "/v1/publish/providers/ns/null/1.0.0/begin").unwrap(),
        Route::Publish(PublishRoute {
            target: PublishTarget::Provider { .. },
            step: PublishStep::Begin,
        })
    ));
    assert!(matches!(
        route(
            &Method::POST,
            "/v1/publish/modules/ns/vpc/aws/1.0.0/complete"
        )
        .unwrap(),
        Route::Publish(PublishRoute {
            target: PublishTarget::Module { .. },
            step: PublishStep::Complete,
        })
    ));
    assert!(matches!(
        route(
            &Method::POST,
            "/v1/publish/mirror/registry.terraform.io/hashicorp/null/1.0.0/begin"
        )
        .unwrap(),
        Route::Publish(PublishRoute {
            target: PublishTarget::Mirror { .. },
            ..
        })
    ));
    assert!(matches!(
        route(&Method::HEAD, "/v1/providers/h/null/versions").unwrap(),
        Route::Read(ReadRoute::ProviderVersions { .. })
    ));
}

/// Every kind of route (derived from the enums): its example's path routes
/// back to it, with each of its methods; the kinds are as many as their
/// names; their endpoints are every endpoint, and every endpoint's name is
/// its own.
#[test]
fn every_kind_of_route_has_an_example_that_routes_back_to_it() {
    let kinds = RouteKind::all();
    let mut names = std::collections::BTreeSet::new();
    let mut endpoints = std::collections::BTreeSet::new();
    for &kind in &kinds {
        let example = kind.example();
        assert_eq!(example.kind(), kind, "{kind:?}");
        let path = example.path();
        for method in example.methods() {
            assert_eq!(
                route(method, &path).as_ref(),
                Ok(&example),
                "{method} {path}"
            );
        }
        assert!(names.insert(kind.name()), "{} named twice", kind.name());
        endpoints.insert(example.endpoint());
    }
    assert_eq!(
        endpoints,
        Endpoint::all().into_iter().collect(),
        "every endpoint has a route"
    );
    let endpoint_names: std::collections::BTreeSet<_> =
        Endpoint::all().into_iter().map(Endpoint::name).collect();
    assert_eq!(endpoint_names.len(), Endpoint::all().len());
    assert!(endpoint_names.contains("provider-versions"));
    assert!(endpoint_names.contains("cache-module-download"));
    assert!(names.contains("admin/list-tokens") && names.contains("auth/sso-start"));
    // One kind per leaf variant: 1 + 10 + 1 + 3×2 + admin + ui + auth.
    assert_eq!(
        kinds.len(),
        1 + ReadEndpoint::VARIANTS.len()
            + 1
            + PublishKind::VARIANTS.len() * PublishStep::VARIANTS.len()
            + AdminOp::VARIANTS.len()
            + UiPage::VARIANTS.len()
            + AuthRoute::VARIANTS.len()
    );
}

#[test]
fn paths_built_from_routes_route_back_to_them() {
    let host = Hostname::parse("localhost:8443").unwrap();
    let module = ModuleName::parse("team_a", "vpc", "aws").unwrap();
    let key = BlobKey::parse("archives/ab/0123/x_1.0.0_linux_amd64.zip").unwrap();
    let routes = vec![
        Route::Discovery,
        Route::Ui(UiRoute::Root),
        Route::Ui(UiRoute::Home),
        Route::Ui(UiRoute::Search),
        Route::Ui(UiRoute::SignIn),
        Route::Ui(UiRoute::Cache),
        Route::Ui(UiRoute::Namespace {
            namespace: "hashicorp".into(),
        }),
        Route::Ui(UiRoute::Module {
            module: ModuleName::parse("h", "vpc", "aws").unwrap(),
            version: None,
        }),
        Route::Ui(UiRoute::Module {
            module: ModuleName::parse("h", "vpc", "aws").unwrap(),
            version: Some(v("1.0.0")),
        }),
        Route::Ui(UiRoute::Provider {
            provider: provider(),
            version: Some(v("2.1.2")),
        }),
        Route::Ui(UiRoute::Asset("tfreg.0123456789ab.css".into())),
        Route::Read(ReadRoute::ProviderVersions {
            provider: provider(),
        }),
        Route::Read(ReadRoute::ProviderDownload {
            provider: provider(),
            version: v("1.2.3-rc.1"),
            platform: Platform::parse("darwin", "arm64").unwrap(),
        }),
        Route::Read(ReadRoute::ModuleVersions {
            module: module.clone(),
        }),
        Route::Read(ReadRoute::ModuleDownload {
            module: module.clone(),
            version: v("1.0.0"),
        }),
        Route::Read(ReadRoute::MirrorIndex {
            hostname: host.clone(),
            provider: provider(),
        }),
        Route::Read(ReadRoute::MirrorVersion {
            hostname: host.clone(),
            provider: provider(),
            version: v("2.1.2"),
        }),
        Route::Read(ReadRoute::CacheProviderVersions {
            host: crate::upstream::UpstreamHost::parse("registry.example.test:8443").unwrap(),
            provider: provider(),
        }),
        Route::Read(ReadRoute::CacheProviderDownload {
            host: crate::upstream::UpstreamHost::parse("registry.terraform.io").unwrap(),
            provider: provider(),
            version: v("2.1.2"),
            platform: Platform::parse("linux", "amd64").unwrap(),
        }),
        Route::Read(ReadRoute::CacheModuleVersions {
            host: crate::upstream::UpstreamHost::parse("registry.terraform.io").unwrap(),
            module: module.clone(),
        }),
        Route::Read(ReadRoute::CacheModuleDownload {
            host: crate::upstream::UpstreamHost::parse("registry.example.test:8443").unwrap(),
            module: module.clone(),
            version: v("1.2.0"),
        }),
        Route::Blob(key),
        Route::Read(ReadRoute::Oci(OciRoute::Base)),
        Route::Read(ReadRoute::Oci(OciRoute::Token)),
        Route::Read(ReadRoute::Oci(OciRoute::Tags {
            repository: crate::oci::Repository::Mirrored {
                hostname: Hostname::parse("localhost:8443").unwrap(),
                provider: provider(),
            },
        })),
        Route::Read(ReadRoute::Oci(OciRoute::Manifest {
            repository: crate::oci::Repository::Module(module.clone()),
            reference: crate::oci::Reference::Latest,
        })),
        Route::Read(ReadRoute::Oci(OciRoute::Blob {
            repository: crate::oci::Repository::Provider(provider()),
            digest: crate::oci::Digest::of(b"{}"),
        })),
    ];
    let targets = [
        PublishTarget::Provider {
            provider: provider(),
            version: v("1.0.0"),
        },
        PublishTarget::Module {
            module,
            version: v("0.1.0-beta"),
        },
        PublishTarget::Mirror {
            hostname: host,
            provider: provider(),
            version: v("2.1.2"),
        },
    ];
    let publishes = targets.iter().flat_map(|t| {
        PublishStep::VARIANTS.iter().map(|&step| {
            Route::Publish(PublishRoute {
                target: t.clone(),
                step,
            })
        })
    });
    let admin = AdminRoute::examples(&targets).into_iter().map(Route::Admin);
    let admin = admin.chain(AuthRoute::VARIANTS.iter().map(|&a| Route::Auth(a)));
    let mut endpoints = std::collections::HashSet::new();
    for r in routes.into_iter().chain(publishes).chain(admin) {
        let path = r.path();
        let method = &r.methods()[0];
        assert_eq!(route(method, &path).unwrap(), r, "{path}");
        endpoints.insert(r.endpoint());
    }
    assert_eq!(
        endpoints.len(),
        Endpoint::all().len(),
        "every endpoint has a route"
    );
    for t in targets {
        let text: String = t.clone().into();
        assert_eq!(PublishTarget::try_from(text).unwrap(), t);
    }
}

/// Who may open each web UI page: a read token covering what it shows,
/// but the cache's page, which needs exactly what the admin API's listing
/// of the cache and of the upstreams needs (an admin token over the whole
/// registry), so no token sees more in a page than through the API.
#[test]
fn ui_pages_need_what_the_api_needs_for_the_same_data() {
    let host = Hostname::parse("registry.test").unwrap();
    let cache = get("/ui/cache").unwrap();
    assert_eq!(cache, Route::Ui(UiRoute::Cache));
    assert_eq!(cache.endpoint(), Endpoint::Ui);
    assert_eq!(cache.audit_action(), None, "a page changes nothing");
    let admin_list = Route::Admin(AdminRoute::ListCached { host: None });
    assert_eq!(
        cache.access(&host),
        Access::Token {
            scope: Scope::Admin,
            realm: Realm::Registry
        }
    );
    assert_eq!(cache.access(&host), admin_list.access(&host));
    assert_eq!(
        cache.access(&host),
        Route::Admin(AdminRoute::ListUpstreams).access(&host)
    );
    for (path, realm) in [
        ("/ui/home", Realm::AnyNamespace),
        ("/ui/search", Realm::AnyNamespace),
        ("/ui/namespaces/acme", Realm::Namespace("acme")),
        ("/ui/modules/acme/vpc/aws", Realm::Namespace("acme")),
        ("/ui/providers/acme/null/1.0.0", Realm::Namespace("acme")),
    ] {
        assert_eq!(
            get(path).unwrap().access(&host),
            Access::Token {
                scope: Scope::Read,
                realm
            },
            "{path}"
        );
    }
    for path in ["/", "/ui/sign-in", "/ui/static/tfreg.0123456789ab.css"] {
        assert_eq!(get(path).unwrap().access(&host), Access::Public, "{path}");
    }
    for bad in ["/ui/cache/x", "/ui/cache/registry.terraform.io"] {
        assert!(matches!(get(bad), Err(RouteError::NotFound(_))), "{bad}");
    }
}

#[test]
fn admin_paths_pick_their_operation_by_method() {
    let tokens = "/v1/admin/tokens";
    assert_eq!(
        route(&Method::GET, tokens).unwrap(),
        Route::Admin(AdminRoute::ListTokens)
    );
    assert_eq!(
        route(&Method::POST, tokens).unwrap(),
        Route::Admin(AdminRoute::CreateToken)
    );
    assert!(matches!(
        route(&Method::PUT, tokens),
        Err(RouteError::MethodNotAllowed { allow, .. }) if allow == [Method::GET, Method::POST]
    ));
    assert!(matches!(
        route(&Method::DELETE, "/v1/admin/tokens/0123456789AB").unwrap(),
        Route::Admin(AdminRoute::RevokeToken { id }) if id == "0123456789ab"
    ));
    assert!(matches!(
        route(&Method::DELETE, "/v1/admin/tokens/xyz"),
        Err(RouteError::BadRequest(_))
    ));
    assert!(matches!(
        route(&Method::POST, "/v1/admin/providers/ns/null/1.0.0/yank").unwrap(),
        Route::Admin(AdminRoute::Lifecycle {
            action: LifecycleAction::Yank,
            ..
        })
    ));
    assert!(matches!(
        route(&Method::POST, "/v1/admin/providers/ns/null/1.0.0/explode"),
        Err(RouteError::NotFound(_))
    ));
    assert!(matches!(
        route(&Method::GET, "/v1/admin/modules/ns/m/aws/1.0.0"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
    assert!(matches!(
        route(&Method::DELETE, "/v1/admin/keys/ns/abc"),
        Err(RouteError::BadRequest(_))
    ));
}

#[test]
fn malformed_input_is_4xx_never_a_panic() {
    let cases = [
        ("/v1/providers/h/null/v1.0.0/download/linux/amd64", 400),
        ("/v1/providers/h/null/1.0/download/linux/amd64", 400),
        ("/v1/providers/h/nu ll/versions", 400),
        ("/v1/providers/../null/versions", 400),
        ("/v1/providers/h/null/1.0.0/download/Linux/amd64", 400),
        ("/v1/providers/h%2fx/null/versions", 400),
        ("/v1/providers/h/%zz/versions", 400),
        ("/v1/providers/h/%ff/versions", 400),
        ("/v1/blobs/archives/../../etc/passwd", 400),
        ("/v1/blobs/", 400),
        ("/v1/blobs/registry.db", 400),
        ("/v1/providers/h/null", 404),
        ("/v1/providers/h/null/versions/extra", 404),
        ("/v1/publish/providers/h/null/1.0.0/finish", 404),
        ("/v1/nothing", 404),
        ("/etc/passwd", 404),
        ("", 404),
        ("/v1/mirror/bad_host!/h/null/index.json", 400),
        ("/v1/modules/ns/vpc/aws/1.0.0.0/download", 400),
    ];
    for (path, status) in cases {
        let err = get(path).expect_err(path);
        assert_eq!(status_of(&err), status, "{path}: {err}");
    }
    let err = route(&Method::POST, "/v1/providers/h/null/versions").unwrap_err();
    assert_eq!(status_of(&err), 405);
    assert!(
        matches!(err, RouteError::MethodNotAllowed { allow, .. } if allow == [Method::GET, Method::HEAD])
    );
    let err = route(&Method::GET, "/v1/publish/providers/ns/null/1.0.0/begin").unwrap_err();
    assert!(matches!(err, RouteError::MethodNotAllowed { allow, .. } if allow == [Method::POST]));
    let err = get(&format!("/v1/{}", "a/".repeat(2000))).unwrap_err();
    assert_eq!(status_of(&err), 400);
    let err = get(&format!("/v1/{}", "a".repeat(1500))).unwrap_err();
    assert!(err.to_string().len() < 200, "bounded message: {err}");
}

#[test]
fn escapes_are_two_hex_digits_exactly() {
    assert_eq!(super::decode_segment("a%3Ab%3a").unwrap(), "a:b:");
    // Rust's integer parser takes a sign: `%+f` must not decode to 0x0F.
    for seg in ["a%+fb", "a%-1", "a% 1", "a%3", "a%"] {
        assert!(super::decode_segment(seg).is_err(), "{seg}");
    }
}

/// The status the HTTP pipeline answers each kind with (its own tests prove
/// the mapping): kept here so the table above reads as the client sees it.
fn status_of(err: &RouteError) -> u16 {
    match err {
        RouteError::BadRequest(_) => 400,
        RouteError::NotFound(_) => 404,
        RouteError::MethodNotAllowed { .. } => 405,
    }
}

#[test]
fn sign_in_routes_are_public_and_only_the_token_steps_are_audited() {
    let host = Hostname::parse("registry.test").unwrap();
    for &step in AuthRoute::VARIANTS {
        let r = route(&step.method()[0], step.path()).unwrap();
        assert_eq!(r, Route::Auth(step));
        assert_eq!(r.access(&host), Access::Public, "{step:?}");
        assert_eq!(r.endpoint(), Endpoint::Auth);
    }
    assert_eq!(
        Route::Auth(AuthRoute::Token).audit_action(),
        Some("token.login")
    );
    assert_eq!(Route::Auth(AuthRoute::Callback).audit_action(), None);
    // The CI exchange: POST only, audited, answered in JSON; never taken
    // for a read or publish path under /v1/.
    let exchange = route(&Method::POST, "/v1/auth/exchange").unwrap();
    assert_eq!(exchange, Route::Auth(AuthRoute::Exchange));
    assert_eq!(exchange.audit_action(), Some("token.exchange"));
    assert_eq!(exchange.audit_target(), "tokens");
    assert!(!AuthRoute::Exchange.in_browser());
    assert!(matches!(
        route(&Method::GET, "/v1/auth/exchange"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
    assert!(matches!(
        route(&Method::POST, "/v1/auth/exchange/x"),
        Err(RouteError::NotFound(_))
    ));
    assert!(matches!(
        route(&Method::GET, "/oauth/token"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
    assert!(matches!(
        route(&Method::POST, "/oauth/authorize"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
    assert!(matches!(
        route(&Method::GET, "/oauth/authorize/x"),
        Err(RouteError::NotFound(_))
    ));
}

#[test]
fn group_mappings_and_trust_policies_are_admin_routes() {
    use crate::token::Realm;
    let admin = |m: &Method, p: &str| match route(m, p) {
        Ok(Route::Admin(a)) => a,
        other => panic!("{m} {p}: {other:?}"),
    };
    assert_eq!(
        admin(&Method::GET, "/v1/admin/sso"),
        AdminRoute::ListMappings
    );
    assert_eq!(
        admin(&Method::POST, "/v1/admin/sso/map"),
        AdminRoute::MapGroup
    );
    assert_eq!(
        admin(&Method::POST, "/v1/admin/sso/unmap"),
        AdminRoute::UnmapGroup
    );
    // The group is in the body, never the path.
    assert!(route(&Method::POST, "/v1/admin/sso/map/platform").is_err());
    assert!(matches!(
        route(&Method::DELETE, "/v1/admin/sso/map"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
    assert_eq!(
        admin(&Method::GET, "/v1/admin/trust"),
        AdminRoute::ListTrust { namespace: None }
    );
    let add = admin(&Method::POST, "/v1/admin/trust/Acme");
    assert_eq!(
        add,
        AdminRoute::AddTrust {
            namespace: "acme".into()
        }
    );
    assert_eq!(add.realm(), Realm::Namespace("acme"));
    let remove = admin(&Method::DELETE, "/v1/admin/trust/acme/0123456789AB");
    assert_eq!(
        remove,
        AdminRoute::RemoveTrust {
            namespace: "acme".into(),
            id: "0123456789ab".into()
        }
    );
    assert!(matches!(
        route(&Method::DELETE, "/v1/admin/trust/acme/xyz"),
        Err(RouteError::BadRequest(_))
    ));
    assert!(route(&Method::POST, "/v1/admin/trust/-bad-").is_err());
    for (r, action) in [
        (AdminRoute::MapGroup, Some("sso.map")),
        (AdminRoute::UnmapGroup, Some("sso.unmap")),
        (AdminRoute::ListMappings, None),
        (add, Some("trust.add")),
        (remove, Some("trust.remove")),
        (AdminRoute::ListTrust { namespace: None }, None),
    ] {
        let realm = r.realm();
        let scoped = matches!(
            r,
            AdminRoute::AddTrust { .. } | AdminRoute::RemoveTrust { .. }
        );
        assert_eq!(realm == Realm::Registry, !scoped, "{r:?}");
        assert_eq!(Route::Admin(r).audit_action(), action);
    }
}

#[test]
fn upstreams_are_registry_wide_admin_routes() {
    use crate::token::Realm;
    use crate::upstream::UpstreamHost;
    let host = UpstreamHost::parse("registry.example.test").unwrap();
    for (method, path, expected, action) in [
        (
            Method::GET,
            "/v1/admin/upstreams",
            AdminRoute::ListUpstreams,
            None,
        ),
        (
            Method::GET,
            "/v1/admin/upstreams/registry.example.test",
            AdminRoute::ShowUpstream { host: host.clone() },
            None,
        ),
        (
            Method::PUT,
            "/v1/admin/upstreams/Registry.Example.Test",
            AdminRoute::SetUpstream { host: host.clone() },
            Some("upstream.set"),
        ),
        (
            Method::DELETE,
            "/v1/admin/upstreams/registry.example.test",
            AdminRoute::RemoveUpstream { host: host.clone() },
            Some("upstream.remove"),
        ),
    ] {
        let got = route(&method, path).unwrap();
        assert_eq!(got, Route::Admin(expected.clone()), "{method} {path}");
        assert_eq!(expected.realm(), Realm::Registry);
        assert_eq!(got.audit_action(), action);
        // The path a client builds routes back here.
        assert_eq!(route(&method, &got.path()).unwrap(), got);
    }
    // With a port (escaped as the mirror's hosts are).
    let with_port = AdminRoute::SetUpstream {
        host: UpstreamHost::parse("registry.example.test:8443").unwrap(),
    };
    assert_eq!(
        route(&Method::PUT, &with_port.path()).unwrap(),
        Route::Admin(with_port)
    );
    // Not an upstream's name: 400. Another method: 405 naming the three.
    for bad in [
        "/v1/admin/upstreams/127.0.0.1",
        "/v1/admin/upstreams/localhost",
        "/v1/admin/upstreams/nodot",
        "/v1/admin/upstreams/%2e%2e",
    ] {
        let err = route(&Method::PUT, bad).unwrap_err();
        assert_eq!(status_of(&err), 400, "{bad}: {err:?}");
    }
    let err = route(&Method::POST, "/v1/admin/upstreams/registry.example.test").unwrap_err();
    assert!(
        matches!(&err, RouteError::MethodNotAllowed { allow, .. } if allow.len() == 3),
        "{err:?}"
    );
    assert_eq!(
        status_of(&route(&Method::PUT, "/v1/admin/upstreams").unwrap_err()),
        405
    );
    // A cache route whose host is no upstream's name: no such route (404).
    for host in ["127.0.0.1", "localhost", "%2e%2e", "nodot"] {
        let err = route(
            &Method::GET,
            &format!("/v1/cache/{host}/providers/a/b/versions"),
        )
        .unwrap_err();
        assert_eq!(status_of(&err), 404, "{host}: {err:?}");
    }
}

/// The usage of a package (issue 38): one GET each for a provider and a
/// module, an admin token over the package's namespace (another registry's
/// package, `?host=`: over the registry), no audit record (a read).
#[test]
fn usage_routes_are_namespace_admin_reads() {
    let host = Hostname::parse("registry.test").unwrap();
    let p = get("/v1/admin/usage/providers/Acme/null").unwrap();
    assert_eq!(
        p,
        Route::Admin(AdminRoute::ProviderUsage {
            provider: ProviderName::parse("acme", "null").unwrap()
        })
    );
    let m = get("/v1/admin/usage/modules/acme/vpc/aws").unwrap();
    assert!(matches!(
        &m,
        Route::Admin(AdminRoute::ModuleUsage { module }) if module.to_string() == "acme/vpc/aws"
    ));
    for r in [&p, &m] {
        assert_eq!(
            r.access(&host),
            Access::Token {
                scope: Scope::Admin,
                realm: Realm::Namespace("acme")
            }
        );
        assert_eq!(r.audit_action(), None, "a read changes nothing");
        assert_eq!(r.methods(), &[Method::GET]);
        let Route::Admin(a) = r else { unreachable!() };
        assert_eq!(a.usage_realm(false), Some(Realm::Namespace("acme")));
        assert_eq!(a.usage_realm(true), Some(Realm::Registry));
    }
    assert_eq!(AdminRoute::Audit.usage_realm(false), None);
    assert!(matches!(
        route(&Method::DELETE, "/v1/admin/usage/providers/acme/null"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
    for bad in [
        "/v1/admin/usage/providers/acme",
        "/v1/admin/usage/providers/acme/null/1.0.0",
        "/v1/admin/usage/modules/acme/vpc",
        "/v1/admin/usage",
    ] {
        assert!(matches!(get(bad), Err(RouteError::NotFound(_))), "{bad}");
    }
    assert!(matches!(
        get("/v1/admin/usage/providers/ac%20me/null"),
        Err(RouteError::BadRequest(_))
    ));
}
