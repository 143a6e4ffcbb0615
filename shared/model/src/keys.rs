//! An OpenPGP public key an admin registered for a namespace. Pure data;
//! parsing and verifying with it is the verification layer's.

use serde::{Deserialize, Serialize};

/// A registered key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisteredKey {
    /// Primary key id, 16 uppercase hex digits.
    pub key_id: String,
    pub ascii_armor: String,
    /// The primary key's and each subkey's algorithm.
    pub algorithms: Vec<String>,
    pub added_at: u64,
    /// [`crate::token::Actor::describe`].
    pub added_by: String,
}
