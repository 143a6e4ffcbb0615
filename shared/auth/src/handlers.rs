//! The sign-in group ([`Auth`]): login.v1's authorize and token endpoints
//! and the provider's callback ([`Login`], where an identity provider is
//! configured), and the CI token exchange ([`Exchange`], where CI issuers
//! are). Either may be configured without the other. A sign-in in progress
//! is kept by no one: it travels as the MAC'd state ([`crate::sealed`]);
//! its code, once the provider has signed the person in, is kept in the
//! item store (`tfreg_store::catalog::login`). The decisions are in
//! [`crate::flow`].

use std::sync::Arc;

use async_trait::async_trait;
use http::{HeaderValue, StatusCode, header};
use tfreg_http::body::{Body, Response, json, read_body, redirect};
use tfreg_http::signed_url::UrlSigner;
use tfreg_http::{AuditAs, Call, Error, Handler, Registry, session};
use tfreg_model::login::{
    AuthorizeRefusal, AuthorizeRequest, OAuthError, TokenRequest, random_value,
};
use tfreg_model::oidc::LEEWAY_SECS;
use tfreg_model::router::{AuthRoute, CALLBACK_PATH};
use tfreg_model::signin::{LoginCode, PendingLogin, Requester, Subject, login_token};
use tfreg_model::sso::{Grant, grant};
use tfreg_model::token::{Actor, presented_hash};
use tfreg_store::catalog::{login, sso, tokens};

use crate::error::AuthError;
use crate::exchange::Exchange;
use crate::flow::{self, CallbackParams, LOGIN_COOKIE, LoginSettings};
use crate::issued::mark_issued;
use crate::oidc::Upstream;
use crate::sealed::{self, REFUSAL_PREFIX, Sealed};

/// Largest token request body (five short form fields).
const MAX_TOKEN_REQUEST: usize = 8 * 1024;

/// The sign-in routes of one registry: login.v1 and the CI exchange, each
/// where configured (a route of the other answers 404).
#[derive(Clone, Default)]
pub struct Auth {
    login: Option<Arc<Login>>,
    exchange: Option<Arc<Exchange>>,
}

impl Auth {
    /// Nothing configured yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// With `terraform login` brokered to `upstream`.
    pub fn with_login(mut self, upstream: Upstream, settings: LoginSettings) -> Self {
        self.login = Some(Arc::new(Login {
            upstream: Arc::new(upstream),
            settings,
        }));
        self
    }

    /// With the CI token exchange.
    pub fn with_exchange(mut self, exchange: Exchange) -> Self {
        self.exchange = Some(Arc::new(exchange));
        self
    }

    /// Is anything configured?
    pub fn is_empty(&self) -> bool {
        self.login.is_none() && self.exchange.is_none()
    }

    /// The login settings, where an identity provider is configured.
    pub fn login_settings(&self) -> Option<&LoginSettings> {
        self.login.as_ref().map(|l| &l.settings)
    }

    /// The exchange, where CI issuers are configured.
    pub fn exchange(&self) -> Option<&Exchange> {
        self.exchange.as_deref()
    }

    fn login(&self) -> Result<&Login, Error> {
        self.login.as_deref().ok_or_else(|| {
            Error::not_found("no identity provider is configured here: terraform login is off")
        })
    }
}

/// login.v1, brokering to `upstream`.
pub struct Login {
    upstream: Arc<Upstream>,
    settings: LoginSettings,
}

impl Login {
    pub fn settings(&self) -> &LoginSettings {
        &self.settings
    }

    fn callback_url(registry: &Registry) -> String {
        format!("{}{CALLBACK_PATH}", registry.config.public_url)
    }

    /// `GET /oauth/authorize`: check Terraform's request, seal it as the
    /// pending sign-in's state, send the browser to the provider.
    async fn authorize(&self, registry: &Registry, call: Call<'_>) -> Result<Response, AuthError> {
        let request = match AuthorizeRequest::parse(
            call.query.unwrap_or(""),
            &self.settings.client_id,
            self.settings.ports,
        ) {
            Ok(request) => request,
            // Client and redirect URI good: the CLI hears why at its listener.
            Err(AuthorizeRefusal {
                back_to: Some(to), ..
            }) => return Ok(redirect(&to)),
            Err(refusal) => return Err(refusal.error.into()),
        };
        let cookie = random_value();
        let pending = flow::pending(request, &self.settings.client_id, &cookie, registry.now());
        self.to_provider(registry, &cookie, &pending).await
    }

    /// `GET /oauth/sso?next=/ui/...`: the sign-in page's single sign-on: a
    /// pending sign-in that ends in a UI session (`next` at most 512 bytes).
    async fn sso_start(&self, registry: &Registry, call: Call<'_>) -> Result<Response, AuthError> {
        let next = url::form_urlencoded::parse(call.query.unwrap_or("").as_bytes())
            .find(|(k, _)| k == "next")
            .map(|(_, v)| v.into_owned());
        let cookie = random_value();
        let pending = flow::pending_ui(next.as_deref(), &cookie, registry.now())?;
        self.to_provider(registry, &cookie, &pending).await
    }

