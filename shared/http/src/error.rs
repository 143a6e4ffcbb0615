//! The one error type of the registry and its mapping to HTTP.
//!
//! Every handler returns `Result<_, Error>`; [`Error::status`] is the only place
//! where an error becomes an HTTP status and [`Error::public_message`] the only
//! place that decides what a client is told. [`crate::body::error_response`]
//! turns both into the one shape of an error body (`{"errors": ["..."]}`).
//!
//! The client's mistakes are 4xx with a message that says what to fix (a
//! bound on things in progress reached: 429 with `Retry-After`). A store
//! that is down or throttled is [`Error::Unavailable`] (503 with `Retry-After`).
//! Our own bugs and broken data are [`Error::Internal`] (500): the detail goes to
//! the log, the client gets a short fixed message.

use http::{Method, StatusCode};

use tfreg_model::login::OAuthError;
use tfreg_model::{Invalid, RouteError};
use tfreg_store::StoreError;

/// Seconds a client is asked to wait before retrying a 503.
pub const RETRY_AFTER_SECS: u64 = 5;

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed: bad path segment, version or body.
    #[error("{0}")]
    BadRequest(String),
    /// The files of a publish are refused (signature, checksums, archive
    /// contents): 400, or 413 when `too_large`.
    #[error("{message}")]
    Refused { message: String, too_large: bool },
    /// No such provider, module, version, platform or route.
    #[error("{0}")]
    NotFound(String),
    /// No token, or a token the registry does not know.
    #[error("{0}")]
    Unauthorized(String),
    /// [`Error::Unauthorized`] on an OCI route: 401 with the challenge
    /// that names the token endpoint (`WWW-Authenticate: Bearer realm=...`).
    #[error("{message}")]
    Challenged { message: String, challenge: String },
    /// A valid token without the right, or a tampered/expired archive URL.
    #[error("{0}")]
    Forbidden(String),
    /// The route exists but not for this method; `allow` lists the methods it takes.
    #[error("method {method} is not allowed here")]
    MethodNotAllowed {
        method: Method,
        allow: &'static [Method],
    },
    /// Publishing a version that exists with different content, or writing an
    /// upload slot twice.
    #[error("{0}")]
    Conflict(String),
    /// A bound on things in progress is reached (publishes in progress per
    /// token or namespace): 429, with `Retry-After` saying when one frees up.
    #[error("{message}")]
    TooMany {
        message: String,
        retry_after_secs: u64,
    },
    /// A body or archive larger than the registry accepts.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// Request headers larger or more numerous than the registry accepts.
    #[error("{0}")]
    HeadersTooLarge(String),
    /// The client stopped sending its request body.
    #[error("{0}")]
    Timeout(String),
    /// A step of login.v1 refused as OAuth 2.0 says (RFC 6749 5.2): 400,
    /// the body also carries `error` and `error_description`.
    #[error(transparent)]
    OAuth(OAuthError),
    /// A service the registry relies on (the identity provider) did not
    /// answer as it must: 502, the detail logged.
    #[error("upstream: {0}")]
    BadGateway(String),
    /// An upstream registry's answer was refused by the cache (a bad
    /// signature, checksums that do not match, an address it may not
    /// reach): 502, the reason told (it is about the origin's data).
    #[error("{0}")]
    OriginRefused(String),
    /// An upstream registry failed (timeout, 5xx) and nothing is cached,
    /// or a fill is still going on: 503 with `Retry-After` (seconds).
    #[error("{message}")]
    OriginUnavailable {
        message: String,
        retry_after_secs: u64,
    },
    /// A store is unavailable or throttled; the request may be retried.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// Our bug, a misconfiguration or corrupt stored data. The detail is logged,
    /// never sent to the client.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::Refused {
                too_large: true, ..
            } => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Refused { .. } => StatusCode::BAD_REQUEST,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Unauthorized(_) | Error::Challenged { .. } => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::TooMany { .. } => StatusCode::TOO_MANY_REQUESTS,
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::HeadersTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Error::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            Error::OAuth(_) => StatusCode::BAD_REQUEST,
            Error::BadGateway(_) | Error::OriginRefused(_) => StatusCode::BAD_GATEWAY,
            Error::OriginUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the client is told: the whole message for its own mistakes; for
    /// ours a short fixed text with the request id, which names the log line
    /// that holds the detail.
    pub fn public_message(&self, request_id: &str) -> String {
        match self {
            Error::Unavailable(_) => format!(
                "the registry's storage is unavailable or throttled; retry later (request id {request_id})"
            ),
            Error::BadGateway(_) => format!(
                "the identity provider did not answer as expected; try again later (request id {request_id})"
            ),
            Error::Internal(_) => {
                format!("internal error (request id {request_id}); the registry logged the details")
            }
            other => other.to_string(),
        }
    }

    /// Shorthand for a 400.
    pub fn bad(msg: impl Into<String>) -> Self {
        Error::BadRequest(msg.into())
    }

    /// Shorthand for a 404.
    pub fn not_found(msg: impl Into<String>) -> Self {
        Error::NotFound(msg.into())
    }

    /// Shorthand for a 500 (our bug or broken data).
    pub fn internal(msg: impl std::fmt::Display) -> Self {
        Error::Internal(msg.to_string())
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::ConditionFailed => {
                Error::Conflict("the item was changed by another request".into())
            }
            StoreError::NotFound(what) => Error::NotFound(what),
            StoreError::Conflict(what) => Error::Conflict(what),
            StoreError::Invalid(what) => Error::BadRequest(what),
            StoreError::Full {
                message,
                retry_after_secs,
            } => Error::TooMany {
                message,
                retry_after_secs,
            },
            StoreError::AlreadyExists(key) => Error::Conflict(format!("{key} already exists")),
            StoreError::TooLarge { key, max } => {
                Error::PayloadTooLarge(format!("{key} is larger than {max} bytes"))
            }
            StoreError::Mismatch { key, reason } => Error::bad(format!("{key}: {reason}")),
            StoreError::Unavailable(detail) => Error::Unavailable(detail),
            StoreError::Internal(detail) => Error::Internal(detail),
        }
    }
}

