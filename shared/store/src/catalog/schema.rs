//! The item schema: every item the registry keeps, by its partition key
//! (`pk`) and sort key (`sk`), in one place. On DynamoDB they are one
//! table's keys; the embedded store holds the same items.
//!
//! | item                               | pk                               | sk                                  |
//! |------------------------------------|----------------------------------|-------------------------------------|
//! | provider release (registry)        | `PROVIDER#<ns>/<type>`           | `VERSION#<version>`                 |
//! | provider release (mirrored)        | `MIRROR#<hostname>/<ns>/<type>`  | `VERSION#<version>`                 |
//! | module release                     | `MODULE#<ns>/<name>/<system>`    | `VERSION#<version>`                 |
//! | versions index                     | the releases' own `pk`           | `INDEX`                             |
//! | module docs of an archive          | `MODULE#<ns>/<name>/<system>`    | `DOCS#<version>#<archive sha256>`   |
//! | listing entry                      | `LISTING`                        | the releases' `pk`                  |
//! | API token (its hash only)          | `TOKENS`                         | `<sha256 of the token>`             |
//! | namespace signing key              | `KEYS#<ns>`                      | `KEY#<key id>`                      |
//! | audit event                        | `AUDIT`                          | `<inverted time>#<random>`          |
//! | web UI session signed out of       | `SIGNEDOUT`                      | `<sha256 of the session id>`        |
//! | publish in progress                | `UPLOAD#<upload id>`             | `UPLOAD`                            |
//! | a token's place for a publish      | `PUBLISHING#token/<token id>`    | `PLACE#<n>` (`n` below the bound)   |
//! | a namespace's place for a publish  | `PUBLISHING#ns/<ns>` (mirror: `PUBLISHING#mirror/<hostname>/<ns>`) | `PLACE#<n>` (`n` below the bound) |
//! | the URL signing secret             | `CONFIG#url-signing-secret`      | `CONFIG`                            |
//! | login.v1 code (60 s, used once)    | `LOGINCODE`                      | `<sha256 of the code>`              |
//! | used ID token nonce                | `NONCE`                          | `<sha256 of the nonce>`             |
//! | used CI OIDC token (until its exp) | `JTI`                            | `<sha256 of the issuer, a newline and the jti>` |
//! | a CI identity's live exchanged token (its place, until it expires) | `CITOKENS` | `<32 hex of sha256 of the issuer, a newline and the sub>#PLACE#<n>` |
//! | identity-provider group mapping    | `SSOMAP`                         | `<group>`                           |
//! | CI trust policy of a namespace     | `TRUST`                          | `<ns>#<policy id>`                  |
//! | upstream registry (cache origin)   | `UPSTREAMS`                      | `<hostname>`                        |
//! | an origin's provider list (cached) | `CACHE#<host>/<ns>/<type>`       | `ORIGIN`                            |
//! | a cached provider release (verified) | `CACHE#<host>/<ns>/<type>`     | `VERSION#<version>`                 |
//! | an origin's 404, remembered briefly | `CACHE#<host>/<ns>/<type>`      | `MISSING#<version or "versions">`   |
//! | an origin's module list (cached)   | `CACHEMOD#<host>/<ns>/<name>/<system>` | `ORIGIN`                      |
//! | a cached module version (source pinned) | `CACHEMOD#<host>/<ns>/<name>/<system>` | `VERSION#<version>`    |
//! | an origin's module 404, remembered briefly | `CACHEMOD#<host>/<ns>/<name>/<system>` | `MISSING#<version or "versions">` |
//! | a fill in progress (lease, outcome) | `FILLING`                       | `<sha256 of what is filled>`        |
//! | a provider or module the cache holds (listing) | `CACHED`             | `<host>/<ns>/<type>` or `<host>/<ns>/<name>/<system>` |
//! | a version's downloads of one day (a counter, expiring) | `USAGE#<host>/<ns>/<type>` or `USAGE#<host>/<ns>/<name>/<system>` | `DAY#<version>#<yyyy-mm-dd>#<platform or ->` |
//! | a consumer's downloads of a version (a counter) | the package's `USAGE#` partition | `CONSUMER#<version>#<consumer id>` |
//!
//! One release is one item holding every platform, so a download is one
//! `GetItem`; a versions list is one `GetItem` of the partition's index.

