//! The router ([`tfreg_model::router::route`]): any method and raw path (escapes,
//! dot-dot, very long segments, unicode) is routed or refused with a 400, 404
//! or 405, never a panic; and every valid [`Route`] routes back from its own
//! [`Route::path`].

use http::Method;
use proptest::prelude::*;

use super::config;
use super::names::{hostile_text, hostname, module_name_value, platform, provider_name, version};
use tfreg_model::RouteError as Error;
use tfreg_model::address::{Hostname, ModuleName, Platform, ProviderName};
use tfreg_model::blob_key::{BlobKey, FileName, UploadId};
use tfreg_model::router::{PublishRoute, PublishStep, PublishTarget, ReadRoute, Route, route};
use tfreg_model::version::Version;

/// Standard methods and arbitrary extension tokens.
fn method() -> impl Strategy<Value = Method> {
    prop_oneof![
        prop::sample::select(vec![
            Method::GET,
            Method::HEAD,
            Method::PUT,
            Method::POST,
            Method::DELETE,
            Method::OPTIONS,
            Method::PATCH,
            Method::TRACE,
            Method::CONNECT,
        ]),
        "[A-Za-z!#$%&'*+.^_`|~-]{1,12}".prop_map(|m| Method::from_bytes(m.as_bytes()).unwrap()),
    ]
}

/// One path segment: the router's keywords, names, dot segments, escapes
/// (well-formed or not, of `/`, NUL, `.` and more), unicode, long runs.
fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "v1",
            "providers",
            "modules",
            "mirror",
            "publish",
            "blobs",
            "uploads",
            "archives",
            "versions",
            "download",
            "index.json",
            "begin",
            "complete",
            "linux",
            "amd64",
            "hashicorp",
            "null",
            "1.0.0",
            "2.1.2.json",
            "registry.terraform.io",
            "localhost%3A8443",
            "..",
            ".",
            "",
            "%2e%2e",
            "%2E%2E",
            "%2F",
            "%2f",
            "%5C",
            "%00",
            "%",
            "%4",
            "%+f",
            "%-1",
            "%zz",
            "%c3%a4",
            "%ff",
        ])
        .prop_map(str::to_string),
        "[a-zA-Z0-9._-]{1,20}",
        "([a-z0-9]|%[0-9a-fA-F+ -]{0,2}){1,12}",
        "[0-9a-f]{32}",
        hostile_text(),
        ("[a-z]", 100..3000usize).prop_map(|(c, n)| c.repeat(n)),
    ]
}

/// Raw request paths, mostly under `/v1/`.
fn raw_path() -> impl Strategy<Value = String> {
    let segments = prop::collection::vec(segment(), 0..9);
    prop_oneof![
        6 => (prop::sample::select(vec!["/v1/", "/v1/blobs/", "/v1/publish/", "/", "", "//v1/", "/v2/"]), segments)
            .prop_map(|(prefix, s)| format!("{prefix}{}", s.join("/"))),
        1 => any::<String>(),
        1 => Just("/.well-known/terraform.json".to_string()),
        // A valid path with one segment replaced.
        2 => (valid_route(), segment(), any::<prop::sample::Index>()).prop_map(|(r, seg, at)| {
            let mut segs: Vec<String> = r.path().split('/').map(str::to_string).collect();
            let at = at.index(segs.len());
            segs[at] = seg;
            segs.join("/")
        }),
    ]
}

fn blob_key() -> impl Strategy<Value = BlobKey> {
    let id = "[0-9a-f]{32}".prop_map(|s| UploadId::parse(&s).unwrap());
    let name = "[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}".prop_map(|s| FileName::parse(&s).unwrap());
    (id, name, any::<bool>()).prop_map(|(id, name, upload)| {
        if upload {
            BlobKey::upload(&id, &name)
        } else {
            BlobKey::archive(&id, &name)
        }
    })
}

/// The parameters of any route, valid and generated.
#[derive(Debug, Clone)]
struct Parts {
    provider: ProviderName,
    module: ModuleName,
    hostname: Hostname,
    version: Version,
    platform: Platform,
    key: BlobKey,
    step: PublishStep,
}

fn parts() -> impl Strategy<Value = Parts> {
    let step = prop::sample::select(vec![PublishStep::Begin, PublishStep::Complete]);
    (
        provider_name(),
        module_name_value(),
        hostname(),
        version(),
        platform(),
        blob_key(),
        step,
    )
        .prop_map(
            |(provider, module, hostname, version, platform, key, step)| Parts {
                provider,
                module,
                hostname,
                version,
                platform,
                key,
                step,
            },
        )
}

impl Parts {
    /// Every kind of publish target.
    fn targets(&self) -> Vec<PublishTarget> {
        let (provider, version) = (self.provider.clone(), self.version.clone());
        vec![
            PublishTarget::Provider {
                provider: provider.clone(),
                version: version.clone(),
            },
            PublishTarget::Module {
                module: self.module.clone(),
                version: version.clone(),
            },
            PublishTarget::Mirror {
                hostname: self.hostname.clone(),
                provider,
                version,
            },
        ]
    }

