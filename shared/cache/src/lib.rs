//! tfreg's pull-through cache (issue 22, tests/cache/plan.md): the only
//! crate that speaks to origin registries: its origin client ([`origin`])
//! and the fill engine ([`fill`]: lease, verification, storing).
//!
//! Every fetch goes through `tfreg-outbound`: an origin's answers, redirects
//! and DNS can never make the registry connect to loopback, link-local or
//! another special-purpose address, except the upstream's own `connect`
//! hook, which in AWS never opens loopback or link-local.

pub mod fill;
pub mod origin;
pub mod sync;
