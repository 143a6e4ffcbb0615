//! Which function serves a route: names the Lambda function, its log lines
//! and its template entry.

use strum::VariantArray as _;

use crate::router::read::ReadEndpoint;

/// Which function serves a route: names the Lambda function, its log lines
/// and its template entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, strum::EnumDiscriminants)]
#[strum_discriminants(
    name(EndpointKind),
    vis(pub),
    doc = "The kinds of [`Endpoint`]: the read protocols as one.",
    derive(strum::VariantArray, strum::IntoStaticStr),
    strum(serialize_all = "kebab-case")
)]
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
    /// Every endpoint, derived from the variants (and every read
    /// endpoint's), for drift checks between the router, functions and
    /// template.
    pub fn all() -> Vec<Endpoint> {
        EndpointKind::VARIANTS
            .iter()
            .flat_map(|kind| match kind {
                EndpointKind::Read => ReadEndpoint::VARIANTS
                    .iter()
                    .map(|r| Endpoint::Read(*r))
                    .collect(),
                EndpointKind::Discovery => vec![Endpoint::Discovery],
                EndpointKind::Blob => vec![Endpoint::Blob],
                EndpointKind::Publish => vec![Endpoint::Publish],
                EndpointKind::Admin => vec![Endpoint::Admin],
                EndpointKind::Ui => vec![Endpoint::Ui],
                EndpointKind::Auth => vec![Endpoint::Auth],
            })
            .collect()
    }

    /// A short stable name, used in logs and as the function name: the
    /// variant's (or the read endpoint's) in kebab case.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Read(read) => read.name(),
            other => EndpointKind::from(other).into(),
        }
    }
}