    /// Send the browser to the provider with `pending` sealed as the state
    /// (nothing is stored), marked with the sign-in's browser cookie.
    async fn to_provider(
        &self,
        registry: &Registry,
        cookie: &str,
        pending: &PendingLogin,
    ) -> Result<Response, AuthError> {
        let sealed = sealed::seal(signer(registry).await?, pending);
        let to = flow::upstream_url(
            self.upstream.authorization_endpoint(),
            self.upstream.client_id(),
            &Self::callback_url(registry),
            self.upstream.scopes(),
            &sealed,
        );
        let mut resp = redirect(&to);
        set_cookie(&mut resp, &flow::login_cookie(cookie));
        Ok(resp)
    }

    /// `GET /oauth/callback`: the provider's answer. The state is opened
    /// (ours, unchanged, live), the browser checked, the code redeemed, the
    /// ID token verified (its nonce used once), the groups mapped;
    /// Terraform's browser goes back with a code of ours, or, refused, with
    /// the reason (`error=access_denied`, and a code that says it: see
    /// [`crate::sealed`]), so that the CLI never waits for ever.
    async fn callback(&self, registry: &Registry, call: Call<'_>) -> Result<Response, AuthError> {
        let params = CallbackParams::parse(call.query)?;
        let signer = signer(registry).await?;
        let state = params.state.as_deref().ok_or(AuthError::UnknownLogin)?;
        let (pending, sealed) = sealed::open(signer, state, registry.now())?;
        match pending.requester.clone() {
            Requester::Cli { request, client_id } => {
                let done = async {
                    let who = self
                        .signed_in(registry, &call, params, &pending, &sealed)
                        .await?;
                    let ours = random_value();
                    let now = registry.now();
                    let issued = LoginCode::new(&client_id, &request, who.subject, who.groups, now);
                    login::put_code(registry.items.as_ref(), &ours, &issued).await?;
                    Ok::<_, AuthError>(ours)
                };
                let to = match done.await {
                    Ok(code) => flow::back_to_client(&request, &code),
                    Err(e) => {
                        let reason = e.to_string();
                        let status = Error::from(e).status();
                        tracing::info!(
                            event = "login.refused",
                            status = status.as_u16(),
                            reason = reason.as_str(),
                            "a terraform login was refused: its CLI hears why"
                        );
                        let refusal = sealed::refusal_code(signer, &reason);
                        flow::refused_to_client(&request, &reason, &refusal)
                    }
                };
                let mut resp = redirect(&to);
                set_cookie(&mut resp, &flow::clear_login_cookie());
                Ok(resp)
            }
            // Only the session's cookie: the sign-in cookie names a sign-in
            // whose code is spent, and lapses within its 10 minutes.
            Requester::Ui { next } => {
                let who = self
                    .signed_in(registry, &call, params, &pending, &sealed)
                    .await?;
                self.open_session(registry, &who.granted, who.subject, &next)
                    .await
            }
        }
    }

    /// Who the callback signs in, and what their groups give: the
    /// provider's answer checked for the sign-in `pending` (sent as
    /// `sealed`).
    async fn signed_in(
        &self,
        registry: &Registry,
        call: &Call<'_>,
        params: CallbackParams,
        pending: &PendingLogin,
        sealed: &Sealed,
    ) -> Result<SignedIn, AuthError> {
        if let Some(error) = params.error {
            let error: String = error
                .chars()
                .filter(char::is_ascii_graphic)
                .take(64)
                .collect();
            return Err(AuthError::ProviderSaidNo(error));
        }
        if !flow::same_browser(pending, session::cookie(call.headers, LOGIN_COOKIE)) {
            return Err(AuthError::OtherBrowser);
        }
        if params
            .iss
            .as_deref()
            .is_some_and(|iss| iss != self.upstream.issuer())
        {
            return Err(AuthError::WrongIssuer);
        }
        let code = params
            .code
            .ok_or_else(|| OAuthError::invalid_request("code is missing"))?;
        let id_token = self
            .upstream
            .redeem(&code, &sealed.verifier, &Self::callback_url(registry))
            .await?;
        let claims = self
            .upstream
            .verify_id_token(&id_token, &sealed.nonce, registry.now())
            .await?;
        let store = registry.items.as_ref();
        if !login::use_nonce(store, &claims.nonce, claims.exp + LEEWAY_SECS).await? {
            return Err(AuthError::NonceReused);
        }
        // Deny by default: no mapped group, no code (and the CLI or the
        // page says so).
        let granted = grant(&sso::mappings(store).await?, &claims.groups)?;
        Ok(SignedIn {
            granted,
            subject: Subject {
                iss: claims.iss,
                sub: claims.sub,
                name: claims.name,
                email: claims.email,
                ci: None,
            },
            groups: claims.groups,
        })
    }

