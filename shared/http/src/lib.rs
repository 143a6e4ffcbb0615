//! tfreg's HTTP pipeline: one request's path through the registry, the same
//! for `tfreg serve`, every Lambda function and in-process tests.
//!
//! - [`app`]: the registry as one service for every entry point; its
//!   [`pipeline`], one tower layer per job, from the outside in: request
//!   id → the log line → metrics → HEAD bodies → audit (one typed record
//!   per change of state) → errors to HTTP → header limits → route (the
//!   model's router) → UI session → authorise ([`auth`], once, for every
//!   route, by what the route needs) → panic guard → dispatch to the
//!   handler group this process was given ([`groups`]).
//! - [`error`]: every error becomes HTTP here and only here (4xx for the
//!   client's mistake, 503 with `Retry-After` for a store that is down, 500
//!   for our bug, logged with detail and answered briefly); [`body`]: the
//!   shapes of answers and the bounds on bodies.
//! - [`registry`]: the state a handler gets (stores, URL signer,
//!   configuration, clock); [`signed_url`]: archive URLs; `edge_url`
//!   (feature `cloudfront`): CloudFront signed archive URLs; [`session`]:
//!   the web UI's session cookie.
//! - [`metrics`]: what each request, fill and publish records (EMF in AWS,
//!   Prometheus in `tfreg serve`); [`usage`]: downloads counted by consumer.

pub mod answer_cache;
pub mod app;
pub mod auth;
pub mod body;
#[cfg(feature = "cloudfront")]
pub mod edge_url;
pub mod error;
pub mod fill;
pub mod groups;
pub mod metrics;
pub mod oci_bearer;
pub mod pipeline;
pub mod registry;
pub mod session;
pub mod signed_url;
pub mod token_cache;
pub mod usage;

pub use app::{App, Caller};
pub use error::Error;
pub use groups::{AuditAs, Call, Handler, Identified, Note, Pages, Served};
pub use registry::{ArchiveDelivery, Config, Registry};

/// The `tracing` filter an entry point logs with: `TFREG_LOG`, else
/// `RUST_LOG`, else `default` (`off` silences everything, in-process tests
/// included), read through `get`.
pub fn log_directives(get: impl Fn(&str) -> Option<String>, default: &str) -> String {
    ["TFREG_LOG", "RUST_LOG"]
        .into_iter()
        .find_map(|name| get(name).filter(|v| !v.trim().is_empty()))
        .unwrap_or_else(|| default.to_string())
}

#[cfg(test)]
mod log_tests {
    use super::log_directives;

    #[test]
    fn tfreg_log_then_rust_log_then_the_default() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(log_directives(env(&[]), "info"), "info");
        assert_eq!(log_directives(env(&[("RUST_LOG", "off")]), "info"), "off");
        assert_eq!(
            log_directives(env(&[("RUST_LOG", "debug"), ("TFREG_LOG", "off")]), "info"),
            "off"
        );
        assert_eq!(log_directives(env(&[("TFREG_LOG", " ")]), "warn"), "warn");
    }
}
