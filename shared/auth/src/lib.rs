//! tfreg's sign-in (issue 21): `terraform login` (the login.v1 service) with
//! the registry as the OAuth server, brokered to one upstream OpenID
//! Provider whose ID tokens the registry verifies itself; and CI jobs'
//! OIDC tokens exchanged for short-lived publish tokens.
//!
//! - [`jwt`]: fetching from an issuer, its keys, a JWT's signature (shared).
//! - [`oidc`]: the provider (discovery, keys, redeeming a code, verifying an
//!   ID token).
//! - [`ci`]: the allow-listed CI issuers (settings, verifying their tokens).
//! - [`exchange`]: `POST /v1/auth/exchange`.
//! - [`flow`]: the pure parts of each step (settings, URLs, cookies).
//! - [`sealed`]: a sign-in in progress as the MAC'd state (nothing stored).
//! - [`handlers`]: the group the pipeline dispatches `/oauth/...` to.
//! - [`reach`]: which addresses the provider's URLs may lead to (AWS:
//!   public only).
//! - [`error`]: what can go wrong, and its HTTP status.

pub mod ci;
pub mod error;
pub mod exchange;
pub mod flow;
pub mod handlers;
pub mod issued;
pub mod jwt;
pub mod oidc;
pub mod reach;
pub mod sealed;

pub use ci::CiSettings;
pub use error::{AuthError, ExchangeError};
pub use exchange::Exchange;
pub use flow::LoginSettings;
pub use handlers::Auth;
pub use oidc::{IdClaims, OidcConfig, Secret, Upstream};
