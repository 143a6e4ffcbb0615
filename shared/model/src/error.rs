//! Why the model refuses a value: what the client sent (a name, a version,
//! a path) is not valid, or names no route. No HTTP status is decided here:
//! the HTTP pipeline maps these, with every other error, in one place.

use http::Method;

/// A value from outside (a path segment, a name, a version, a body field)
/// that is not valid: the client's mistake, with what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Invalid(pub String);

impl Invalid {
    pub fn bad(msg: impl Into<String>) -> Self {
        Invalid(msg.into())
    }
}

/// Why a method and path map to no [`crate::router::Route`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// A malformed parameter (a name, a version, an escape).
    #[error("{0}")]
    BadRequest(String),
    /// No such endpoint.
    #[error("{0}")]
    NotFound(String),
    /// The path exists, not for this method; `allow` lists the methods it takes.
    #[error("method {method} is not allowed here")]
    MethodNotAllowed {
        method: Method,
        allow: &'static [Method],
    },
}

impl RouteError {
    pub fn bad(msg: impl Into<String>) -> Self {
        RouteError::BadRequest(msg.into())
    }

    pub fn not_found(msg: impl Into<String>) -> Self {
        RouteError::NotFound(msg.into())
    }
}

impl From<Invalid> for RouteError {
    fn from(e: Invalid) -> Self {
        RouteError::BadRequest(e.0)
    }
}
