//! No code: see this package's Cargo.toml.
