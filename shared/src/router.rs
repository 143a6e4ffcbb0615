//! One router from a raw request path to an endpoint and its parsed parameters.
//!
//! Every entry point (the local server, each Lambda function, tests) routes
//! through [`route`], so nobody relies on API Gateway path parameters.

use http::Method;

use crate::address::{Hostname, ModuleName, Platform, ProviderName};
use crate::error::Error;
use crate::storage::fs::is_valid_key;
use crate::version::Version;

/// The two calls of every publish: announce the files, then finish after uploading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishStep {
    Begin,
    Complete,
}

/// An endpoint with its parameters, already validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Discovery,
    ProviderVersions {
        provider: ProviderName,
    },
    ProviderDownload {
        provider: ProviderName,
        version: Version,
        platform: Platform,
    },
    ModuleVersions {
        module: ModuleName,
    },
    ModuleDownload {
        module: ModuleName,
        version: Version,
    },
    MirrorIndex {
        hostname: Hostname,
        provider: ProviderName,
    },
    MirrorVersion {
        hostname: Hostname,
        provider: ProviderName,
        version: Version,
    },
    /// An archive behind a signed URL (GET/HEAD to download, PUT to upload).
    Blob {
        key: String,
    },
    PublishProvider {
        provider: ProviderName,
        version: Version,
        step: PublishStep,
    },
    PublishModule {
        module: ModuleName,
        version: Version,
        step: PublishStep,
    },
    PublishMirror {
        hostname: Hostname,
        provider: ProviderName,
        version: Version,
        step: PublishStep,
    },
}

/// Which family an endpoint belongs to: decides the method and auth rules, and
/// names the Lambda function that serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Discovery,
    ProviderVersions,
    ProviderDownload,
    ModuleVersions,
    ModuleDownload,
    MirrorIndex,
    MirrorVersion,
    Blob,
    Publish,
}

impl Endpoint {
    /// Every endpoint, for drift checks between the router, functions and template.
    pub const ALL: [Endpoint; 9] = [
        Endpoint::Discovery,
        Endpoint::ProviderVersions,
        Endpoint::ProviderDownload,
        Endpoint::ModuleVersions,
        Endpoint::ModuleDownload,
        Endpoint::MirrorIndex,
        Endpoint::MirrorVersion,
        Endpoint::Blob,
        Endpoint::Publish,
    ];

    /// The endpoint of a [`name`](Self::name), exactly as spelled there.
    pub fn from_name(name: &str) -> Option<Endpoint> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    /// A short stable name, used in logs and as the function name.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Discovery => "discovery",
            Endpoint::ProviderVersions => "provider-versions",
            Endpoint::ProviderDownload => "provider-download",
            Endpoint::ModuleVersions => "module-versions",
            Endpoint::ModuleDownload => "module-download",
            Endpoint::MirrorIndex => "mirror-index",
            Endpoint::MirrorVersion => "mirror-version",
            Endpoint::Blob => "blob",
            Endpoint::Publish => "publish",
        }
    }
}

impl Route {
    /// The endpoint family of this route.
    pub fn endpoint(&self) -> Endpoint {
        match self {
            Route::Discovery => Endpoint::Discovery,
            Route::ProviderVersions { .. } => Endpoint::ProviderVersions,
            Route::ProviderDownload { .. } => Endpoint::ProviderDownload,
            Route::ModuleVersions { .. } => Endpoint::ModuleVersions,
            Route::ModuleDownload { .. } => Endpoint::ModuleDownload,
            Route::MirrorIndex { .. } => Endpoint::MirrorIndex,
            Route::MirrorVersion { .. } => Endpoint::MirrorVersion,
            Route::Blob { .. } => Endpoint::Blob,
            Route::PublishProvider { .. }
            | Route::PublishModule { .. }
            | Route::PublishMirror { .. } => Endpoint::Publish,
        }
    }
}

