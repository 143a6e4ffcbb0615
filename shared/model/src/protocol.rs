//! Wire types of the four protocols (and of the publish API), exactly as the
//! Terraform and OpenTofu clients read them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::blob_key::UploadId;

/// Where clients discover the services.
pub const DISCOVERY_PATH: &str = "/.well-known/terraform.json";
/// Where login.v1's authorization endpoint is (advertised in discovery).
pub const AUTHORIZE_PATH: &str = "/oauth/authorize";
/// Where login.v1's token endpoint is (advertised in discovery).
pub const TOKEN_PATH: &str = "/oauth/token";
/// Base path of the provider registry protocol. Ends in `/`: the provider
/// client does not add one.
pub const PROVIDERS_V1: &str = "/v1/providers/";
/// Base path of the module registry protocol.
pub const MODULES_V1: &str = "/v1/modules/";
/// Base path of the provider network mirror protocol.
pub const MIRROR_V1: &str = "/v1/mirror/";
/// Base path of tfreg's own publish API.
pub const PUBLISH_V1: &str = "/v1/publish/";
/// Base path of tfreg's admin API.
pub const ADMIN_V1: &str = "/v1/admin/";
/// Base path under which archives are served (local mode) or redirected (AWS mode).
pub const BLOBS_V1: &str = "/v1/blobs/";

/// `/.well-known/terraform.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Discovery {
    #[serde(rename = "modules.v1")]
    pub modules_v1: String,
    #[serde(rename = "providers.v1")]
    pub providers_v1: String,
    /// Not a Terraform service: tells humans and tools where the mirror lives.
    #[serde(rename = "tfreg.mirror.v1")]
    pub mirror_v1: String,
    /// tfreg's publish API.
    #[serde(rename = "tfreg.publish.v1")]
    pub publish_v1: String,
    /// `terraform login`'s service, only where an identity provider is
    /// configured.
    #[serde(rename = "login.v1", default, skip_serializing_if = "Option::is_none")]
    pub login_v1: Option<LoginV1>,
}

/// login.v1 as Terraform reads it (terraform-svchost's disco): the public
/// client id, the grant, the two endpoints and the loopback ports.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LoginV1 {
    pub client: String,
    pub grant_types: Vec<String>,
    pub authz: String,
    pub token: String,
    pub ports: [u16; 2],
}

impl LoginV1 {
    /// The login.v1 of this registry: `client` over the `ports` Terraform
    /// may listen on.
    pub fn new(client: &str, ports: crate::login::PortRange) -> Self {
        Self {
            client: client.to_string(),
            grant_types: vec![crate::login::GRANT_AUTHZ_CODE.to_string()],
            authz: AUTHORIZE_PATH.to_string(),
            token: TOKEN_PATH.to_string(),
            ports: ports.advertised(),
        }
    }
}

impl Default for Discovery {
    fn default() -> Self {
        Self {
            modules_v1: MODULES_V1.into(),
            providers_v1: PROVIDERS_V1.into(),
            mirror_v1: MIRROR_V1.into(),
            publish_v1: PUBLISH_V1.into(),
            login_v1: None,
        }
    }
}

/// `{"errors": ["..."]}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErrorBody {
    pub errors: Vec<String>,
}

/// `GET :namespace/:type/versions`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProviderVersions {
    pub versions: Vec<ProviderVersionEntry>,
    /// Printed by `terraform init` ("Additional provider information from
    /// registry") on every run: deprecations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProviderVersionEntry {
    pub version: String,
    pub protocols: Vec<String>,
    pub platforms: Vec<PlatformEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct PlatformEntry {
    pub os: String,
    pub arch: String,
}

/// `GET :namespace/:type/:version/download/:os/:arch`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProviderDownload {
    pub protocols: Vec<String>,
    pub os: String,
    pub arch: String,
    pub filename: String,
    pub download_url: String,
    pub shasums_url: String,
    pub shasums_signature_url: String,
    pub shasum: String,
    pub signing_keys: SigningKeys,
    /// OpenTofu 1.12+: hashes of every platform of this version, so a lock file
    /// can hold all of them after one download.
    pub packages: BTreeMap<String, PackageHashes>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SigningKeys {
    pub gpg_public_keys: Vec<GpgPublicKey>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GpgPublicKey {
    pub key_id: String,
    pub ascii_armor: String,
    pub trust_signature: String,
    pub source: String,
    pub source_url: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PackageHashes {
    pub hashes: Vec<String>,
    pub package_size: u64,
}

/// `GET :namespace/:name/:system/versions`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModuleVersions {
    pub modules: Vec<ModuleVersionList>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModuleVersionList {
    pub versions: Vec<ModuleVersionEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModuleVersionEntry {
    pub version: String,
    /// A deprecated version, in the shape Terraform read for a while
    /// (terraform#35231, reverted before release by #35264): no CLI shows it
    /// today; tools and the UI do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<ModuleDeprecation>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModuleDeprecation {
    pub reason: String,
}

/// Body of a `200` module download answer (the `X-Terraform-Get` header is always set too).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ModuleLocation {
    pub location: String,
}

/// Network mirror `:hostname/:namespace/:type/index.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MirrorIndex {
    pub versions: BTreeMap<String, EmptyObject>,
}

/// `{}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct EmptyObject {}

/// Network mirror `:hostname/:namespace/:type/:version.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MirrorVersion {
    pub archives: BTreeMap<String, MirrorArchive>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MirrorArchive {
    pub url: String,
    pub hashes: Vec<String>,
}

// ---------------------------------------------------------------------------
// Publish API (tfreg's own, used by `tfreg publish` and `tfreg mirror import`).
// ---------------------------------------------------------------------------

/// One file the client intends to upload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
pub struct FileDecl {
    pub name: String,
    pub size: u64,
    /// Lowercase hex sha256.
    pub sha256: String,
}

/// Body of `POST /v1/publish/.../begin` and `.../complete`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PublishRequest {
    pub files: Vec<FileDecl>,
    /// Providers: ASCII-armored public key that signed SHA256SUMS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<String>,
    /// Providers: plugin protocol versions; overrides the release manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocols: Option<Vec<String>>,
    /// Providers: accept keys (EdDSA) that Terraform 1.5 and older cannot verify.
    #[serde(default)]
    pub allow_modern_keys: bool,
    /// Set on `complete`: the id `begin` returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_id: Option<UploadId>,
}

