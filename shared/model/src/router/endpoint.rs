//! Which function serves a route: names the Lambda function, its log lines
//! and its template entry.

use crate::router::read::ReadEndpoint;

/// Which function serves a route: names the Lambda function, its log lines
/// and its template entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Discovery,
    /// The read protocols, one function each.
    Read(ReadEndpoint),
    Blob,
    Publish,
    Admin,
    Ui,
    /// Sign-in: login.v1 and the identity provider's callback.
    Auth,
}

impl Endpoint {
    /// Every endpoint, for drift checks between the router, functions and template.
    pub fn all() -> Vec<Endpoint> {
        let mut all = vec![Endpoint::Discovery];
        all.extend(ReadEndpoint::ALL.map(Endpoint::Read));
        all.extend([
            Endpoint::Blob,
            Endpoint::Publish,
            Endpoint::Admin,
            Endpoint::Ui,
            Endpoint::Auth,
        ]);
        all
    }

    /// A short stable name, used in logs and as the function name.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Discovery => "discovery",
            Endpoint::Read(read) => read.name(),
            Endpoint::Blob => "blob",
            Endpoint::Publish => "publish",
            Endpoint::Admin => "admin",
            Endpoint::Ui => "ui",
            Endpoint::Auth => "auth",
        }
    }
}