/// Decode one `%XX`-escaped path segment; refuse escapes that would change the
/// path's structure (`/`, `\`, NUL) or invalid UTF-8.
fn decode_segment(seg: &str) -> Result<String, Error> {
    let bad = || Error::bad(format!("malformed path segment {seg:?}"));
    if !seg.contains('%') {
        return Ok(seg.to_string());
    }
    let bytes = seg.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = seg.get(i + 1..i + 3).ok_or_else(bad)?;
            let b = u8::from_str_radix(hex, 16).map_err(|_| bad())?;
            if matches!(b, b'/' | b'\\' | 0) {
                return Err(bad());
            }
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

fn step(s: &str) -> Option<PublishStep> {
    match s {
        "begin" => Some(PublishStep::Begin),
        "complete" => Some(PublishStep::Complete),
        _ => None,
    }
}

fn not_found(path: &str) -> Error {
    Error::not_found(format!("no such endpoint: {path}"))
}

/// Map a request's method and raw path (no query string) to a [`Route`].
///
/// Unknown paths are 404, malformed parameters 400, a known path with the
/// wrong method 405. HEAD is accepted wherever GET is.
pub fn route(method: &Method, path: &str) -> Result<Route, Error> {
    if path.len() > 2048 {
        return Err(Error::bad("path too long"));
    }
    let route = match_path(path)?;
    let allowed: &[Method] = match route.endpoint() {
        Endpoint::Publish => &[Method::POST],
        Endpoint::Blob => &[Method::GET, Method::HEAD, Method::PUT],
        _ => &[Method::GET, Method::HEAD],
    };
    if !allowed.contains(method) {
        return Err(Error::MethodNotAllowed(method.to_string()));
    }
    Ok(route)
}

fn match_path(path: &str) -> Result<Route, Error> {
    if path == "/.well-known/terraform.json" {
        return Ok(Route::Discovery);
    }
    if let Some(key) = path.strip_prefix(crate::protocol::BLOBS_V1) {
        let key = key
            .split('/')
            .map(decode_segment)
            .collect::<Result<Vec<_>, _>>()?
            .join("/");
        if !is_valid_key(&key) {
            return Err(Error::bad("malformed archive path"));
        }
        return Ok(Route::Blob { key });
    }
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Err(not_found(path));
    };
    let segs: Vec<String> = rest
        .split('/')
        .map(decode_segment)
        .collect::<Result<_, _>>()?;
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let route = match s.as_slice() {
        ["providers", ns, ty, "versions"] => Route::ProviderVersions {
            provider: ProviderName::parse(ns, ty)?,
        },
        ["providers", ns, ty, v, "download", os, arch] => Route::ProviderDownload {
            provider: ProviderName::parse(ns, ty)?,
            version: Version::parse(v)?,
            platform: Platform::parse(os, arch)?,
        },
        ["modules", ns, name, system, "versions"] => Route::ModuleVersions {
            module: ModuleName::parse(ns, name, system)?,
        },
        ["modules", ns, name, system, v, "download"] => Route::ModuleDownload {
            module: ModuleName::parse(ns, name, system)?,
            version: Version::parse(v)?,
        },
        ["mirror", host, ns, ty, "index.json"] => Route::MirrorIndex {
            hostname: Hostname::parse(host)?,
            provider: ProviderName::parse(ns, ty)?,
        },
        ["mirror", host, ns, ty, file] if file.ends_with(".json") => Route::MirrorVersion {
            hostname: Hostname::parse(host)?,
            provider: ProviderName::parse(ns, ty)?,
            version: Version::parse(&file[..file.len() - ".json".len()])?,
        },
        ["publish", "providers", ns, ty, v, st] => Route::PublishProvider {
            provider: ProviderName::parse(ns, ty)?,
            version: Version::parse(v)?,
            step: step(st).ok_or_else(|| not_found(path))?,
        },
        ["publish", "modules", ns, name, system, v, st] => Route::PublishModule {
            module: ModuleName::parse(ns, name, system)?,
            version: Version::parse(v)?,
            step: step(st).ok_or_else(|| not_found(path))?,
        },
        ["publish", "mirror", host, ns, ty, v, st] => Route::PublishMirror {
            hostname: Hostname::parse(host)?,
            provider: ProviderName::parse(ns, ty)?,
            version: Version::parse(v)?,
            step: step(st).ok_or_else(|| not_found(path))?,
        },
        _ => return Err(not_found(path)),
    };
    Ok(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str) -> Result<Route, Error> {
        route(&Method::GET, path)
    }

    #[test]
    fn routes_every_protocol_endpoint() {
        assert_eq!(
            get("/.well-known/terraform.json").unwrap(),
            Route::Discovery
        );
        assert!(
            matches!(get("/v1/providers/HashiCorp/null/versions").unwrap(),
            Route::ProviderVersions { provider } if provider.namespace == "hashicorp")
        );
        assert!(
            matches!(get("/v1/providers/h/null/2.1.2/download/linux/amd64").unwrap(),
            Route::ProviderDownload { platform, .. } if platform.to_string() == "linux_amd64")
        );
        assert!(matches!(
            get("/v1/modules/ns/vpc/aws/versions").unwrap(),
            Route::ModuleVersions { .. }
        ));
        assert!(matches!(
            get("/v1/modules/ns/vpc/aws/1.0.0/download").unwrap(),
            Route::ModuleDownload { .. }
        ));
        assert!(matches!(
            get("/v1/mirror/registry.terraform.io/hashicorp/null/index.json").unwrap(),
            Route::MirrorIndex { .. }
        ));
        assert!(
            matches!(get("/v1/mirror/localhost%3A8443/ns/null/2.1.2.json").unwrap(),
            Route::MirrorVersion { hostname, version, .. }
                if hostname.as_str() == "localhost:8443" && version.to_string() == "2.1.2")
        );
        assert!(
            matches!(get("/v1/blobs/archives/ab/x.zip").unwrap(), Route::Blob { key } if key == "archives/ab/x.zip")
        );
        assert!(matches!(
            route(&Method::POST, "/v1/publish/providers/ns/null/1.0.0/begin").unwrap(),
            Route::PublishProvider {
                step: PublishStep::Begin,
                ..
            }
        ));
        assert!(matches!(
            route(
                &Method::POST,
                "/v1/publish/modules/ns/vpc/aws/1.0.0/complete"
            )
            .unwrap(),
            Route::PublishModule {
                step: PublishStep::Complete,
                ..
            }
        ));
        assert!(matches!(
            route(
                &Method::POST,
                "/v1/publish/mirror/registry.terraform.io/hashicorp/null/1.0.0/begin"
            )
            .unwrap(),
            Route::PublishMirror { .. }
        ));
        assert!(matches!(
            route(&Method::HEAD, "/v1/providers/h/null/versions").unwrap(),
            Route::ProviderVersions { .. }
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
            ("/v1/providers/h/null", 404),
            ("/v1/providers/h/null/versions/extra", 404),
            ("/v1/nothing", 404),
            ("/etc/passwd", 404),
            ("/", 404),
            ("", 404),
            ("/v1/mirror/bad_host!/h/null/index.json", 400),
            ("/v1/modules/ns/vpc/aws/1.0.0.0/download", 400),
        ];
        for (path, status) in cases {
            let err = get(path).expect_err(path);
            assert_eq!(err.status().as_u16(), status, "{path}: {err}");
        }
        assert_eq!(
            route(&Method::POST, "/v1/providers/h/null/versions")
                .unwrap_err()
                .status()
                .as_u16(),
            405
        );
        assert_eq!(
            route(&Method::GET, "/v1/publish/providers/ns/null/1.0.0/begin")
                .unwrap_err()
                .status()
                .as_u16(),
            405
        );
        assert_eq!(
            get(&format!("/v1/{}", "a/".repeat(2000)))
                .unwrap_err()
                .status()
                .as_u16(),
            400
        );
    }
}
