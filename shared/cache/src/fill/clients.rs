//! One origin client per upstream, made from its stored settings (and the
//! secret its `credentials` name), made again when an admin changes them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tfreg_model::upstream::{CredentialRef, OperatorPolicy, UpstreamRecord, is_file_name};
use tfreg_outbound::{Deployment, Lookup};

use super::FillError;
use crate::origin::{Bearer, Caps, Connect, OriginClient, OriginSettings, Services};

/// How long a discovery document is used before it is fetched again.
const SERVICES_FOR: Duration = Duration::from_secs(300);
/// How long a provider's download answer is reused: a version's fill asks
/// one platform's, and the archive fill of that platform that follows it
/// on a cold install uses the same answer (issue 35: it was asked twice).
/// Short, as the origin's download URLs may expire.
const ANSWER_FOR: Duration = Duration::from_secs(60);
/// Most download answers kept at once.
const MAX_ANSWERS: usize = 256;

struct Entry {
    /// The settings the client was made for (`updated_at` is in seconds:
    /// two changes within one would otherwise keep the older client).
    settings: tfreg_model::upstream::UpstreamSettings,
    client: Arc<OriginClient>,
    services: Option<(Instant, Services)>,
}

pub(crate) struct Clients {
    deployment: Deployment,
    /// The operator's allow-list, checked again before each client is made
    /// (settings saved before it, or by the operator elsewhere).
    policy: OperatorPolicy,
    lookup: Option<Arc<dyn Lookup>>,
    by_host: Mutex<HashMap<String, Entry>>,
    /// Download answers lately fetched, by [`Clients::answer_key`].
    answers: Mutex<HashMap<String, (Instant, crate::origin::DownloadAnswer)>>,
}

/// The bearer token `credentials` names: a `TFREG_UPSTREAM_CREDENTIAL_*`
/// variable, or a file of the operator's credentials directory (`dir`),
/// which must stay inside it once its links are followed. The caller has
/// checked the reference against the operator's policy; this checks the
/// file's name again. Never logged; the error (a name, a path) is for the
/// log and the audit only.
pub fn read_credentials(
    credentials: &CredentialRef,
    dir: Option<&std::path::Path>,
) -> Result<Bearer, String> {
    let token = match credentials {
        CredentialRef::Env(name) => std::env::var(name)
            .map_err(|_| format!("the credentials variable {name} is not set"))?,
        CredentialRef::File(name) => {
            let dir = dir
                .filter(|_| is_file_name(name))
                .ok_or_else(|| format!("the credentials file {name:?} is not allowed"))?;
            let inside = |d: &std::path::Path| {
                let d = d.canonicalize()?;
                let file = d.join(name).canonicalize()?;
                if file.starts_with(&d) {
                    std::fs::read_to_string(file)
                } else {
                    Err(std::io::Error::other(
                        "it leads out of the credentials directory",
                    ))
                }
            };
            inside(dir).map_err(|e| {
                format!(
                    "reading the credentials file {name} in {}: {e}",
                    dir.display()
                )
            })?
        }
        CredentialRef::Ssm(name) => {
            return Err(format!(
                "the credentials parameter {name}: SSM parameters are read by no function"
            ));
        }
    };
    let token = token.trim();
    if token.is_empty() {
        return Err("the upstream's credentials are empty".into());
    }
    Ok(Bearer::new(token))
}

impl Clients {
    pub(crate) fn new(deployment: Deployment) -> Self {
        Clients {
            deployment,
            policy: OperatorPolicy::default(),
            lookup: None,
            by_host: Mutex::default(),
            answers: Mutex::default(),
        }
    }

    pub(crate) fn with_policy(mut self, policy: OperatorPolicy) -> Self {
        self.policy = policy;
        self
    }

    pub(crate) fn with_lookup(mut self, lookup: Arc<dyn Lookup>) -> Self {
        self.lookup = Some(lookup);
        self
    }

