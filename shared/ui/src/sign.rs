//! Signing in and out of the web UI: the sign-in form's token opens a
//! session ([`tfreg_http::session`]); signing out records the session as
//! ended in the store, so its cookie replayed afterwards is refused, and
//! clears the cookie. Both forms are refused when posted from another site.

use http::{HeaderMap, StatusCode, header};
use tfreg_http::auth::{self, Credential};
use tfreg_http::body::{Body, Response, header_value, read_body, redirect};
use tfreg_http::{Call, Error, Note, Registry, session};
pub(crate) use tfreg_model::router::safe_next;
use tfreg_model::router::{SSO_PATH, UiRoute};
use tfreg_model::token::{Access, Principal, Realm, Scope, TOKEN_PREFIX};
use tfreg_store::catalog::sessions;

use crate::page;
use crate::pages::{self, Layout};

/// Largest sign-in form accepted.
const MAX_FORM_BYTES: usize = 4096;

/// A POST from another site's page is refused (the session cookie is
/// `SameSite=Strict` anyway; this also stops a sign-in forced from elsewhere).
/// Browsers that send no `Sec-Fetch-Site` (Safari before 16.4, Firefox
/// before 90) still send `Origin` with a form's POST: it must then be this
/// registry's own ([`own_origins`]). Neither header: not a browser's form.
pub(crate) fn same_site(registry: &Registry, headers: &HeaderMap) -> Result<(), Error> {
    match headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        Some("same-origin") | Some("none") => Ok(()),
        Some(other) => Err(Error::Forbidden(format!(
            "a form of this registry must be sent from its own pages (Sec-Fetch-Site: {other})"
        ))),
        None => match headers.get(header::ORIGIN) {
            None => Ok(()),
            Some(origin) => {
                let own = own_origins(registry, headers);
                match origin.to_str().ok().and_then(origin_of) {
                    Some(origin) if own.contains(&origin) => Ok(()),
                    _ => Err(Error::Forbidden(
                        "a form of this registry must be sent from its own pages (Origin: another site)"
                            .into(),
                    )),
                }
            }
        },
    }
}

/// The origins this registry's pages are served from: its public URL, its
/// hostname over https, and the `Host` the request was sent to (a UI reached
/// by another of the server's names, or API Gateway's own domain).
fn own_origins(registry: &Registry, headers: &HeaderMap) -> Vec<String> {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| format!("https://{h}"));
    [
        Some(registry.config.public_url.clone()),
        Some(format!("https://{}", registry.config.hostname)),
        host,
    ]
    .into_iter()
    .flatten()
    .filter_map(|url| origin_of(&url))
    .collect()
}

/// `scheme://host[:port]` of a URL or an `Origin` value, normalised (case,
/// default port); none for `null` or what does not parse as one.
fn origin_of(url: &str) -> Option<String> {
    let origin = url::Url::parse(url).ok()?.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

pub(crate) async fn sign_in(
    registry: &Registry,
    headers: &HeaderMap,
    body: Body,
    layout: Layout,
) -> Result<Response, Error> {
    same_site(registry, headers)?;
    let form = read_body(headers, body, MAX_FORM_BYTES).await?;
    let fields: std::collections::HashMap<String, String> =
        url::form_urlencoded::parse(&form).into_owned().collect();
    let next = safe_next(fields.get("next").map(String::as_str));
    let token = fields.get("token").map(|t| t.trim()).unwrap_or_default();
    let refused = |message: String, status: StatusCode| {
        let mut resp = page(&pages::SignIn {
            layout: layout.clone(),
            next: next.clone(),
            error: message,
            signed_out: false,
            sso_href: sso_href(registry, &next),
            sso_name: sso_name(registry),
        })?;
        *resp.status_mut() = status;
        Ok(resp)
    };
    let Some(hash) = auth::presented_hash(token) else {
        return refused(
            format!(
                "That is not a token of this registry: tokens start with {}.",
                TOKEN_PREFIX
            ),
            StatusCode::UNAUTHORIZED,
        );
    };
    let access = Access::Token {
        scope: Scope::Read,
        realm: Realm::AnyNamespace,
    };
    let opened = session::Session::open(&hash, registry.now());
    let (_, verdict) = auth::authorize(registry, Credential::Session(Some(&opened)), access).await;
    match verdict {
        Ok(()) => {}
        Err(e @ (Error::Unauthorized(_) | Error::Forbidden(_))) => {
            return refused(e.to_string(), e.status());
        }
        Err(e) => return Err(e),
    }
    let signer = registry.signer_if_ready().await?.ok_or_else(|| {
        Error::Unavailable(
            "the registry has no signing secret yet (publish once, or run `tfreg aws init`)".into(),
        )
    })?;
    let cookie = session::set_cookie(&session::value(signer, &opened));
    tracing::info!(event = "ui.sign-in", "a session was opened");
    let mut resp = redirect(&next);
    resp.headers_mut()
        .insert(header::SET_COOKIE, header_value(&cookie)?);
    Ok(resp)
}

/// The sign-in page's link to single sign-on (through the identity
/// provider, back to `next`), where the registry has one; else empty.
pub(crate) fn sso_href(registry: &Registry, next: &str) -> String {
    if registry.config.login_v1.is_none() {
        return String::new();
    }
    let next: String = url::form_urlencoded::byte_serialize(next.as_bytes()).collect();
    format!("{SSO_PATH}?next={next}")
}

/// What the sign-in page calls the identity provider.
pub(crate) fn sso_name(registry: &Registry) -> String {
    registry
        .config
        .sso_name
        .clone()
        .unwrap_or_else(|| "single sign-on".into())
}

/// End the request's session: recorded as ended in the store (its cookie
/// replayed later is refused; the token's other sessions go on), and the
/// cookie cleared. A session already dead (signed out of, its token revoked
/// or expired) or none: only the cookie is cleared. The pipeline's audit line
/// (`session.end`) names the token whose session ended.
pub(crate) async fn sign_out(registry: &Registry, call: &Call<'_>) -> Result<Response, Error> {
    same_site(registry, call.headers)?;
    let mut resp = redirect(&format!("{}?signed-out", UiRoute::SignIn.path()));
    if let (Some(session), Principal::Token(_)) = (call.session, call.principal) {
        sessions::end(registry.items.as_ref(), &session.id, session.expires).await?;
        tracing::info!(event = "ui.sign-out", "a session was ended");
        resp.extensions_mut().insert(Note(
            "signed out: the session's cookie is refused from now on".into(),
        ));
    }
    resp.headers_mut()
        .insert(header::SET_COOKIE, header_value(&session::clear_cookie())?);
    Ok(resp)
}
