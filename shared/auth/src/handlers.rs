//! The sign-in group ([`Auth`]): login.v1's authorize and token endpoints
//! and the provider's callback ([`Login`], where an identity provider is
//! configured), and the CI token exchange ([`Exchange`], where CI issuers
//! are). Either may be configured without the other. A login's state lives
//! in the item store between steps (`tfreg_store::catalog::login`); the
//! decisions are in [`crate::flow`].

use std::sync::Arc;

use async_trait::async_trait;
use http::{HeaderValue, StatusCode, header};
use tfreg_http::body::{Body, Response, json, read_body, redirect};
use tfreg_http::{Call, Error, Handler, Identified, Note, Registry, session};
use tfreg_model::login::{AuthorizeRequest, OAuthError, TokenRequest, random_value};
use tfreg_model::oidc::LEEWAY_SECS;
use tfreg_model::router::{AuthRoute, CALLBACK_PATH};
use tfreg_model::signin::{LoginCode, Subject, login_token};
use tfreg_model::sso::grant;
use tfreg_model::token::Actor;
use tfreg_store::catalog::{login, sso, tokens};

use crate::error::AuthError;
use crate::exchange::Exchange;
use crate::flow::{self, CallbackParams, Fresh, LOGIN_COOKIE, LoginSettings};
use crate::oidc::Upstream;

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

    /// `GET /oauth/authorize`: check Terraform's request, keep it as a
    /// pending sign-in, send the browser to the provider.
    async fn authorize(&self, registry: &Registry, call: Call<'_>) -> Result<Response, AuthError> {
        let request = AuthorizeRequest::parse(
            call.query.unwrap_or(""),
            &self.settings.client_id,
            self.settings.ports,
        )?;
        let fresh = Fresh::new();
        let now = registry.now();
        let pending = flow::pending(request, &self.settings.client_id, &fresh, now);
        login::put_pending(registry.items.as_ref(), &fresh.state, &pending).await?;
        let to = flow::upstream_url(
            self.upstream.authorization_endpoint(),
            self.upstream.client_id(),
            &Self::callback_url(registry),
            &fresh,
        );
        let mut resp = redirect(&to);
        set_cookie(&mut resp, &flow::login_cookie(&fresh.cookie));
        Ok(resp)
    }

    /// `GET /oauth/callback`: the provider's answer. The pending sign-in is
    /// taken (once), the browser checked, the code redeemed, the ID token
    /// verified, the groups mapped; Terraform's browser goes back with a
    /// code of ours.
    async fn callback(&self, registry: &Registry, call: Call<'_>) -> Result<Response, AuthError> {
        let params = CallbackParams::parse(call.query)?;
        let now = registry.now();
        let store = registry.items.as_ref();
        let state = params.state.as_deref().ok_or(AuthError::UnknownLogin)?;
        let pending = login::take_pending(store, state, now)
            .await?
            .ok_or(AuthError::UnknownLogin)?;
        if let Some(error) = params.error {
            let error: String = error
                .chars()
                .filter(char::is_ascii_graphic)
                .take(64)
                .collect();
            return Err(AuthError::ProviderSaidNo(error));
        }
        if !flow::same_browser(&pending, session::cookie(call.headers, LOGIN_COOKIE)) {
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
            .redeem(
                &code,
                &pending.upstream_verifier,
                &Self::callback_url(registry),
            )
            .await?;
        let claims = self
            .upstream
            .verify_id_token(&id_token, &pending.nonce, now)
            .await?;
        if !login::use_nonce(store, &claims.nonce, claims.exp + LEEWAY_SECS).await? {
            return Err(AuthError::NonceReused);
        }
        // Deny by default: no mapped group, no code (and the page says so).
        grant(&sso::mappings(store).await?, &claims.groups)?;
        let subject = Subject {
            iss: claims.iss,
            sub: claims.sub,
            name: claims.name,
            email: claims.email,
        };
        let ours = random_value();
        let issued = LoginCode::new(
            &pending.client_id,
            &pending.request,
            subject,
            claims.groups,
            now,
        );
        login::put_code(store, &ours, &issued).await?;
        let mut resp = redirect(&flow::back_to_client(&pending, &ours));
        set_cookie(&mut resp, &flow::clear_login_cookie());
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
        let by = Actor {
            kind: "sign-in".into(),
            token_id: None,
            token_name: None,
        };
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
        let who = &code.subject;
        let note = format!(
            "token {} ({}) issued to sub {:?} of {} (groups {})",
            record.id,
            record.describe_grants(),
            who.sub,
            who.iss,
            granted.groups.join(", ")
        );
        resp.extensions_mut().insert(Note(note));
        resp.extensions_mut().insert(Identified(Actor {
            kind: "token".into(),
            token_id: Some(record.id.clone()),
            token_name: Some(record.name.clone()),
        }));
        Ok(resp)
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
