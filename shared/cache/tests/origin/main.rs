//! The origin client against a real HTTPS origin on loopback, reached under
//! `registry.example.test` through scripted DNS and the upstream's
//! `connect` hook. Each test fails if the guard it names is broken: the
//! refusal is checked at the client, and "nothing connected" at the
//! target's own counters.

mod support;

mod caps;
mod credentials;
mod git;
mod git_server;
mod protocol;
mod redirects;
mod ssrf;