    /// The client of `upstream`, archives capped at `max_archive_bytes`.
    pub(crate) fn client(
        &self,
        upstream: &UpstreamRecord,
        max_archive_bytes: u64,
    ) -> Result<Arc<OriginClient>, FillError> {
        let host = upstream.hostname.to_string();
        let mut by_host = self.by_host.lock().expect("clients lock");
        if let Some(e) = by_host.get(&host)
            && e.settings == upstream.settings
        {
            return Ok(e.client.clone());
        }
        let s = &upstream.settings;
        self.policy
            .admits(&upstream.hostname, s)
            .map_err(|e| FillError::Setup(e.to_string()))?;
        let mut settings = OriginSettings::new(upstream.hostname.clone());
        settings.deployment = self.deployment;
        settings.caps = Caps {
            archive: s
                .max_archive_bytes
                .unwrap_or(max_archive_bytes)
                .min(max_archive_bytes),
            ..Caps::default()
        };
        if let Some(credentials) = &s.credentials {
            settings.credentials = Some(
                read_credentials(credentials, self.policy.credentials_dir.as_deref())
                    .map_err(|e| FillError::Setup(format!("{host}: {e}")))?,
            );
        }
        if let Some(c) = &s.connect {
            let to: BTreeMap<String, Vec<std::net::SocketAddr>> =
                c.to.iter()
                    .map(|(h, addrs)| (h.name().to_string(), addrs.clone()))
                    .collect();
            let allow_nets = c
                .allow_nets
                .iter()
                .filter_map(|n| String::from(*n).parse().ok())
                .collect();
            settings.connect = Some(Connect {
                to,
                ca_pem: c.ca_pem.as_ref().map(|p| p.as_bytes().to_vec()),
                allow_nets,
            });
        }
        // In AWS no `connect` address may be loopback or link-local.
        settings
            .check()
            .map_err(|e| FillError::Setup(format!("{host}: connect: {e}")))?;
        let made = match &self.lookup {
            Some(lookup) => OriginClient::with_lookup(settings, lookup.clone()),
            None => OriginClient::new(settings),
        }
        .map_err(|e| FillError::Setup(format!("{host}: {e}")))?;
        let client = Arc::new(made);
        by_host.insert(
            host,
            Entry {
                settings: upstream.settings.clone(),
                client: client.clone(),
                services: None,
            },
        );
        Ok(client)
    }

    /// The key of a download answer: the upstream's settings as made, and
    /// what was asked.
    pub(crate) fn answer_key(upstream: &UpstreamRecord, asked: &str) -> String {
        format!("{} {} {asked}", upstream.hostname, upstream.updated_at)
    }

    /// A download answer fetched less than [`ANSWER_FOR`] ago.
    pub(crate) fn kept_answer(&self, key: &str) -> Option<crate::origin::DownloadAnswer> {
        let answers = self.answers.lock().expect("answers lock");
        answers
            .get(key)
            .filter(|(at, _)| at.elapsed() < ANSWER_FOR)
            .map(|(_, a)| a.clone())
    }

    pub(crate) fn keep_answer(&self, key: String, answer: &crate::origin::DownloadAnswer) {
        let mut answers = self.answers.lock().expect("answers lock");
        answers.retain(|_, (at, _)| at.elapsed() < ANSWER_FOR);
        if answers.len() < MAX_ANSWERS {
            answers.insert(key, (Instant::now(), answer.clone()));
        }
    }

    /// The upstream's discovery document, fetched at most every few minutes.
    pub(crate) async fn services(
        &self,
        upstream: &UpstreamRecord,
        client: &OriginClient,
        deadline: tokio::time::Instant,
    ) -> Result<Services, FillError> {
        let host = upstream.hostname.to_string();
        if let Some(e) = self.by_host.lock().expect("clients lock").get(&host)
            && let Some((at, services)) = &e.services
            && at.elapsed() < SERVICES_FOR
        {
            return Ok(services.clone());
        }
        let services = client
            .discover(deadline)
            .await
            .map_err(|e| FillError::origin(&host, e))?;
        if let Some(e) = self.by_host.lock().expect("clients lock").get_mut(&host) {
            e.services = Some((Instant::now(), services.clone()));
        }
        Ok(services)
    }
}
