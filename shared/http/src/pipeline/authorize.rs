//! Authorisation, once, for every route, the same in every mode: the
//! route's access (the model's `access()`, the one authorisation point)
//! against the caller's credential (a UI session, else the `Authorization`
//! header); the operator ([`Caller::Operator`]) has every right. Who asked is
//! kept even when refused (a valid token without the right): the audit
//! trail records the refused change. An OCI route's credential is its
//! bearer ([`crate::oci_bearer`], for its repository), and its `401` names
//! the token endpoint in a `Bearer` challenge, as OCI clients expect.

use std::sync::Arc;

use tfreg_model::oci::challenge;
use tfreg_model::router::{OCI_TOKEN_PATH, ReadRoute, Route};
use tfreg_model::token::Principal;

use super::Shared;
use super::facts::{Caller, fail};
use super::layer::{Inner, Job, Next};
use crate::auth::{self, Credential};
use crate::body::{Request, Response, authorization};
use crate::error::Error;
use crate::session::Session;

/// Checks the route's access.
#[derive(Clone)]
pub(super) struct Authorize(pub(super) Arc<Shared>);

impl Job for Authorize {
    async fn run<S: Inner>(self, mut req: Request, next: Next<S>) -> Response {
        let shared = self.0;
        let Some(route) = req.extensions().get::<Route>() else {
            return fail(Error::internal("authorisation without a route"));
        };
        let caller = req.extensions().get::<Caller>().copied();
        let (who, verdict) = match caller.unwrap_or(Caller::Network) {
            Caller::Operator => (Principal::Operator, Ok(())),
            Caller::Network => {
                let registry = &shared.registry;
                let oci = match route {
                    Route::Read(ReadRoute::Oci(oci)) => Some(oci),
                    _ => None,
                };
                let repository = oci.and_then(|o| o.repository()).map(|r| r.name());
                let credential = match (req.extensions().get::<Session>(), oci) {
                    (_, Some(_)) => Credential::Oci {
                        header: authorization(req.headers()),
                        repository: repository.as_deref(),
                    },
                    (Some(session), None) => Credential::Session(Some(session)),
                    (None, None) => Credential::Authorization(authorization(req.headers())),
                };
                let (who, verdict) = auth::authorize(
                    registry,
                    credential,
                    route.access(&registry.config.hostname),
                )
                .await;
                match (verdict, oci) {
                    (Err(Error::Unauthorized(message)), Some(oci)) => (
                        who,
                        Err(Error::Challenged {
                            message,
                            challenge: challenge(
                                &format!("{}{OCI_TOKEN_PATH}", registry.config.public_url),
                                registry.config.hostname.as_str(),
                                oci.repository(),
                            ),
                        }),
                    ),
                    (verdict, _) => (who, verdict),
                }
            }
        };
        let mut resp = match verdict {
            Ok(()) => {
                req.extensions_mut().insert(who.clone());
                next.run(req).await
            }
            Err(e) => fail(e),
        };
        resp.extensions_mut().insert(who);
        resp
    }
}
