//! A sign-in in progress, kept by no one (issue 35): its [`PendingLogin`]
//! travels as the `state` sent to the provider, MAC'd with a key derived
//! from the registry's secret (as signed URLs and session cookies are), and
//! the nonce and our PKCE verifier towards the provider are derived from it
//! with two more such keys: they are never written down, never in a URL
//! but their own. An unauthenticated start (`/oauth/authorize`,
//! `/oauth/sso`) so stores nothing: no one can fill the store, nor a bound
//! on pending sign-ins that would lock real users out.
//!
//! Once only still holds: the provider redeems its code once, and the
//! ID token's nonce is recorded as used once it verifies
//! (`tfreg_store::catalog::login::use_nonce`); a state past
//! [`PENDING_TTL_SECS`] is refused.
//!
//! Also here, a refusal's code ([`refusal_code`]): what a CLI's listener
//! gets when its sign-in is refused after the provider's login. Terraform's
//! listener ignores `error` and waits for a `code` (its `login` command
//! reads only `state` and `code`), so the refusal goes back as RFC 6749
//! 4.1.2.1 says (`error=access_denied`, `error_description`, `state`) and
//! with a code that the token endpoint answers with `access_denied` and the
//! reason: `terraform login` and `tofu login` end saying why, and a client
//! that reads `error` (`tfreg login`) stops there.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tfreg_http::signed_url::UrlSigner;
use tfreg_model::signin::{PENDING_TTL_SECS, PendingLogin};

use crate::error::AuthError;

const STATE: &str = "login-state-v1";
const NONCE: &str = "login-nonce-v1";
const VERIFIER: &str = "login-verifier-v1";
const REFUSAL: &str = "login-refusal-v1";
/// How a refusal's code starts (a real code is 43 base64url characters:
/// never this).
pub const REFUSAL_PREFIX: &str = "refused.";
/// The longest state read back (ours are under 1,200 characters: `next`
/// is at most 512 bytes, a CLI's state 256).
const MAX_STATE_CHARS: usize = 4096;
/// The longest reason a refusal's code carries.
const MAX_REASON_CHARS: usize = 300;

/// What is sent to the provider for one sign-in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// `body.mac`: the pending sign-in, MAC'd.
    pub state: String,
    /// The nonce its ID token must carry.
    pub nonce: String,
    /// Our PKCE verifier towards the provider (43 base64url characters).
    pub verifier: String,
}

fn derived(signer: &UrlSigner, body: &str) -> Sealed {
    Sealed {
        state: format!("{body}.{}", signer.purpose_mac(STATE, body)),
        nonce: signer.purpose_mac(NONCE, body),
        verifier: signer.purpose_mac(VERIFIER, body),
    }
}

/// Seal `pending` into the state for the provider.
pub fn seal(signer: &UrlSigner, pending: &PendingLogin) -> Sealed {
    let json = serde_json::to_vec(pending).expect("a pending sign-in serialises");
    derived(signer, &URL_SAFE_NO_PAD.encode(json))
}

/// The sign-in `state` names, if this registry sealed it and it is still
/// live at `now`; else [`AuthError::UnknownLogin`].
pub fn open(
    signer: &UrlSigner,
    state: &str,
    now: u64,
) -> Result<(PendingLogin, Sealed), AuthError> {
    let unknown = || AuthError::UnknownLogin;
    if state.len() > MAX_STATE_CHARS {
        return Err(unknown());
    }
    let (body, mac) = state.split_once('.').ok_or_else(unknown)?;
    if !signer.purpose_mac_matches(STATE, body, mac) {
        return Err(unknown());
    }
    let json = URL_SAFE_NO_PAD.decode(body).map_err(|_| unknown())?;
    let pending: PendingLogin = serde_json::from_slice(&json).map_err(|_| unknown())?;
    // Not from the future either (a clock step back must not stretch it).
    if !pending.live(now) || pending.created_at > now + PENDING_TTL_SECS {
        return Err(unknown());
    }
    Ok((pending, derived(signer, body)))
}

/// The code a refused CLI sign-in goes back with: `reason`, MAC'd, so the
/// token endpoint answers it with that reason and nothing else.
pub fn refusal_code(signer: &UrlSigner, reason: &str) -> String {
    let reason: String = reason.chars().take(MAX_REASON_CHARS).collect();
    let body = URL_SAFE_NO_PAD.encode(reason.as_bytes());
    format!(
        "{REFUSAL_PREFIX}{body}.{}",
        signer.purpose_mac(REFUSAL, &body)
    )
}

