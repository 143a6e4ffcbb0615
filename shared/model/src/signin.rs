//! What a sign-in carries between its steps, and the token it ends with.
//! Pure data. A sign-in in progress is kept by no one: its
//! [`PendingLogin`] travels, MAC'd by the registry, as the `state` sent to
//! the provider (`tfreg_auth::sealed`), so an unauthenticated start stores
//! nothing. The code it ends with (after the provider signed the person
//! in) is kept by `tfreg_store::catalog::login`.

use serde::{Deserialize, Serialize};

use crate::login::{AuthorizeRequest, IssuedCode};
use crate::sso::Grant;
use crate::token::NewToken;
pub use crate::token::Subject;

/// How long a sign-in may take between the authorize step and the
/// provider's callback.
pub const PENDING_TTL_SECS: u64 = 600;
/// The longest `next` a UI sign-in accepts (a path of the UI: a longer one
/// is refused, never cut).
pub const MAX_NEXT_BYTES: usize = 512;
/// Default lifetime of a token a sign-in issues: 12 h.
pub const DEFAULT_LOGIN_TOKEN_TTL_SECS: u64 = 12 * 3600;

/// Who started a sign-in, and where it ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Requester {
    /// A CLI's login.v1 authorize request (its `state`, redirect URI and
    /// PKCE challenge) and the client id it came with: it ends with a code
    /// sent back to the CLI's listener.
    Cli {
        request: AuthorizeRequest,
        client_id: String,
    },
    /// The web UI's "sign in with single sign-on": it ends with a session
    /// cookie and the UI path `next` (already checked to be one).
    Ui { next: String },
}

/// A sign-in between its start and the provider's callback: who asked,
/// which browser, since when. (The nonce and our PKCE verifier towards the
/// provider are derived from it with the registry's secret, never carried.)
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PendingLogin {
    pub requester: Requester,
    /// sha256 (hex) of the browser's sign-in cookie (random, one per
    /// sign-in): the callback must come to the same browser.
    pub browser: String,
    pub created_at: u64,
}

impl PendingLogin {
    /// Still within [`PENDING_TTL_SECS`] at `now`?
    pub fn live(&self, now: u64) -> bool {
        now < self.created_at + PENDING_TTL_SECS
    }
}

/// A login.v1 code between the callback and the token request: the code's
/// binding (client, redirect URI, PKCE challenge, expiry) and who signed in
/// with which groups.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoginCode {
    pub issued: IssuedCode,
    pub subject: Subject,
    pub groups: Vec<String>,
}

/// The token a sign-in's `grant` gives `subject`: its rights are the
/// grant's, it expires after `ttl_secs`. (The one place a grant becomes a
/// token.)
pub fn login_token(grant: &Grant, subject: &Subject, now: u64, ttl_secs: u64) -> NewToken {
    // A token's name is printable text (`NewToken::check`); the provider's
    // claims need not be: only their visible ASCII is kept.
    let label: String = subject
        .label()
        .chars()
        .filter(char::is_ascii_graphic)
        .take(48)
        .collect();
    let label = if label.is_empty() { "someone" } else { &label };
    NewToken {
        expires_at: Some(now + ttl_secs),
        ..NewToken::with_grants(&format!("login {label}"), grant.grants.clone())
    }
}

impl LoginCode {
    /// The code issued for `request` at `now`.
    pub fn new(
        client_id: &str,
        request: &AuthorizeRequest,
        subject: Subject,
        groups: Vec<String>,
        now: u64,
    ) -> Self {
        Self {
            issued: IssuedCode::new(client_id, request, now),
            subject,
            groups,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sso::{GroupMapping, grant};
    use crate::token::Scope;

    #[test]
    fn a_login_token_has_the_grant_s_rights_and_expires() {
        let mappings = [
            GroupMapping::new("platform", Scope::Publish, &["acme"]).unwrap(),
            GroupMapping::new("everyone", Scope::Read, &["*"]).unwrap(),
        ];
        let g = grant(&mappings, &["platform", "everyone"]).unwrap();
        let who = Subject {
            iss: "https://idp.test".into(),
            sub: "alice".into(),
            name: None,
            email: Some("alice@example.com".into()),
            ci: None,
        };
        let token = login_token(&g, &who, 100, 3600).check(100).unwrap();
        assert_eq!(token.name, "login alice@example.com");
        // Both groups' rights: publish to acme, and read everywhere.
        assert_eq!(
            crate::grants::describe(&token.grants),
            "read:*, publish:acme"
        );
        assert_eq!(token.expires_at, Some(3700));
        let odd = Subject {
            email: Some("\u{202e}\u{7}".into()),
            ..who
        };
        let token = login_token(&g, &odd, 100, 3600).check(100).unwrap();
        assert_eq!(token.name, "login someone");
    }

    #[test]
    fn a_pending_login_lives_ten_minutes() {
        let request = AuthorizeRequest {
            redirect_uri: "http://localhost:10000/login".into(),
            port: 10000,
            state: "s".into(),
            code_challenge: "c".into(),
        };
        let p = PendingLogin {
            requester: Requester::Cli {
                request,
                client_id: "terraform-cli".into(),
            },
            browser: "b".into(),
            created_at: 1000,
        };
        assert!(p.live(1000 + PENDING_TTL_SECS - 1));
        assert!(!p.live(1000 + PENDING_TTL_SECS));
    }
}
