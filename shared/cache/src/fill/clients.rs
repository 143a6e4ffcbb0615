//! One origin client per upstream, made from its stored settings (and the
//! secret its `credentials` name), made again when an admin changes them.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tfreg_model::upstream::{CredentialRef, UpstreamRecord};
use tfreg_outbound::{Deployment, Lookup};

use super::FillError;
use crate::origin::{Bearer, Caps, Connect, OriginClient, OriginSettings, Services};

/// How long a discovery document is used before it is fetched again.
const SERVICES_FOR: Duration = Duration::from_secs(300);

struct Entry {
    /// The settings' `updated_at` the client was made for.
    updated_at: u64,
    client: Arc<OriginClient>,
    services: Option<(Instant, Services)>,
}

pub(crate) struct Clients {
    deployment: Deployment,
    lookup: Option<Arc<dyn Lookup>>,
    by_host: Mutex<HashMap<String, Entry>>,
}

/// The bearer token `credentials` names: a variable or a file of `tfreg
/// serve` (an SSM parameter is the Lambda functions'). Never logged.
pub fn read_credentials(credentials: &CredentialRef) -> Result<Bearer, String> {
    let token = match credentials {
        CredentialRef::Env(name) => std::env::var(name)
            .map_err(|_| format!("the credentials variable {name} is not set"))?,
        CredentialRef::File(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("reading the credentials file {path}: {e}"))?,
        CredentialRef::Ssm(name) => {
            return Err(format!(
                "the credentials parameter {name} is read by the Lambda functions only"
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
            lookup: None,
            by_host: Mutex::default(),
        }
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
            && e.updated_at == upstream.updated_at
        {
            return Ok(e.client.clone());
        }
        let s = &upstream.settings;
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
                read_credentials(credentials)
                    .map_err(|e| FillError::Refused(format!("{host}: {e}")))?,
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
        let made = match &self.lookup {
            Some(lookup) => OriginClient::with_lookup(settings, lookup.clone()),
            None => OriginClient::new(settings),
        }
        .map_err(|e| FillError::Refused(format!("{host}: {e}")))?;
        let client = Arc::new(made);
        by_host.insert(
            host,
            Entry {
                updated_at: upstream.updated_at,
                client: client.clone(),
                services: None,
            },
        );
        Ok(client)
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