/// The reason in a refusal's `code`, if it is one this registry made.
pub fn refusal(signer: &UrlSigner, code: &str) -> Option<String> {
    let (body, mac) = code.strip_prefix(REFUSAL_PREFIX)?.split_once('.')?;
    if body.len() > MAX_REASON_CHARS * 2 || !signer.purpose_mac_matches(REFUSAL, body, mac) {
        return None;
    }
    String::from_utf8(URL_SAFE_NO_PAD.decode(body).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfreg_model::login::{AuthorizeRequest, check_verifier};
    use tfreg_model::signin::Requester;

    fn signer(b: u8) -> UrlSigner {
        UrlSigner::new(vec![b; 32])
    }

    fn pending(next: &str, created_at: u64) -> PendingLogin {
        PendingLogin {
            requester: Requester::Ui { next: next.into() },
            browser: "ab".repeat(32),
            created_at,
        }
    }

    #[test]
    fn a_sealed_sign_in_opens_only_here_unchanged_and_live() {
        let s = signer(7);
        let p = pending("/ui/home", 1000);
        let sealed = seal(&s, &p);
        assert_eq!(
            open(&s, &sealed.state, 1001).unwrap(),
            (p.clone(), sealed.clone())
        );
        assert!(open(&s, &sealed.state, 1000 + PENDING_TTL_SECS - 1).is_ok());
        let refused =
            |state: &str, now: u64| matches!(open(&s, state, now), Err(AuthError::UnknownLogin));
        assert!(refused(&sealed.state, 1000 + PENDING_TTL_SECS), "expired");
        assert!(
            matches!(
                open(&signer(8), &sealed.state, 1001),
                Err(AuthError::UnknownLogin)
            ),
            "another registry's"
        );
        // Another next, browser or time under the same MAC.
        let (_, mac) = sealed.state.split_once('.').unwrap();
        for other in [pending("/ui/admin", 1000), pending("/ui/home", 5000)] {
            let body = seal(&s, &other).state;
            let (body, _) = body.split_once('.').unwrap();
            assert!(refused(&format!("{body}.{mac}"), 1001), "{other:?}");
        }
        let far = seal(&s, &pending("/ui/home", 1000 + 2 * PENDING_TTL_SECS)).state;
        assert!(refused(&far, 1001), "from the future");
        for junk in ["", ".", "a.b", "x", &"a".repeat(MAX_STATE_CHARS + 1)] {
            assert!(refused(junk, 1001), "{junk:?}");
        }
    }

    #[test]
    fn the_nonce_and_verifier_are_secret_and_one_per_sign_in() {
        let s = signer(7);
        let a = seal(&s, &pending("/ui/home", 1000));
        let b = seal(
            &s,
            &PendingLogin {
                browser: "cd".repeat(32),
                ..pending("/ui/home", 1000)
            },
        );
        assert_ne!(a.nonce, b.nonce);
        assert_ne!(a.verifier, b.verifier);
        assert!(!a.state.contains(&a.verifier) && !a.state.contains(&a.nonce));
        assert_ne!(a.nonce, a.verifier);
        check_verifier(&a.verifier).expect("a valid PKCE verifier");
        // What a CLI's start seals fits a URL comfortably.
        let cli = PendingLogin {
            requester: Requester::Cli {
                request: AuthorizeRequest {
                    redirect_uri: "http://localhost:10000/login".into(),
                    port: 10000,
                    state: "s".repeat(256),
                    code_challenge: "c".repeat(43),
                },
                client_id: "terraform-cli".into(),
            },
            ..pending("", 1000)
        };
        let sealed = seal(&s, &cli);
        assert!(sealed.state.len() < 1200, "{}", sealed.state.len());
        assert_eq!(open(&s, &sealed.state, 1000).unwrap().0, cli);
        let ui = seal(&s, &pending(&format!("/ui/{}", "x".repeat(507)), 1000));
        assert!(ui.state.len() < 1200, "{}", ui.state.len());
    }

    #[test]
    fn a_refusal_code_carries_its_reason_and_only_ours_reads() {
        let s = signer(7);
        let code = refusal_code(&s, "none of your groups is given access");
        assert!(code.starts_with(REFUSAL_PREFIX));
        assert_eq!(
            refusal(&s, &code).as_deref(),
            Some("none of your groups is given access")
        );
        assert_eq!(refusal(&signer(8), &code), None);
        let forged = format!(
            "{REFUSAL_PREFIX}{}.{}",
            URL_SAFE_NO_PAD.encode("go to evil.test"),
            code.rsplit_once('.').unwrap().1
        );
        assert_eq!(refusal(&s, &forged), None);
        assert_eq!(refusal(&s, "a-real-code"), None);
        let long = refusal_code(&s, &"x".repeat(1000));
        assert_eq!(refusal(&s, &long).unwrap().len(), MAX_REASON_CHARS);
    }
}