use tfreg_model::address::{ModuleName, ProviderName};
use tfreg_model::blob_key::UploadId;
use tfreg_model::release::Origin;
use tfreg_model::router::PublishTarget;
use tfreg_model::version::Version;

/// Sort keys of release items start with this.
pub const VERSION_PREFIX: &str = "VERSION#";
/// Sort key of a partition's versions index.
pub const INDEX_SK: &str = "INDEX";
/// Sort keys of module docs items start with this.
pub const DOCS_PREFIX: &str = "DOCS#";
/// Sort keys of a module archive's zip (the OCI view's layer) start with this.
pub const ZIP_PREFIX: &str = "ZIP#";
/// The partition of listing entries.
pub const LISTING_PK: &str = "LISTING";
/// The partition of every token.
pub const TOKENS_PK: &str = "TOKENS";
/// Sort keys of namespace keys start with this.
pub const KEY_PREFIX: &str = "KEY#";
/// The partition of audit events.
pub const AUDIT_PK: &str = "AUDIT";
/// The partition of web UI sessions signed out of before their expiry.
pub const SIGNED_OUT_PK: &str = "SIGNEDOUT";
/// The sort key of a publish in progress.
pub const UPLOAD_SK: &str = "UPLOAD";
/// Sort keys of places (of publishes in progress) start with this.
pub const PLACE_PREFIX: &str = "PLACE#";
/// The URL signing secret's keys.
pub const SECRET_PK: &str = "CONFIG#url-signing-secret";
pub const SECRET_SK: &str = "CONFIG";
/// The partition of login.v1 codes (expiring, used once).
pub const LOGINCODE_PK: &str = "LOGINCODE";
/// The partition of used ID token nonces (expiring).
pub const NONCE_PK: &str = "NONCE";
/// The partition of used CI OIDC token ids (expiring at the token's `exp`
/// and the leeway): a replayed token finds its `jti` here.
pub const JTI_PK: &str = "JTI";
/// The partition of the places of live exchanged tokens, each CI identity's
/// a sort-key prefix ([`ci_tokens_prefix`]; one constant partition, so the
/// auth function's role names it by exact `LeadingKeys`).
pub const CI_TOKENS_PK: &str = "CITOKENS";
/// The partition of identity-provider group mappings.
pub const SSOMAP_PK: &str = "SSOMAP";
/// The partition of every namespace's CI trust policies (one constant
/// partition, not one per namespace: the exchange's role is granted it by
/// exact `LeadingKeys`, and `tfreg trust list` reads every namespace's in
/// one query).
pub const TRUST_PK: &str = "TRUST";
/// The partition of the upstream registries the cache reads from, by
/// hostname: every cached request reads one, `tfreg upstream list` all.
pub const UPSTREAMS_PK: &str = "UPSTREAMS";
/// The prefix of the cache's partitions, one per upstream provider (never
/// `PROVIDER#` or `MIRROR#`: a publish cannot reach cached data, nor the
/// reverse).
pub const CACHE_PREFIX: &str = "CACHE#";
/// The prefix of the cache's module partitions, one per upstream module.
pub const CACHE_MODULE_PREFIX: &str = "CACHEMOD#";
/// The sort key of a cached origin list.
pub const ORIGIN_SK: &str = "ORIGIN";
/// The sort-key prefix of a remembered origin 404.
pub const MISSING_PREFIX: &str = "MISSING#";
/// The partition of fills in progress (leases; each expires).
pub const FILLING_PK: &str = "FILLING";
/// The partition listing every provider the cache holds (`tfreg cache list`).
pub const CACHED_PK: &str = "CACHED";

