//! The OCI view's routes (issue 40): the read-only part of the OCI
//! distribution API under `/v2/`, and its token endpoint.

use crate::address::Hostname;
use crate::error::RouteError;
use crate::oci::{Digest, Reference, Repository};
use crate::router::segments::not_found;
use crate::token::Realm;

/// Where the OCI view's routes begin.
pub const OCI_PREFIX: &str = "/v2";
/// The token endpoint a `401`'s challenge names: Basic credentials (the
/// password a tfreg token) for a short-lived bearer of some repositories.
pub const OCI_TOKEN_PATH: &str = "/v2/token";

/// A request of the OCI distribution API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OciRoute {
    /// `GET /v2/`: is this a registry, and may I? (`oras login`, `docker
    /// login`; OpenTofu never asks.)
    Base,
    /// `GET /v2/token?service=&scope=repository:<name>:pull`.
    Token,
    /// `GET /v2/<name>/tags/list?n=&last=`.
    Tags { repository: Repository },
    /// `GET|HEAD /v2/<name>/manifests/<tag or digest>`.
    Manifest {
        repository: Repository,
        reference: Reference,
    },
    /// `GET|HEAD /v2/<name>/blobs/<digest>`.
    Blob {
        repository: Repository,
        digest: Digest,
    },
}

impl OciRoute {
    /// The route of a path under `/v2` (already known to start so), its
    /// segments not decoded: OCI names and references need no escapes.
    pub fn parse(path: &str) -> Result<OciRoute, RouteError> {
        let rest = &path[OCI_PREFIX.len()..];
        if rest.is_empty() || rest == "/" {
            return Ok(OciRoute::Base);
        }
        if path == OCI_TOKEN_PATH {
            return Ok(OciRoute::Token);
        }
        let segs: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
        match segs.as_slice() {
            [name @ .., "tags", "list"] if !name.is_empty() => Ok(OciRoute::Tags {
                repository: Repository::parse(name)?,
            }),
            [name @ .., "manifests", reference] if !name.is_empty() => Ok(OciRoute::Manifest {
                repository: Repository::parse(name)?,
                reference: Reference::parse(reference)?,
            }),
            [name @ .., "blobs", digest] if !name.is_empty() => Ok(OciRoute::Blob {
                repository: Repository::parse(name)?,
                digest: Digest::parse(digest)?,
            }),
            _ => Err(not_found(path)),
        }
    }

    pub fn path(&self) -> String {
        match self {
            OciRoute::Base => format!("{OCI_PREFIX}/"),
            OciRoute::Token => OCI_TOKEN_PATH.to_string(),
            OciRoute::Tags { repository } => format!("{OCI_PREFIX}/{repository}/tags/list"),
            OciRoute::Manifest {
                repository,
                reference,
            } => format!("{OCI_PREFIX}/{repository}/manifests/{reference}"),
            OciRoute::Blob { repository, digest } => {
                format!("{OCI_PREFIX}/{repository}/blobs/{digest}")
            }
        }
    }

    /// The repository it reads, if any.
    pub fn repository(&self) -> Option<&Repository> {
        match self {
            OciRoute::Base | OciRoute::Token => None,
            OciRoute::Tags { repository }
            | OciRoute::Manifest { repository, .. }
            | OciRoute::Blob { repository, .. } => Some(repository),
        }
    }

    /// Whose it is, as the registry protocol's reads of the same package:
    /// `GET /v2/` is anyone's who may read something.
    pub fn realm(&self, own_host: &Hostname) -> Realm<'_> {
        match self.repository() {
            None => Realm::AnyNamespace,
            Some(repository) => repository_realm(repository, own_host),
        }
    }
}

/// Whose a repository is: its namespace's, or (another host's providers)
/// the whole registry's.
pub fn repository_realm<'r>(repository: &'r Repository, own_host: &Hostname) -> Realm<'r> {
    match repository {
        Repository::Provider(p) => Realm::Namespace(&p.namespace),
        Repository::Module(m) => Realm::Namespace(&m.namespace),
        Repository::Mirrored { hostname, provider } if hostname == own_host => {
            Realm::Namespace(&provider.namespace)
        }
        Repository::Mirrored { .. } => Realm::Registry,
    }
}
