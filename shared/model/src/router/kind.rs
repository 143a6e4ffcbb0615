//! Every kind of route, derived from the router's enums: one [`RouteKind`]
//! per variant down to the leaves (each read endpoint, admin operation, web
//! UI page, sign-in step, and publish of each kind of target at each step),
//! and an example route of each. Tests iterate [`RouteKind::all`], so a new
//! variant is in the route round trip, the template and `cargo lambda watch`
//! checks and the access matrix the moment it exists; matches over it are
//! exhaustive, so its example and its access rule do not compile without it.

use strum::VariantArray as _;

use crate::address::{Hostname, ModuleName, Platform, ProviderName};
use crate::blob_key::BlobKey;
use crate::oci::{Reference, Repository};
use crate::router::OciRoute;
use crate::router::{
    AdminOp, AuthRoute, PublishKind, PublishRoute, PublishStep, PublishTarget, ReadEndpoint,
    ReadRoute, Route, RouteClass, UiPage, UiRoute,
};
use crate::upstream::UpstreamHost;
use crate::version::Version;

/// One kind of route: a leaf variant of [`Route`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RouteKind {
    Discovery,
    Read(ReadEndpoint),
    Blob,
    Publish(PublishKind, PublishStep),
    Admin(AdminOp),
    Ui(UiPage),
    Auth(AuthRoute),
}

impl RouteKind {
    /// Every kind of route, derived from the variants of [`Route`] and of
    /// the enums inside it.
    pub fn all() -> Vec<RouteKind> {
        RouteClass::VARIANTS
            .iter()
            .flat_map(|class| -> Vec<RouteKind> {
                match class {
                    RouteClass::Discovery => vec![RouteKind::Discovery],
                    RouteClass::Read => ReadEndpoint::VARIANTS
                        .iter()
                        .map(|e| RouteKind::Read(*e))
                        .collect(),
                    RouteClass::Blob => vec![RouteKind::Blob],
                    RouteClass::Publish => PublishKind::VARIANTS
                        .iter()
                        .flat_map(|k| {
                            PublishStep::VARIANTS
                                .iter()
                                .map(|s| RouteKind::Publish(*k, *s))
                        })
                        .collect(),
                    RouteClass::Admin => AdminOp::VARIANTS
                        .iter()
                        .map(|op| RouteKind::Admin(*op))
                        .collect(),
                    RouteClass::Ui => UiPage::VARIANTS.iter().map(|p| RouteKind::Ui(*p)).collect(),
                    RouteClass::Auth => AuthRoute::VARIANTS
                        .iter()
                        .map(|a| RouteKind::Auth(*a))
                        .collect(),
                }
            })
            .collect()
    }

    /// A readable name: `read/provider-versions`, `publish/module/begin`,
    /// `admin/list-tokens`, `ui/home`, `auth/token`.
    pub fn name(self) -> String {
        match self {
            RouteKind::Discovery => "discovery".into(),
            RouteKind::Read(e) => format!("read/{}", e.name()),
            RouteKind::Blob => "blob".into(),
            RouteKind::Publish(k, s) => {
                format!("publish/{}/{}", <&str>::from(k), s.segment())
            }
            RouteKind::Admin(op) => format!("admin/{}", op.name()),
            RouteKind::Ui(p) => format!("ui/{}", <&str>::from(p)),
            RouteKind::Auth(a) => format!("auth/{}", <&str>::from(a)),
        }
    }

