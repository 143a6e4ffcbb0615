//! One fetch per miss (plan §5): what is fetched ([`Fill`], named by a
//! canonical [`Fill::key`]), and the lease that lets one process fetch it
//! while the others wait ([`Lease`], a store item written only with a
//! condition: created if absent, replaced if unchanged). [`next`] decides
//! what a process does on finding a lease; the store code only carries it
//! out, so every transition is a unit test here.

use serde::{Deserialize, Serialize};

use crate::upstream::UpstreamHost;

/// How long a lease holds without being renewed: a holder that dies is
/// replaced after this.
pub const LEASE_SECS: u64 = 60;
/// How long a failed fetch's outcome is answered to those who waited for
/// it (so 20 cold requests against a failing origin make one fetch), and
/// not fetched again.
pub const FAILURE_HELD_SECS: u64 = 10;

/// What a fill fetches, for one provider or module of one upstream
/// (`name`: a provider's type, a module's name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fill {
    pub host: UpstreamHost,
    pub namespace: String,
    pub name: String,
    pub what: FillWhat,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FillWhat {
    /// The provider's version list.
    ProviderList,
    /// One version: its SHA256SUMS, signature and keys, verified.
    ProviderVersion { version: String },
    /// One platform's archive of a verified version.
    ProviderArchive { version: String, platform: String },
    /// A module's version list.
    ModuleList { system: String },
    /// One module version: its source resolved (a git ref pinned to its
    /// commit), fetched, packed and stored (or passed through).
    ModuleVersion { system: String, version: String },
}

impl Fill {
    /// The canonical text naming this fill (the lease's key is its hash).
    pub fn key(&self) -> String {
        let base = format!("{}/{}/{}", self.host, self.namespace, self.name);
        match &self.what {
            FillWhat::ProviderList => format!("providers {base} versions"),
            FillWhat::ProviderVersion { version } => format!("providers {base} {version}"),
            FillWhat::ProviderArchive { version, platform } => {
                format!("providers {base} {version} {platform}")
            }
            FillWhat::ModuleList { system } => format!("modules {base}/{system} versions"),
            FillWhat::ModuleVersion { system, version } => {
                format!("modules {base}/{system} {version}")
            }
        }
    }
}

/// The lease item: who is fetching, until when, and how the last fetch ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The holder's random id; none once released.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// [`Fill::key`].
    pub what: String,
    /// Held until (unix seconds); renewed by a long fetch.
    pub until: u64,
    /// How the last fetch ended (once released).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// When it was taken or released.
    pub at: u64,
}

/// How a fetch ended, for those who waited for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    Stored,
    /// The answer to give: its status (404, 502, 503) and message.
    Failed {
        status: u16,
        message: String,
    },
}

impl Lease {
    /// Taken by `holder` at `now`.
    pub fn taken(what: &str, holder: &str, now: u64) -> Lease {
        Lease {
            holder: Some(holder.to_string()),
            what: what.to_string(),
            until: now.saturating_add(LEASE_SECS),
            outcome: None,
            at: now,
        }
    }

    /// Released by its holder at `now`, ending `outcome`.
    pub fn released(&self, outcome: Outcome, now: u64) -> Lease {
        Lease {
            holder: None,
            what: self.what.clone(),
            until: now,
            outcome: Some(outcome),
            at: now,
        }
    }

    /// Renewed by its holder at `now`.
    pub fn renewed(&self, now: u64) -> Lease {
        Lease {
            until: now.saturating_add(LEASE_SECS),
            ..self.clone()
        }
    }
}

/// What a process that wants to fetch does on finding `lease` at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Someone is fetching: wait for the result.
    Wait,
    /// Nobody is: take it over (replace it if unchanged) and fetch.
    TakeOver,
    /// The last fetch failed a moment ago: answer this.
    Failed { status: u16, message: String },
}

/// See [`Next`]. A stored outcome means the result should be there: a
/// caller that still finds no result fetches again (taking over).
pub fn next(lease: &Lease, now: u64) -> Next {
    match (&lease.holder, &lease.outcome) {
        (Some(_), _) if now < lease.until => Next::Wait,
        (Some(_), _) => Next::TakeOver,
        (None, Some(Outcome::Failed { status, message }))
            if now < lease.at.saturating_add(FAILURE_HELD_SECS) =>
        {
            Next::Failed {
                status: *status,
                message: message.clone(),
            }
        }
        (None, _) => Next::TakeOver,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(what: FillWhat) -> Fill {
        Fill {
            host: UpstreamHost::parse("registry.example.test").unwrap(),
            namespace: "hashicorp".into(),
            name: "null".into(),
            what,
        }
    }

    #[test]
    fn each_fill_has_its_own_key() {
        let keys = [
            fill(FillWhat::ProviderList).key(),
            fill(FillWhat::ProviderVersion {
                version: "1.0.0".into(),
            })
            .key(),
            fill(FillWhat::ProviderArchive {
                version: "1.0.0".into(),
                platform: "linux_amd64".into(),
            })
            .key(),
        ];
        assert_eq!(
            keys,
            [
                "providers registry.example.test/hashicorp/null versions",
                "providers registry.example.test/hashicorp/null 1.0.0",
                "providers registry.example.test/hashicorp/null 1.0.0 linux_amd64",
            ]
        );
    }

    #[test]
    fn a_lease_is_waited_for_taken_over_or_its_failure_answered() {
        let held = Lease::taken("x", "a", 100);
        assert_eq!(next(&held, 100), Next::Wait);
        assert_eq!(next(&held, 159), Next::Wait);
        assert_eq!(next(&held, 160), Next::TakeOver, "its holder died");
        let renewed = held.renewed(150);
        assert_eq!(next(&renewed, 200), Next::Wait);
        let failed = held.released(
            Outcome::Failed {
                status: 502,
                message: "bad signature".into(),
            },
            120,
        );
        assert_eq!(
            next(&failed, 125),
            Next::Failed {
                status: 502,
                message: "bad signature".into()
            }
        );
        assert_eq!(next(&failed, 130), Next::TakeOver, "tried again later");
        let stored = held.released(Outcome::Stored, 120);
        assert_eq!(next(&stored, 121), Next::TakeOver, "result gone: again");
        // As stored and read back.
        let text = serde_json::to_string(&failed).unwrap();
        assert_eq!(serde_json::from_str::<Lease>(&text).unwrap(), failed);
    }
}
