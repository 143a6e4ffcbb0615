//! What every outbound fetch of the registry needs, below the handler groups
//! that fetch (`tfreg-auth` for identity providers, `tfreg-cache` for
//! origin registries): one answer to "may this process connect there?",
//! applied where it cannot be gone around.
//!
//! - [`policy`] (pure): may `(host, ip)` be connected to, and may a URL be
//!   fetched at all. Special-purpose ranges
//!   ([`tfreg_model::upstream::refused_range`]) are refused, with two kinds
//!   of exception an entry point opts into: loopback everywhere (the sign-in
//!   tests) and a named host's own addresses (a cache upstream's `connect`
//!   hook), which in AWS never cover loopback or link-local.
//! - [`resolve`]: a [`reqwest::dns::Resolve`] that looks names up through an
//!   inner [`resolve::Lookup`] (the system's, or a scripted one in tests)
//!   and hands the connector only the addresses the policy allows. The
//!   connector connects to exactly what it is handed, so a name re-pointed
//!   between two lookups gains nothing: there is no separate "check" lookup.
//!   IP-literal URLs never reach a resolver (hyper-util connects to them
//!   directly), which is why [`policy::Policy::check_url`] must run before
//!   every request and redirect hop.
//! - [`tls`]: client TLS with *ring* (no second crypto stack), the system's
//!   roots and optionally one more CA.

pub mod policy;
pub mod resolve;
pub mod tls;

pub use policy::{Deployment, Exception, Policy, Refused, UrlRefused};
pub use resolve::{
    GuardedResolver, Lookup, Pinned, ResolveError, ResolverStats, ScriptedLookup, SystemLookup,
    refusal_in,
};
pub use tls::{Roots, TlsError};