    /// Every kind of route.
    fn routes(&self) -> Vec<Route> {
        let (provider, version) = (self.provider.clone(), self.version.clone());
        let read = [
            ReadRoute::ProviderVersions {
                provider: provider.clone(),
            },
            ReadRoute::ProviderDownload {
                provider: provider.clone(),
                version: version.clone(),
                platform: self.platform.clone(),
            },
            ReadRoute::ModuleVersions {
                module: self.module.clone(),
            },
            ReadRoute::ModuleDownload {
                module: self.module.clone(),
                version: version.clone(),
            },
            ReadRoute::MirrorIndex {
                hostname: self.hostname.clone(),
                provider: provider.clone(),
            },
            ReadRoute::MirrorVersion {
                hostname: self.hostname.clone(),
                provider,
                version,
            },
        ];
        let mut all = vec![Route::Discovery, Route::Blob(self.key.clone())];
        all.extend(read.map(Route::Read));
        all.extend(self.targets().into_iter().map(|target| {
            Route::Publish(PublishRoute {
                target,
                step: self.step,
            })
        }));
        all.extend(
            tfreg_model::router::AdminRoute::examples(&self.targets())
                .into_iter()
                .map(Route::Admin),
        );
        all
    }
}

fn publish_target() -> impl Strategy<Value = PublishTarget> {
    (parts(), any::<prop::sample::Index>()).prop_map(|(p, i)| i.get(&p.targets()).clone())
}

/// Every kind of route, with valid generated parameters.
fn valid_route() -> impl Strategy<Value = Route> {
    (parts(), any::<prop::sample::Index>()).prop_map(|(p, i)| i.get(&p.routes()).clone())
}

/// Every `%` of `path` starts an escape of exactly two hex digits.
fn strict_escapes(path: &str) -> bool {
    let b = path.as_bytes();
    let hex2 = |i: usize| matches!(b.get(i + 1..i + 3), Some([h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit());
    (0..b.len()).all(|i| b[i] != b'%' || hex2(i))
}

proptest! {
    #![proptest_config(config(1024))]

    #[test]
    fn any_request_is_routed_or_refused_with_a_client_error(m in method(), path in raw_path()) {
        match route(&m, &path) {
            Ok(r) => {
                prop_assert!(r.methods().contains(&m));
                // Accepted escapes are exact, and the route's own path is canonical.
                prop_assert!(strict_escapes(&path), "{path:?} has a malformed escape");
                prop_assert_eq!(route(&m, &r.path()).ok(), Some(r.clone()));
                prop_assert!(!r.path().split('/').any(|s| s == ".." || s == "."));
            }
            Err(Error::BadRequest(msg) | Error::NotFound(msg)) => {
                // Bounded by the path (at most MAX_PATH_LEN) plus a sentence.
                prop_assert!(msg.len() <= 2 * tfreg_model::router::MAX_PATH_LEN + 200, "{} bytes", msg.len());
            }
            Err(Error::MethodNotAllowed { allow, .. }) => prop_assert!(!allow.contains(&m)),
        }
    }

    #[test]
    fn every_route_routes_back_from_its_path(r in valid_route(), m in method()) {
        let path = r.path();
        if r.methods().contains(&m) {
            prop_assert_eq!(route(&m, &path).ok(), Some(r));
        } else {
            match route(&m, &path) {
                // An admin path with another operation for this method.
                Ok(other) => prop_assert!(
                    matches!(other, Route::Admin(_)) && other.path() == path && other.methods().contains(&m),
                    "{} {} routed to {:?}", m, path, other
                ),
                Err(e) => {
                    let is_405 = matches!(e, Error::MethodNotAllowed { .. });
                    prop_assert!(is_405, "{} {} is not a 405", m, path);
                }
            }
        }
    }

    #[test]
    fn escaping_any_character_of_a_path_changes_nothing(
        r in valid_route(),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..12),
        upper in any::<bool>(),
    ) {
        let path = r.path();
        // The prefixes matched before decoding stay as they are.
        let start = match &r {
            Route::Discovery => return Ok(()),
            Route::Blob(_) => "/v1/blobs/".len(),
            _ => "/v1/".len(),
        };
        let mut escape = vec![false; path.len()];
        for pick in picks {
            escape[start + pick.index(path.len() - start)] = true;
        }
        // `/` and the escapes already there (`%3A` before a port) are structure, not text.
        for (i, b) in path.bytes().enumerate() {
            if b == b'/' {
                escape[i] = false;
            }
            if b == b'%' {
                escape[i..i + 3].fill(false);
            }
        }
        let escaped: String = path
            .bytes()
            .zip(escape)
            .map(|(b, e)| match (e, upper) {
                (true, true) => format!("%{b:02X}"),
                (true, false) => format!("%{b:02x}"),
                (false, _) => (b as char).to_string(),
            })
            .collect();
        let m = r.methods()[0].clone();
        prop_assert_eq!(route(&m, &escaped).ok(), Some(r));
    }

    #[test]
    fn publish_targets_round_trip_through_their_serde_string(t in publish_target(), junk in hostile_text()) {
        let text = String::from(t.clone());
        prop_assert_eq!(PublishTarget::try_from(text).ok(), Some(t));
        // Any other string is a target or refused, never a panic.
        let _ = PublishTarget::try_from(junk);
    }
}