/// What `begin` asks the client to do.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum BeginStatus {
    /// Upload each file to its URL, then call complete.
    Upload,
    /// The same content is already published: nothing to do.
    Unchanged,
}

/// Answer to `begin`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PublishBegin {
    pub status: BeginStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload_id: Option<UploadId>,
    #[serde(default)]
    pub uploads: Vec<UploadTarget>,
}

/// Where to PUT one file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UploadTarget {
    pub name: String,
    pub url: String,
    /// Headers the upload must carry exactly (a presigned S3 URL signs them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

/// How a publish ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PublishStatus {
    /// The version is now visible.
    Published,
    /// The same content was already published: nothing changed.
    Unchanged,
}

/// Answer to `complete`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PublishResult {
    pub status: PublishStatus,
    pub address: String,
    pub version: String,
    #[serde(default)]
    pub warnings: Vec<String>,
}

// ---------------------------------------------------------------------------
// Admin API (tfreg's own, used by `tfreg token|key|deprecate|yank|delete|audit`).
// ---------------------------------------------------------------------------

/// Answer to `GET /v1/admin/tokens`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TokenList {
    pub tokens: Vec<crate::token::TokenInfo>,
    /// Expired tokens left out (`?all=true` lists them too, until the store
    /// deletes them a day after they expired).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub expired_hidden: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Answer to `POST /v1/admin/tokens`: the secret, shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CreatedToken {
    pub token: String,
    #[serde(flatten)]
    pub record: crate::token::TokenRecord,
}

/// Answer to `DELETE /v1/admin/tokens/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RevokedToken {
    pub revoked: crate::token::TokenRecord,
}

/// Body of `POST /v1/admin/keys/{namespace}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AddKeys {
    /// ASCII-armored OpenPGP public keys, one key each.
    pub keys: Vec<String>,
}

/// Answer to `GET` and `POST /v1/admin/keys/{namespace}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct KeyList {
    pub namespace: String,
    pub keys: Vec<crate::keys::RegisteredKey>,
    /// What the admin should know about the keys just added (e.g. one
    /// Terraform 1.5 and older cannot read); `tfreg key add` prints them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Answer to `DELETE /v1/admin/keys/{namespace}/{key_id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RemovedKey {
    pub namespace: String,
    pub removed: crate::keys::RegisteredKey,
}

/// Body of `POST /v1/admin/{release}/{deprecate|yank|...}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LifecycleRequest {
    /// Why (required to deprecate: users read it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Answer to a lifecycle change.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LifecycleResult {
    pub release: String,
    pub lifecycle: crate::release::Lifecycle,
    /// False when the release already had that status.
    pub changed: bool,
}

/// Answer to `DELETE /v1/admin/{release}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DeleteResult {
    pub deleted: String,
    /// Archive files removed.
    pub archives_removed: usize,
    /// Archive files that could not be removed now (the store failed); the
    /// release is gone from every response regardless.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archives_left: Vec<String>,
}

/// Answer to `GET /v1/admin/audit`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AuditList {
    pub events: Vec<crate::audit::Event>,
}

/// Answer to `GET /v1/admin/sso`: every identity-provider group mapping.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MappingList {
    pub mappings: Vec<crate::sso::GroupMapping>,
}

/// Answer to `POST /v1/admin/sso/map` (body: a [`crate::sso::GroupMapping`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MappedGroup {
    pub mapping: crate::sso::GroupMapping,
    /// The group's mapping it replaced, if it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced: Option<crate::sso::GroupMapping>,
}

/// Answer to `POST /v1/admin/sso/unmap` (body: a [`crate::sso::Unmap`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct UnmappedGroup {
    pub removed: crate::sso::GroupMapping,
}

/// Answer to `GET /v1/admin/trust[/{namespace}]`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TrustList {
    pub policies: Vec<crate::trust::TrustRecord>,
}

/// Answer to `POST /v1/admin/trust/{namespace}` (body: a
/// [`crate::trust::TrustPolicy`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AddedTrust {
    pub policy: crate::trust::TrustRecord,
    /// False when the namespace already had this very policy (kept as it was).
    pub added: bool,
}

/// Answer to `DELETE /v1/admin/trust/{namespace}/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RemovedTrust {
    pub removed: crate::trust::TrustRecord,
}