/// The prefix of the usage partitions, one per package: the only
/// partitions the download functions' roles may write (`UpdateItem` of a
/// counter, template.yaml's `RecordUsage`).
pub const USAGE_PREFIX: &str = "USAGE#";
/// Sort keys of day counters start with this.
pub const USAGE_DAY_PREFIX: &str = "DAY#";
/// Sort keys of consumer counters start with this.
pub const USAGE_CONSUMER_PREFIX: &str = "CONSUMER#";

/// The usage partition of `package` (its address, host included).
pub fn usage_pk(package: &tfreg_model::usage::Package) -> String {
    format!("{USAGE_PREFIX}{}", package.address())
}

/// The sort key of a version's day counter (`-`: no platform shown).
pub fn usage_day_sk(version: &str, day: &str, platform: Option<&str>) -> String {
    format!(
        "{USAGE_DAY_PREFIX}{version}#{day}#{}",
        platform.unwrap_or("-")
    )
}

/// The sort key of a version's consumer counter.
pub fn usage_consumer_sk(version: &str, consumer_id: &str) -> String {
    format!("{USAGE_CONSUMER_PREFIX}{version}#{consumer_id}")
}

/// The cache partition of `namespace/type` from upstream `host`.
pub fn cache_pk(host: &str, namespace: &str, provider_type: &str) -> String {
    format!("{CACHE_PREFIX}{host}/{namespace}/{provider_type}")
}

/// The cache partition of module `namespace/name/system` from upstream `host`.
pub fn cache_module_pk(host: &str, namespace: &str, name: &str, system: &str) -> String {
    format!("{CACHE_MODULE_PREFIX}{host}/{namespace}/{name}/{system}")
}

/// The sort-key prefix of the places of CI identity `sub` of issuer `iss`.
pub fn ci_tokens_prefix(iss: &str, sub: &str) -> String {
    let key = tfreg_model::exchange::jti_key(iss, sub);
    format!("{}#", &key[..32])
}

/// The sort-key prefix of a namespace's trust policies (a namespace has no `#`).
pub fn trust_prefix(namespace: &str) -> String {
    format!("{namespace}#")
}

/// The sort key of one trust policy.
pub fn trust_sk(namespace: &str, id: &str) -> String {
    format!("{namespace}#{id}")
}

/// The partition of a provider's releases.
pub fn provider_pk(origin: &Origin, provider: &ProviderName) -> String {
    match origin {
        Origin::Registry => format!("PROVIDER#{provider}"),
        Origin::Mirror(host) => format!("MIRROR#{host}/{provider}"),
    }
}

/// The partition of a module's releases.
pub fn module_pk(module: &ModuleName) -> String {
    format!("MODULE#{module}")
}

/// The sort key of one release.
pub fn version_sk(version: &Version) -> String {
    format!("{VERSION_PREFIX}{version}")
}

/// The sort key of one module archive's docs.
pub fn docs_sk(version: &Version, archive_sha256: &str) -> String {
    format!("{DOCS_PREFIX}{version}#{archive_sha256}")
}

/// The sort key of one module archive's zip.
pub fn zip_sk(version: &Version, archive_sha256: &str) -> String {
    format!("{ZIP_PREFIX}{version}#{archive_sha256}")
}

/// The partition of what `target` publishes into.
pub fn release_pk(target: &PublishTarget) -> String {
    match target {
        PublishTarget::Provider { provider, .. } => provider_pk(&Origin::Registry, provider),
        PublishTarget::Mirror {
            hostname, provider, ..
        } => provider_pk(&Origin::Mirror(hostname.clone()), provider),
        PublishTarget::Module { module, .. } => module_pk(module),
    }
}