    /// An example route of this kind (on namespace `team`, version 1.0.0,
    /// upstream `registry.example.test`): one concrete path per variant,
    /// for tests that check every route where it is served.
    pub fn example(self) -> Route {
        let provider = || ProviderName::parse("team", "null").expect("a provider");
        let module = || ModuleName::parse("team", "vpc", "aws").expect("a module");
        let version = || Version::parse("1.0.0").expect("a version");
        let platform = || Platform::parse("linux", "amd64").expect("a platform");
        let hostname = || Hostname::parse("registry.terraform.io").expect("a hostname");
        let host = || UpstreamHost::parse("registry.example.test").expect("an upstream");
        let target = |kind: PublishKind| match kind {
            PublishKind::Provider => PublishTarget::Provider {
                provider: provider(),
                version: version(),
            },
            PublishKind::Module => PublishTarget::Module {
                module: module(),
                version: version(),
            },
            PublishKind::Mirror => PublishTarget::Mirror {
                hostname: hostname(),
                provider: provider(),
                version: version(),
            },
        };
        match self {
            RouteKind::Discovery => Route::Discovery,
            RouteKind::Read(e) => Route::Read(match e {
                ReadEndpoint::ProviderVersions => ReadRoute::ProviderVersions {
                    provider: provider(),
                },
                ReadEndpoint::ProviderDownload => ReadRoute::ProviderDownload {
                    provider: provider(),
                    version: version(),
                    platform: platform(),
                },
                ReadEndpoint::ModuleVersions => ReadRoute::ModuleVersions { module: module() },
                ReadEndpoint::ModuleDownload => ReadRoute::ModuleDownload {
                    module: module(),
                    version: version(),
                },
                ReadEndpoint::MirrorIndex => ReadRoute::MirrorIndex {
                    hostname: hostname(),
                    provider: provider(),
                },
                ReadEndpoint::MirrorVersion => ReadRoute::MirrorVersion {
                    hostname: hostname(),
                    provider: provider(),
                    version: version(),
                },
                ReadEndpoint::CacheProviderVersions => ReadRoute::CacheProviderVersions {
                    host: host(),
                    provider: provider(),
                },
                ReadEndpoint::CacheProviderDownload => ReadRoute::CacheProviderDownload {
                    host: host(),
                    provider: provider(),
                    version: version(),
                    platform: platform(),
                },
                ReadEndpoint::CacheModuleVersions => ReadRoute::CacheModuleVersions {
                    host: host(),
                    module: module(),
                },
                ReadEndpoint::CacheModuleDownload => ReadRoute::CacheModuleDownload {
                    host: host(),
                    module: module(),
                    version: version(),
                },
                ReadEndpoint::Oci => ReadRoute::Oci(OciRoute::Manifest {
                    repository: Repository::Provider(provider()),
                    reference: Reference::Version(version()),
                }),
            }),
            RouteKind::Blob => Route::Blob(
                BlobKey::parse("archives/ab/0123/null_1.0.0_linux_amd64.zip").expect("a key"),
            ),
            RouteKind::Publish(kind, step) => Route::Publish(PublishRoute {
                target: target(kind),
                step,
            }),
            RouteKind::Admin(op) => {
                let mut examples = op.examples(&[target(PublishKind::Provider)]);
                Route::Admin(examples.swap_remove(0))
            }
            RouteKind::Ui(page) => Route::Ui(match page {
                UiPage::Root => UiRoute::Root,
                UiPage::Home => UiRoute::Home,
                UiPage::Search => UiRoute::Search,
                UiPage::Namespace => UiRoute::Namespace {
                    namespace: "team".into(),
                },
                UiPage::Module => UiRoute::Module {
                    module: module(),
                    version: Some(version()),
                },
                UiPage::Provider => UiRoute::Provider {
                    provider: provider(),
                    version: None,
                },
                UiPage::Cache => UiRoute::Cache,
                UiPage::SignIn => UiRoute::SignIn,
                UiPage::SignOut => UiRoute::SignOut,
                UiPage::Asset => UiRoute::Asset("tfreg.0123456789ab.css".into()),
            }),
            RouteKind::Auth(step) => Route::Auth(step),
        }
    }
}

impl Route {
    /// This route's kind (its leaf variant).
    pub fn kind(&self) -> RouteKind {
        match self {
            Route::Discovery => RouteKind::Discovery,
            Route::Read(read) => RouteKind::Read(read.endpoint()),
            Route::Blob(_) => RouteKind::Blob,
            Route::Publish(p) => RouteKind::Publish((&p.target).into(), p.step),
            Route::Admin(admin) => RouteKind::Admin(admin.into()),
            Route::Ui(page) => RouteKind::Ui(page.into()),
            Route::Auth(step) => RouteKind::Auth(*step),
        }
    }
}
