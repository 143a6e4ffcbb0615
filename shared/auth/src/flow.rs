//! The pure parts of a sign-in's steps: the settings, the request to the
//! provider, the callback's parameters, the redirect back to Terraform and
//! the cookie that binds a sign-in to its browser. No I/O.

use tfreg_model::hashing::sha256_hex;
use tfreg_model::login::{
    AuthorizeRefusal, AuthorizeRequest, OAuthError, PortRange, pkce_challenge,
};
use tfreg_model::protocol::LoginV1;
use tfreg_model::router::safe_next;
use tfreg_model::signin::{
    DEFAULT_LOGIN_TOKEN_TTL_SECS, MAX_NEXT_BYTES, PENDING_TTL_SECS, PendingLogin, Requester,
};

use crate::error::AuthError;
use crate::sealed::Sealed;

pub use tfreg_model::login::CLI_CLIENT_ID;
/// The cookie that binds a sign-in to the browser that started it
/// (`SameSite=Lax`: the provider's redirect back is a cross-site top-level GET).
pub const LOGIN_COOKIE: &str = "__Host-tfreg_login";

/// How this registry runs login.v1.
#[derive(Debug, Clone)]
pub struct LoginSettings {
    pub client_id: String,
    /// The loopback ports Terraform may listen on.
    pub ports: PortRange,
    /// Lifetime of the tokens a sign-in issues.
    pub token_ttl_secs: u64,
}

impl Default for LoginSettings {
    fn default() -> Self {
        Self {
            client_id: CLI_CLIENT_ID.into(),
            ports: PortRange::new(10000, 10010).expect("a valid range"),
            token_ttl_secs: DEFAULT_LOGIN_TOKEN_TTL_SECS,
        }
    }
}

impl LoginSettings {
    /// What discovery advertises.
    pub fn login_v1(&self) -> LoginV1 {
        LoginV1::new(&self.client_id, self.ports)
    }
}

/// The pending login a CLI's authorize request starts, for the browser
/// whose sign-in cookie is `cookie`.
pub fn pending(request: AuthorizeRequest, client_id: &str, cookie: &str, now: u64) -> PendingLogin {
    started(
        Requester::Cli {
            request,
            client_id: client_id.to_string(),
        },
        cookie,
        now,
    )
}

/// The pending login the UI's single sign-on starts; it ends at `next` (a
/// UI path: [`safe_next`], else the home page). A `next` over
/// [`MAX_NEXT_BYTES`] is refused, never cut.
pub fn pending_ui(next: Option<&str>, cookie: &str, now: u64) -> Result<PendingLogin, AuthError> {
    if next.is_some_and(|n| n.len() > MAX_NEXT_BYTES) {
        return Err(AuthError::NextTooLong);
    }
    Ok(started(
        Requester::Ui {
            next: safe_next(next),
        },
        cookie,
        now,
    ))
}

fn started(requester: Requester, cookie: &str, now: u64) -> PendingLogin {
    PendingLogin {
        requester,
        browser: sha256_hex(cookie.as_bytes()),
        created_at: now,
    }
}

/// The provider's authorization URL for this sign-in: code flow, PKCE S256,
/// our nonce and state, back to `callback`.
pub fn upstream_url(
    authorization_endpoint: &url::Url,
    client_id: &str,
    callback: &str,
    scopes: &str,
    sealed: &Sealed,
) -> String {
    let mut url = authorization_endpoint.clone();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", client_id)
        .append_pair("redirect_uri", callback)
        .append_pair("scope", scopes)
        .append_pair("state", &sealed.state)
        .append_pair("nonce", &sealed.nonce)
        .append_pair("code_challenge", &pkce_challenge(&sealed.verifier))
        .append_pair("code_challenge_method", "S256");
    url.into()
}

/// `Set-Cookie` for a sign-in's browser cookie.
pub fn login_cookie(value: &str) -> String {
    format!(
        "{LOGIN_COOKIE}={value}; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age={PENDING_TTL_SECS}"
    )
}

/// `Set-Cookie` that removes it.
pub fn clear_login_cookie() -> String {
    format!("{LOGIN_COOKIE}=; Path=/; Secure; HttpOnly; SameSite=Lax; Max-Age=0")
}

/// Does the browser's cookie (`presented`) belong to `pending`?
pub fn same_browser(pending: &PendingLogin, presented: Option<&str>) -> bool {
    presented.is_some_and(|c| sha256_hex(c.as_bytes()) == pending.browser)
}

/// The provider's redirect back: `code` and `state`, or its `error`; `iss`
/// when it sends one (RFC 9207).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct CallbackParams {
    pub code: Option<String>,
    pub state: Option<String>,
    pub error: Option<String>,
    pub iss: Option<String>,
}

impl CallbackParams {
    pub fn parse(query: Option<&str>) -> Result<Self, OAuthError> {
        let mut p = CallbackParams::default();
        for (name, value) in url::form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            let slot = match name.as_ref() {
                "code" => &mut p.code,
                "state" => &mut p.state,
                "error" => &mut p.error,
                "iss" => &mut p.iss,
                _ => continue,
            };
            if slot.is_some() {
                return Err(OAuthError::invalid_request(format!(
                    "{name} is given more than once"
                )));
            }
            *slot = Some(value.into_owned());
        }
        Ok(p)
    }
}

/// Where Terraform's browser goes with its code: its redirect URI with
/// `code` and its own `state`.
pub fn back_to_client(request: &AuthorizeRequest, code: &str) -> String {
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("code", code)
        .append_pair("state", &request.state)
        .finish();
    format!("{}?{query}", request.redirect_uri)
}

