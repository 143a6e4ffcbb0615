//! tfreg's HTTP pipeline: one request's path through the registry, the same
//! for `tfreg serve`, every Lambda function and in-process tests.
//!
//! - [`app`]: route (the model's router) → authorise ([`auth`], once, for
//!   every route, by what the route needs) → dispatch to the handler group
//!   this process was given ([`groups`]) → one log line, and one audit
//!   record per change of state.
//! - [`error`]: every error becomes HTTP here and only here (4xx for the
//!   client's mistake, 503 with `Retry-After` for a store that is down, 500
//!   for our bug, logged with detail and answered briefly); [`body`]: the
//!   shapes of answers and the bounds on bodies.
//! - [`registry`]: the state a handler gets (stores, URL signer,
//!   configuration, clock); [`signed_url`]: archive URLs; [`session`]: the
//!   web UI's session cookie.

pub mod app;
pub mod auth;
pub mod body;
pub mod error;
pub mod groups;
pub mod registry;
pub mod session;
pub mod signed_url;
pub mod token_cache;

pub use app::{App, Caller};
pub use error::Error;
pub use groups::{Call, Handler, Note, Pages, Served};
pub use registry::{Config, Registry};
