//! The one error type of the registry and its mapping to HTTP.
//!
//! Every handler returns `Result<_, Error>`; [`Error::status`] is the only place
//! where an error becomes an HTTP status, and [`crate::protocol::ErrorBody`] the
//! only shape of an error body (`{"errors": ["..."]}`).

use http::StatusCode;

/// Everything that can go wrong while answering a request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is malformed: bad path segment, version, body or archive.
    #[error("{0}")]
    BadRequest(String),
    /// No such provider, module, version, platform or route.
    #[error("{0}")]
    NotFound(String),
    /// No token, or a token the registry does not know.
    #[error("{0}")]
    Unauthorized(String),
    /// A valid token without the right, or a tampered/expired archive URL.
    #[error("{0}")]
    Forbidden(String),
    /// The route exists but not for this method.
    #[error("method {0} is not allowed here")]
    MethodNotAllowed(String),
    /// Publishing a version that exists with different content.
    #[error("{0}")]
    Conflict(String),
    /// A body or archive larger than the registry accepts.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A storage backend failed; the request may be retried.
    #[error("storage error: {0}")]
    Storage(String),
}

impl Error {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Error::BadRequest(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) => StatusCode::NOT_FOUND,
            Error::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Error::Forbidden(_) => StatusCode::FORBIDDEN,
            Error::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            Error::Conflict(_) => StatusCode::CONFLICT,
            Error::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Error::Storage(_) => StatusCode::SERVICE_UNAVAILABLE,
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
}

impl From<crate::storage::StoreError> for Error {
    fn from(e: crate::storage::StoreError) -> Self {
        match e {
            crate::storage::StoreError::ConditionFailed => {
                Error::Conflict("the item was changed by another request".into())
            }
            crate::storage::StoreError::NotFound(key) => {
                Error::not_found(format!("{key} not found"))
            }
            other => Error::Storage(other.to_string()),
        }
    }
}

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