impl From<Invalid> for Error {
    fn from(e: Invalid) -> Self {
        Error::BadRequest(e.0)
    }
}

impl From<RouteError> for Error {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::BadRequest(msg) => Error::BadRequest(msg),
            RouteError::NotFound(msg) => Error::NotFound(msg),
            RouteError::MethodNotAllowed { method, allow } => {
                Error::MethodNotAllowed { method, allow }
            }
        }
    }
}

impl From<tokio::task::JoinError> for Error {
    fn from(e: tokio::task::JoinError) -> Self {
        Error::internal(format!("a blocking task failed: {e}"))
    }
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_faults_never_reach_the_client() {
        let unavailable = Error::Unavailable("dynamodb: ThrottlingException on table t".into());
        assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
        let told = unavailable.public_message("r1");
        assert!(!told.contains("ThrottlingException"), "{told}");
        assert!(told.contains("request id r1"), "{told}");
        let internal = Error::internal("corrupt item PROVIDER#a/b VERSION#1");
        assert_eq!(internal.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let told = internal.public_message("r2");
        assert!(!told.contains("PROVIDER#"), "{told}");
        assert!(told.contains("request id r2"), "{told}");
        assert!(
            internal.to_string().contains("PROVIDER#"),
            "the log keeps it"
        );
        let bad = Error::bad("invalid version \"x\"");
        assert_eq!(bad.public_message("r3"), "invalid version \"x\"");
    }

    #[test]
    fn store_errors_keep_their_meaning() {
        let cases = [
            (StoreError::Unavailable("timeout".into()), 503),
            (StoreError::Internal("corrupt".into()), 500),
            (StoreError::ConditionFailed, 409),
            (StoreError::AlreadyExists("k".into()), 409),
            (StoreError::NotFound("k".into()), 404),
            (StoreError::Conflict("k".into()), 409),
            (StoreError::Invalid("k".into()), 400),
            (
                StoreError::TooLarge {
                    key: "k".into(),
                    max: 1,
                },
                413,
            ),
            (
                StoreError::Mismatch {
                    key: "k".into(),
                    reason: "short".into(),
                },
                400,
            ),
            (
                StoreError::Full {
                    message: "k".into(),
                    retry_after_secs: 60,
                },
                429,
            ),
        ];
        for (store, status) in cases {
            assert_eq!(Error::from(store).status().as_u16(), status);
        }
    }

    #[test]
    fn a_bound_reached_says_when_to_retry() {
        let full = Error::from(StoreError::Full {
            message: "this token has 20 publishes in progress".into(),
            retry_after_secs: 61,
        });
        let resp = crate::body::error_response(&full, "r1");
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[http::header::RETRY_AFTER], "61");
        assert_eq!(
            full.public_message("r1"),
            "this token has 20 publishes in progress"
        );
    }

    #[test]
    fn route_errors_are_the_statuses_the_router_promises() {
        use http::Method;
        for (e, status) in [
            (RouteError::bad("x"), 400),
            (RouteError::not_found("x"), 404),
            (
                RouteError::MethodNotAllowed {
                    method: Method::PUT,
                    allow: &[Method::GET],
                },
                405,
            ),
        ] {
            assert_eq!(Error::from(e).status().as_u16(), status);
        }
        assert_eq!(Error::from(Invalid::bad("x")).status().as_u16(), 400);
    }
}
