//! tfreg's sign-in (issue 21): `terraform login` (the login.v1 service) with
//! the registry as the OAuth server, brokered to one upstream OpenID
//! Provider whose ID tokens the registry verifies itself.
//!
//! - [`oidc`]: the provider (discovery, keys, redeeming a code, verifying an
//!   ID token).
//! - [`flow`]: the pure parts of each step (settings, URLs, cookies).
//! - [`handlers`]: the group the pipeline dispatches `/oauth/...` to.
//! - [`reach`]: which addresses the provider's URLs may lead to (AWS:
//!   public only).
//! - [`error`]: what can go wrong, and its HTTP status.

pub mod error;
pub mod flow;
pub mod handlers;
pub mod oidc;
pub mod reach;

pub use error::AuthError;
pub use flow::LoginSettings;
pub use handlers::Auth;
pub use oidc::{IdClaims, OidcConfig, Secret, Upstream};
