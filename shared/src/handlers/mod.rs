//! Handlers: plain async functions of (registry, parsed request) → response.

pub mod admin;
pub mod blob;
pub mod publish;
pub mod read;
