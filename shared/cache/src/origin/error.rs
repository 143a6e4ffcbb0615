//! What can go wrong asking an origin, in the classes the fill engine maps
//! (tests/cache/plan.md §6): a 404 is remembered, a transient failure is
//! never remembered (the cached answer, else 503), anything else is a 502
//! with its reason. URLs in messages carry no query: a signed download
//! URL's query is a credential.

use std::time::Duration;

use reqwest::StatusCode;
use tfreg_outbound::UrlRefused;

#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// The origin answered 404.
    #[error("{url}: not found at the origin")]
    NotFound { url: String },
    /// An address or URL we may not fetch (SSRF), named.
    #[error("{url}: refused: {why}")]
    Refused { url: String, why: UrlRefused },
    /// Worth trying again later: 5xx, 429, a timeout or the deadline, TLS,
    /// a connection refused or broken.
    #[error("{url}: {reason}")]
    Transient {
        url: String,
        reason: String,
        /// The origin's `Retry-After` (seconds form), if any.
        retry_after: Option<Duration>,
    },
    /// The origin answered, but not as the protocol says.
    #[error("{url}: {reason}")]
    Protocol { url: String, reason: String },
    #[error("{url}: larger than {cap} bytes")]
    TooLarge { url: String, cap: u64 },
    /// 401 or 403 to a request that carried our credentials (or needed them).
    #[error("{url}: the origin refused our credentials ({status})")]
    CredentialsRefused { url: String, status: u16 },
    /// Writing the fetched bytes here failed.
    #[error("{path}: {source}")]
    Local {
        path: String,
        source: std::io::Error,
    },
}

/// `url` as shown in messages: scheme, host, port and path only.
pub fn shown(url: &url::Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

impl OriginError {
    pub(crate) fn protocol(url: &url::Url, reason: impl Into<String>) -> Self {
        OriginError::Protocol {
            url: shown(url),
            reason: reason.into(),
        }
    }

    pub(crate) fn transient(url: &url::Url, reason: impl Into<String>) -> Self {
        OriginError::Transient {
            url: shown(url),
            reason: reason.into(),
            retry_after: None,
        }
    }

    pub(crate) fn refused(url: &url::Url, why: UrlRefused) -> Self {
        OriginError::Refused {
            url: shown(url),
            why,
        }
    }

    pub(crate) fn too_large(url: &url::Url, cap: u64) -> Self {
        OriginError::TooLarge {
            url: shown(url),
            cap,
        }
    }

    /// A failed request: the resolver's refusal if it refused, else a
    /// transient failure with its causes (TLS, connect, timeout, reset).
    pub(crate) fn from_reqwest(url: &url::Url, err: &reqwest::Error) -> Self {
        if let Some(refused) = tfreg_outbound::refusal_in(err) {
            return Self::refused(url, UrlRefused::Address(refused.clone()));
        }
        let mut reason = if err.is_timeout() {
            "timed out".to_string()
        } else if err.is_connect() {
            "cannot connect".to_string()
        } else {
            "the exchange failed".to_string()
        };
        let mut source = std::error::Error::source(err);
        while let Some(cause) = source {
            reason.push_str(": ");
            reason.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::transient(url, reason)
    }

    /// A status other than the one asked for: 404, 401/403 (to a request
    /// with credentials; otherwise transient, as an expired signed URL is),
    /// 429 and 5xx, or a protocol error.
    pub(crate) fn from_status(
        url: &url::Url,
        status: StatusCode,
        headers: &http::HeaderMap,
        with_credentials: bool,
    ) -> Self {
        match status.as_u16() {
            404 => OriginError::NotFound { url: shown(url) },
            401 | 403 if with_credentials => OriginError::CredentialsRefused {
                url: shown(url),
                status: status.as_u16(),
            },
            401 | 403 | 429 | 500..=599 => OriginError::Transient {
                url: shown(url),
                reason: format!("the origin answered {status}"),
                retry_after: headers
                    .get(http::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse().ok())
                    .map(Duration::from_secs),
            },
            _ => Self::protocol(url, format!("unexpected answer {status}")),
        }
    }

    /// Worth trying again later (never remembered as a 404).
    pub fn is_transient(&self) -> bool {
        matches!(self, OriginError::Transient { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_classes() {
        let url = url::Url::parse("https://o.example.com/x?X-Amz-Signature=secret").unwrap();
        let none = http::HeaderMap::new();
        let class = |code: u16, creds: bool| {
            OriginError::from_status(&url, StatusCode::from_u16(code).unwrap(), &none, creds)
        };
        assert!(matches!(class(404, true), OriginError::NotFound { .. }));
        assert!(matches!(
            class(401, true),
            OriginError::CredentialsRefused { status: 401, .. }
        ));
        assert!(class(403, false).is_transient());
        assert!(class(429, false).is_transient());
        assert!(class(503, true).is_transient());
        assert!(matches!(class(418, true), OriginError::Protocol { .. }));
        assert!(matches!(class(302, true), OriginError::Protocol { .. }));
        assert!(!class(500, false).to_string().contains("secret"));
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::RETRY_AFTER, "7".parse().unwrap());
        match OriginError::from_status(&url, StatusCode::TOO_MANY_REQUESTS, &headers, false) {
            OriginError::Transient { retry_after, .. } => {
                assert_eq!(retry_after, Some(Duration::from_secs(7)))
            }
            other => panic!("{other:?}"),
        }
    }
}
