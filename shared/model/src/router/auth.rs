//! Sign-in's routes (issue 21): login.v1 (`terraform login`) with the
//! registry as the OAuth server, the identity provider's way back, and the
//! CI token exchange. Every one is public: a login must work whatever token
//! a client holds, stale or none, and the exchange's credential is the CI
//! job's OIDC token in its body, so these never look at a bearer token.

use http::Method;
use strum::VariantArray as _;

use crate::router::segments::{GET, POST};

pub use crate::protocol::{AUTHORIZE_PATH, TOKEN_PATH};
/// Where the identity provider sends the browser back.
pub const CALLBACK_PATH: &str = "/oauth/callback";
/// Where the UI's "sign in with single sign-on" starts (`?next=/ui/...`).
pub const SSO_PATH: &str = "/oauth/sso";
/// Where a CI job exchanges its OIDC token for a short-lived publish token.
pub const EXCHANGE_PATH: &str = "/v1/auth/exchange";

/// A step of a sign-in (every one: [`strum::VariantArray::VARIANTS`]).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    strum::VariantArray,
    strum::IntoStaticStr,
)]
#[strum(serialize_all = "kebab-case")]
pub enum AuthRoute {
    /// `GET /oauth/authorize`: Terraform's browser starts here.
    Authorize,
    /// `GET /oauth/callback`: back from the identity provider.
    Callback,
    /// `POST /oauth/token`: Terraform exchanges its code for a token.
    Token,
    /// `GET /oauth/sso`: the web UI's sign-in with the identity provider.
    SsoStart,
    /// `POST /v1/auth/exchange`: a CI job's OIDC token for a publish token.
    Exchange,
}

impl AuthRoute {
    pub fn method(self) -> &'static [Method] {
        match self {
            AuthRoute::Authorize | AuthRoute::Callback | AuthRoute::SsoStart => GET,
            AuthRoute::Token | AuthRoute::Exchange => POST,
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            AuthRoute::Authorize => AUTHORIZE_PATH,
            AuthRoute::Callback => CALLBACK_PATH,
            AuthRoute::Token => TOKEN_PATH,
            AuthRoute::SsoStart => SSO_PATH,
            AuthRoute::Exchange => EXCHANGE_PATH,
        }
    }

    /// A browser shows this step's answers (errors as a plain page); the
    /// token and exchange endpoints answer a program in JSON.
    pub fn in_browser(self) -> bool {
        !matches!(self, AuthRoute::Token | AuthRoute::Exchange)
    }

    /// The route of `path`, if it is one of these.
    pub fn of_path(path: &str) -> Option<AuthRoute> {
        AuthRoute::VARIANTS
            .iter()
            .copied()
            .find(|r| r.path() == path)
    }
}