/// Where Terraform's browser goes when its sign-in is refused after the
/// provider's login: its redirect URI with `error=access_denied`, the
/// reason and its own `state` (RFC 6749 4.1.2.1), and `refusal`, a code the
/// token endpoint answers with the same reason (`crate::sealed`): Terraform
/// reads only `code`, and would wait for ever without one.
pub fn refused_to_client(request: &AuthorizeRequest, reason: &str, refusal: &str) -> String {
    let back = AuthorizeRefusal::back_to(
        &request.redirect_uri,
        Some(&request.state),
        OAuthError::access_denied(reason),
    )
    .back_to
    .unwrap_or_else(|| request.redirect_uri.clone());
    let code: String = url::form_urlencoded::byte_serialize(refusal.as_bytes()).collect();
    format!("{back}&code={code}")
}

/// The small page a UI sign-in ends with: it sets the session cookie and
/// moves on to `next` from this site. The callback is a cross-site
/// navigation (from the provider), and a `SameSite=Strict` cookie set on it
/// is not sent on a redirect of that same navigation; a navigation this
/// page starts is same-site, so the cookie goes with it.
pub fn moving_on_page(next: &str) -> String {
    let next = html_escape(next);
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta http-equiv=\"refresh\" content=\"0;url={next}\"><title>Signed in</title></head>\
<body><p>Signed in. <a href=\"{next}\" id=\"continue\">Continue</a></p></body></html>"
    )
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> AuthorizeRequest {
        AuthorizeRequest {
            redirect_uri: "http://localhost:10000/login".into(),
            port: 10000,
            state: "a b&c".into(),
            code_challenge: "c".repeat(43),
        }
    }

    #[test]
    fn the_client_gets_its_own_state_back_escaped() {
        let cookie = tfreg_model::login::random_value();
        let p = pending(request(), CLI_CLIENT_ID, &cookie, 5);
        let Requester::Cli { request, .. } = &p.requester else {
            panic!("a CLI sign-in")
        };
        assert_eq!(
            back_to_client(request, "k/1"),
            "http://localhost:10000/login?code=k%2F1&state=a+b%26c"
        );
        assert!(same_browser(&p, Some(&cookie)));
        assert!(!same_browser(&p, Some("other")));
        assert!(!same_browser(&p, None));
    }

    #[test]
    fn a_refused_client_hears_why_with_its_state_and_a_refusal_code() {
        let request = AuthorizeRequest {
            state: "a&b=c".into(),
            ..request()
        };
        let to = refused_to_client(&request, "none of your groups: ask", "refused.x/y");
        assert_eq!(
            to,
            "http://localhost:10000/login?error=access_denied\
&error_description=none+of+your+groups%3A+ask&state=a%26b%3Dc&code=refused.x%2Fy"
        );
    }

    #[test]
    fn the_provider_is_asked_for_a_code_with_pkce_and_our_nonce() {
        let sealed = Sealed {
            state: "the-state".into(),
            nonce: "the-nonce".into(),
            verifier: "v".repeat(43),
        };
        let endpoint = url::Url::parse("https://idp.test/auth?x=1").unwrap();
        let url = upstream_url(
            &endpoint,
            "tfreg",
            "https://r.test/oauth/callback",
            "openid email",
            &sealed,
        );
        let url = url::Url::parse(&url).unwrap();
        let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(q["x"], "1");
        assert_eq!(q["state"], sealed.state);
        assert_eq!(q["nonce"], sealed.nonce);
        assert_eq!(q["code_challenge"], pkce_challenge(&sealed.verifier));
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["redirect_uri"], "https://r.test/oauth/callback");
        assert_eq!(q["scope"], "openid email");
        assert!(!url.as_str().contains(&sealed.verifier));
    }

    #[test]
    fn a_ui_sign_in_ends_on_a_ui_path_of_this_registry() {
        for (asked, ends) in [
            (
                Some("/ui/modules/acme/vpc/aws?v=1"),
                "/ui/modules/acme/vpc/aws?v=1",
            ),
            (Some("https://evil.test/ui/"), "/ui/home"),
            (Some("//evil.test/ui/"), "/ui/home"),
            (Some("/ui/\\evil"), "/ui/home"),
            (Some("/v1/admin/tokens"), "/ui/home"),
            (None, "/ui/home"),
        ] {
            let p = pending_ui(asked, "cookie", 5).unwrap();
            assert_eq!(
                p.requester,
                Requester::Ui { next: ends.into() },
                "{asked:?}"
            );
        }
        let page = moving_on_page("/ui/x?a=1&b=\"2\"");
        assert!(page.contains("url=/ui/x?a=1&amp;b=&quot;2&quot;"), "{page}");
    }

    #[test]
    fn a_next_over_512_bytes_is_refused_not_cut() {
        let longest = format!("/ui/{}", "x".repeat(MAX_NEXT_BYTES - 4));
        let p = pending_ui(Some(&longest), "cookie", 5).unwrap();
        assert_eq!(
            p.requester,
            Requester::Ui {
                next: longest.clone()
            }
        );
        let over = format!("{longest}y");
        assert!(matches!(
            pending_ui(Some(&over), "cookie", 5),
            Err(AuthError::NextTooLong)
        ));
        // Even one that is no UI path (it would have become the home page).
        let junk = "z".repeat(30_000);
        assert!(matches!(
            pending_ui(Some(&junk), "cookie", 5),
            Err(AuthError::NextTooLong)
        ));
    }

    #[test]
    fn callback_parameters_are_read_once_each() {
        let p = CallbackParams::parse(Some("code=c&state=s&iss=https%3A%2F%2Fidp")).unwrap();
        assert_eq!(p.iss.as_deref(), Some("https://idp"));
        assert!(CallbackParams::parse(Some("state=a&state=b")).is_err());
    }
}
