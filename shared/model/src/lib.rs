//! tfreg's model, the bottom layer: what the registry talks about, as pure
//! data and pure functions. No I/O, no async, no HTTP status codes.
//!
//! - Names: [`address`] (hostnames, namespaces, provider and module names,
//!   platforms), [`version`], [`blob_key`] (where an archive's bytes live).
//! - The wire: [`router`] (a method and raw path ⇄ a [`router::Route`], who
//!   may use it), [`protocol`] (every JSON body the registry speaks).
//! - Records: [`release`] (what is published), [`docs`] (a module's page),
//!   [`token`] (scopes, realms, who asked), [`keys`] (registered signing
//!   keys), [`audit`] (one change of state).
//! - [`hashing`]: `zh:` and `h1:` as Terraform computes them.
//! - [`login`]: `terraform login`'s `login.v1` requests, PKCE and redirect
//!   URIs checked (the registry as the CLI's OAuth server).
//! - Sign-in: [`oidc`] (a verified token's times and audience, claims as
//!   text), [`sso`] (identity-provider groups mapped to a token's scope and
//!   namespaces), [`trust`] (which CI jobs' tokens may publish where),
//!   [`signin`] (a sign-in's state between its steps, the token it issues),
//!   [`exchange`] (a CI job's OIDC token for a short-lived publish token).
//! - [`upstream`]: other registries the pull-through cache reads from, and
//!   which addresses and URLs an origin may never make it connect to;
//!   [`cache`]: what the cache keeps of them and how it answers and fills.
//! - [`usage`]: downloads and who made them (consumers), and the usage
//!   report.
//! - [`oci`]: the OCI view's repositories, references and manifests
//!   (OpenTofu's `oci_mirror` and `oci://` sources).
//! - [`error`]: why a value is refused; the HTTP pipeline maps it.

pub mod address;
pub mod audit;
pub mod blob_key;
pub mod cache;
pub mod constraint;
pub mod date;
pub mod docs;
pub mod error;
pub mod exchange;
pub mod grants;
pub mod hashing;
pub mod keys;
pub mod login;
pub mod oci;
pub mod oidc;
pub mod protocol;
pub mod release;
pub mod router;
pub mod scope;
pub mod signin;
pub mod sso;
pub mod text;
pub mod token;
pub mod trust;
pub mod upstream;
pub mod usage;
pub mod version;

/// The property tests' configuration: 256 cases, no failure files written
/// into the source tree.
#[cfg(test)]
pub(crate) fn property_config() -> proptest::prelude::ProptestConfig {
    proptest::prelude::ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    }
}

pub use error::{Invalid, RouteError};

/// Unix seconds now (the registry's clock; tests replace it where they need).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