/// The partition and sort key of `target`'s release item.
pub fn release_location(target: &PublishTarget) -> (String, String) {
    (release_pk(target), version_sk(target.version()))
}

/// The release `(pk, sk)` is the item of (the inverse of
/// [`release_location`]), or `None` for any other item.
pub fn release_target(pk: &str, sk: &str) -> Option<PublishTarget> {
    use tfreg_model::address::Hostname;
    let version = Version::parse(sk.strip_prefix(VERSION_PREFIX)?).ok()?;
    if let Some(rest) = pk.strip_prefix("PROVIDER#") {
        let (namespace, r#type) = rest.split_once('/')?;
        let provider = ProviderName::parse(namespace, r#type).ok()?;
        return Some(PublishTarget::Provider { provider, version });
    }
    if let Some(rest) = pk.strip_prefix("MIRROR#") {
        let mut parts = rest.rsplitn(3, '/');
        let (r#type, namespace, host) = (parts.next()?, parts.next()?, parts.next()?);
        let provider = ProviderName::parse(namespace, r#type).ok()?;
        let hostname = Hostname::parse(host).ok()?;
        return Some(PublishTarget::Mirror {
            hostname,
            provider,
            version,
        });
    }
    let rest = pk.strip_prefix("MODULE#")?;
    let mut parts = rest.splitn(3, '/');
    let (namespace, name, system) = (parts.next()?, parts.next()?, parts.next()?);
    let module = ModuleName::parse(namespace, name, system).ok()?;
    Some(PublishTarget::Module { module, version })
}

/// The partition of a namespace's signing keys.
pub fn keys_pk(namespace: &str) -> String {
    format!("KEYS#{namespace}")
}

/// The sort key of one signing key.
pub fn key_sk(key_id: &str) -> String {
    format!("{KEY_PREFIX}{key_id}")
}

/// The sort key of an audit event at `millis`: inverted, so an ascending
/// query lists the newest first; `nonce` keeps events of one millisecond apart.
pub fn audit_sk(millis: u64, nonce: u64) -> String {
    format!("{:020}#{nonce:016x}", u64::MAX - millis)
}

/// The partition of a publish in progress.
pub fn upload_pk(id: &UploadId) -> String {
    format!("UPLOAD#{id}")
}

/// The partition of the places held by a token's publishes in progress.
pub fn token_publishing_pk(token_id: &str) -> String {
    format!("PUBLISHING#token/{token_id}")
}

/// The partition of the places held by the publishes in progress into the
/// namespace `target` publishes into (a mirrored provider's: its
/// registry's namespace).
pub fn namespace_publishing_pk(target: &PublishTarget) -> String {
    match target {
        PublishTarget::Provider { provider, .. } => format!("PUBLISHING#ns/{}", provider.namespace),
        PublishTarget::Module { module, .. } => format!("PUBLISHING#ns/{}", module.namespace),
        PublishTarget::Mirror {
            hostname, provider, ..
        } => format!("PUBLISHING#mirror/{hostname}/{}", provider.namespace),
    }
}

/// The sort key of place `n` of a partition of places.
pub fn place_sk(n: usize) -> String {
    format!("{PLACE_PREFIX}{n:03}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_audit_events_sort_first() {
        assert!(audit_sk(2_000, 0) < audit_sk(1_000, u64::MAX));
        assert_eq!(audit_sk(0, 1).len(), 20 + 1 + 16);
    }

    #[test]
    fn every_release_partition_is_distinct_by_origin() {
        let p = ProviderName::parse("hashicorp", "null").unwrap();
        let mirrored = provider_pk(
            &Origin::Mirror(
                tfreg_model::address::Hostname::parse("registry.terraform.io").unwrap(),
            ),
            &p,
        );
        assert_ne!(provider_pk(&Origin::Registry, &p), mirrored);
        assert_eq!(mirrored, "MIRROR#registry.terraform.io/hashicorp/null");
    }
}