    /// A UI sign-in's end: a token of the user's grants (as `terraform
    /// login` gets, for at most a session's length; listed and revocable,
    /// and revoking it ends the session), a session cookie naming it, and a
    /// same-site page that moves on to `next`.
    async fn open_session(
        &self,
        registry: &Registry,
        granted: &Grant,
        subject: Subject,
        next: &str,
    ) -> Result<Response, AuthError> {
        let now = registry.now();
        let signer = signer(registry).await?;
        let ttl = self.settings.token_ttl_secs.min(session::SESSION_SECS);
        let new = login_token(granted, &subject, now, ttl);
        let by = sign_in_actor();
        let store = registry.items.as_ref();
        let (token, record) =
            tokens::create_issued(store, new, now, &by, Some(subject.clone())).await?;
        let hash = presented_hash(&token)
            .ok_or_else(|| Error::Internal("a token just made does not read as one".into()))?;
        let opened = session::Session::open(&hash, now);
        let mut resp = http::Response::new(Body::from(flow::moving_on_page(next)));
        let headers = resp.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        set_cookie(
            &mut resp,
            &session::set_cookie(&session::value(signer, &opened)),
        );
        resp.extensions_mut().insert(AuditAs("token.login"));
        let why = format!(
            "(groups {}) for a web UI session",
            granted.groups.join(", ")
        );
        mark_issued(&mut resp, &record, &subject, &why);
        Ok(resp)
    }

    /// `POST /oauth/token`: Terraform's code (once, within 60 s, with the
    /// verifier of its challenge) for a registry token.
    async fn token(
        &self,
        registry: &Registry,
        call: Call<'_>,
        body: Body,
    ) -> Result<Response, Error> {
        let body = read_body(call.headers, body, MAX_TOKEN_REQUEST).await?;
        let form = std::str::from_utf8(&body)
            .map_err(|_| OAuthError::invalid_request("the form is not UTF-8"))
            .map_err(Error::OAuth)?;
        let request = TokenRequest::parse(form).map_err(Error::OAuth)?;
        let store = registry.items.as_ref();
        let now = registry.now();
        if request.code.starts_with(REFUSAL_PREFIX)
            && let Some(signer) = registry.signer_if_ready().await?
            && let Some(reason) = sealed::refusal(signer, &request.code)
        {
            return Err(Error::OAuth(OAuthError::access_denied(reason)));
        }
        let code = login::take_code(store, &request.code)
            .await?
            .ok_or_else(|| {
                Error::OAuth(OAuthError::invalid_grant(
                    "the code is unknown, already used or expired: run the login again",
                ))
            })?;
        code.issued.redeem(&request, now).map_err(Error::OAuth)?;
        let granted = grant(&sso::mappings(store).await?, &code.groups)
            .map_err(|e| Error::OAuth(OAuthError::invalid_grant(e.to_string())))?;
        let new = login_token(&granted, &code.subject, now, self.settings.token_ttl_secs);
        let by = sign_in_actor();
        let (token, record) =
            tokens::create_issued(store, new, now, &by, Some(code.subject.clone())).await?;
        let mut resp = json(
            StatusCode::OK,
            &serde_json::json!({
                "access_token": token,
                "token_type": "bearer",
                "expires_in": self.settings.token_ttl_secs,
            }),
        );
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let why = format!("(groups {})", granted.groups.join(", "));
        mark_issued(&mut resp, &record, &code.subject, &why);
        Ok(resp)
    }
}

/// Who a callback signed in.
struct SignedIn {
    granted: Grant,
    subject: Subject,
    groups: Vec<String>,
}

/// The registry's MAC key (sign-in states, sessions). The secret exists
/// once `tfreg serve` has started or, in AWS, after `tfreg aws init` or
/// the first publish; the auth function may only read it.
async fn signer(registry: &Registry) -> Result<&UrlSigner, Error> {
    registry.signer_if_ready().await?.ok_or_else(|| {
        Error::Unavailable(
            "the registry has no signing secret yet (publish once, or run `tfreg aws init`)".into(),
        )
    })
}

/// Who makes a sign-in's token.
fn sign_in_actor() -> Actor {
    Actor {
        kind: "sign-in".into(),
        token_id: None,
        token_name: None,
    }
}

fn set_cookie(resp: &mut Response, cookie: &str) {
    if let Ok(v) = HeaderValue::from_str(cookie) {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
}

#[async_trait]
impl Handler<AuthRoute> for Auth {
    async fn handle(
        &self,
        registry: &Registry,
        route: AuthRoute,
        call: Call<'_>,
        body: Body,
    ) -> Result<Response, Error> {
        match route {
            AuthRoute::Authorize => Ok(self.login()?.authorize(registry, call).await?),
            AuthRoute::Callback => Ok(self.login()?.callback(registry, call).await?),
            AuthRoute::Token => self.login()?.token(registry, call, body).await,
            AuthRoute::SsoStart => Ok(self.login()?.sso_start(registry, call).await?),
            AuthRoute::Exchange => {
                let exchange = self.exchange.as_deref().ok_or_else(|| {
                    Error::not_found(
                        "the CI token exchange is not configured here (no CI issuer is allow-listed)",
                    )
                })?;
                exchange.exchange(registry, call, body).await
            }
        }
    }
}
