//! `POST /v1/auth/exchange`: a CI job's OIDC token (GitHub Actions, GitLab
//! CI, any allow-listed issuer) for a short-lived registry token that
//! publishes to the namespaces whose trust policies match the job's claims.
//! The token is verified by [`crate::ci::CiIssuers`]; which namespaces, and
//! the token, are `tfreg_model::exchange`'s; its `jti` is kept as used until
//! it expires (`tfreg_store::catalog::login::use_jti`), so it is exchanged
//! once. One CI identity holds a bounded number of live exchanged tokens
//! (`tfreg_store::catalog::tokens::hold_exchanged`: 429 past it). A bearer
//! token sent along is never looked at.

use http::{HeaderValue, StatusCode, header};
use tfreg_http::body::{Body, Response, json, read_body};
use tfreg_http::{Call, Error, Registry};
use tfreg_model::exchange::{
    ExchangeAnswer, ExchangeRequest, MAX_EXCHANGE_BODY, exchange_token, jti_key, trusted_namespaces,
};
use tfreg_model::oidc::LEEWAY_SECS;
use tfreg_model::token::{Actor, CiJob, Subject};
use tfreg_store::catalog::{login, sso, tokens};

use crate::ci::{CiIssuers, CiSettings};
use crate::error::ExchangeError;
use crate::issued::mark_issued;

/// The CI token exchange of one registry.
#[derive(Debug)]
pub struct Exchange {
    issuers: CiIssuers,
    settings: CiSettings,
}

impl Exchange {
    /// The exchange for `settings`' issuers, fetching their keys with
    /// `http` when first needed.
    pub fn new(settings: CiSettings, http: reqwest::Client) -> Self {
        Self {
            issuers: CiIssuers::new(&settings, http),
            settings,
        }
    }

    pub fn settings(&self) -> &CiSettings {
        &self.settings
    }

    /// Change how often an unknown `kid` fetches an issuer's keys again (tests).
    pub fn set_refetch_interval(&mut self, interval: std::time::Duration) {
        self.issuers.set_refetch_interval(interval);
    }

    /// The request's body, parsed and checked. A serde error is not
    /// repeated: it may quote what was sent, which may be the token.
    fn request(body: &[u8]) -> Result<ExchangeRequest, ExchangeError> {
        let request: ExchangeRequest = serde_json::from_slice(body).map_err(|e| {
            ExchangeError::BadRequest(format!(
                "the body must be JSON {{\"token\": \"<the CI job's OIDC token>\"}}, optionally with \"namespaces\": [\"NS\", ...] (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        Ok(request)
    }

    /// Verify, match, use the `jti`, issue.
    pub async fn exchange(
        &self,
        registry: &Registry,
        call: Call<'_>,
        body: Body,
    ) -> Result<Response, Error> {
        let body = read_body(call.headers, body, MAX_EXCHANGE_BODY).await?;
        Ok(self.issue(registry, &body).await?)
    }

    async fn issue(&self, registry: &Registry, body: &[u8]) -> Result<Response, ExchangeError> {
        let request = Self::request(body)?;
        let wanted = request
            .check()
            .map_err(|e| ExchangeError::BadRequest(e.0))?;
        let now = registry.now();
        let audience = self.settings.audience_for(&registry.config.public_url);
        let (who, claims) = self.issuers.verify(&request.token, audience, now).await?;
        let store = registry.items.as_ref();
        let records = sso::policies(store, None).await?;
        let trusted = trusted_namespaces(&records, &who.iss, &claims, wanted.as_ref())
            .inspect_err(|e| {
                tracing::info!(iss = who.iss, sub = who.sub, refused = %e, "CI token exchange refused");
            })?;
        let subject = Subject {
            iss: who.iss.clone(),
            sub: who.sub.clone(),
            name: None,
            email: None,
            ci: ci_job(&claims),
        };
        let new = exchange_token(&trusted, &subject, now, self.settings.token_ttl_secs);
        let until = new.expires_at.unwrap_or(now);
        // A place among the identity's live tokens first: when they are
        // all held (429), the jti is not used up and the job may retry.
        let holder = jti_key(&who.iss, &who.jti);
        let place = tokens::hold_exchanged(store, &subject, &holder, until, now).await?;
        let issued = async {
            // Used once, until it expires (after which its times refuse it).
            if !login::use_jti(store, &who.iss, &who.jti, who.exp + LEEWAY_SECS).await? {
                return Err(ExchangeError::Replayed);
            }
            let by = Actor {
                kind: "ci-exchange".into(),
                token_id: None,
                token_name: None,
            };
            Ok(tokens::create_issued(store, new, now, &by, Some(subject.clone())).await?)
        }
        .await;
        let (token, record) = match issued {
            Ok(issued) => issued,
            Err(e) => {
                if let Err(free) =
                    tokens::let_go_exchanged(store, &place, &holder, until, now).await
                {
                    tracing::warn!(error = %free, "cannot free the place of an exchange that issued nothing: it frees up when it expires");
                }
                return Err(e);
            }
        };
        let answer = ExchangeAnswer {
            token,
            token_id: record.id.clone(),
            expires_at: record.expires_at.unwrap_or(now),
            namespaces: trusted.namespaces.clone(),
            grants: record.grants.clone(),
        };
        let mut resp = json(StatusCode::OK, &answer);
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        let why = format!("by trust policies {}", trusted.policies.join(", "));
        mark_issued(&mut resp, &record, &subject, &why);
        Ok(resp)
    }
}

/// Longest repository or workflow kept on a token (claims are the
/// issuer's, verified, but shown in tables: bounded).
const MAX_CI_NAME: usize = 200;

/// The CI job a verified token's claims name, for usage counts: GitHub's
/// `repository` and workflow file (`workflow_ref`, the run's own workflow
/// in that repository, else `job_workflow_ref`, a reusable workflow's,
/// which may live elsewhere: then named whole); GitLab's `project_path`
/// and `ci_config_ref_uri`'s file. The ref it ran at is left out: a
/// workflow is one consumer whichever branch ran it. `None` for claims of
/// neither shape (the consumer is then named by the token's subject).
pub fn ci_job(claims: &serde_json::Map<String, serde_json::Value>) -> Option<CiJob> {
    let text = |name: &str| {
        claims
            .get(name)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
    };
    let bounded = |s: &str| -> String {
        s.chars()
            .filter(|c| !c.is_control())
            .take(MAX_CI_NAME)
            .collect()
    };
    let without_ref = |r: &str| r.rsplit_once('@').map_or(r, |(p, _)| p).to_string();
    if let Some(repository) = text("repository") {
        let workflow = text("workflow_ref").or(text("job_workflow_ref"))?;
        let workflow = without_ref(workflow);
        let workflow = workflow
            .strip_prefix(&format!("{repository}/"))
            .map_or(workflow.clone(), String::from);
        return Some(CiJob {
            repository: bounded(repository),
            workflow: bounded(&workflow),
        });
    }
    let project = text("project_path")?;
    let config = without_ref(text("ci_config_ref_uri")?);
    let file = config.split_once("//").map_or(config.as_str(), |(_, f)| f);
    Some(CiJob {
        repository: bounded(project),
        workflow: bounded(file),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_ci_job_is_its_repository_and_workflow_file_without_the_ref() {
        let job = |v| ci_job(&claims(v)).map(|j| (j.repository, j.workflow));
        let gh = serde_json::json!({
            "repository": "acme/app",
            "workflow_ref": "acme/app/.github/workflows/release.yml@refs/tags/v1.2.0",
            "job_workflow_ref": "acme/shared/.github/workflows/tf.yml@refs/heads/main",
        });
        assert_eq!(
            job(gh),
            Some(("acme/app".into(), ".github/workflows/release.yml".into()))
        );
        // Only a reusable workflow's ref: named whole (another repository).
        let reusable = serde_json::json!({
            "repository": "acme/app",
            "job_workflow_ref": "acme/shared/.github/workflows/tf.yml@refs/heads/main",
        });
        assert_eq!(
            job(reusable),
            Some((
                "acme/app".into(),
                "acme/shared/.github/workflows/tf.yml".into()
            ))
        );
        let gl = serde_json::json!({
            "project_path": "acme-group/app",
            "ci_config_ref_uri": "gitlab.com/acme-group/app//.gitlab-ci.yml@refs/heads/main",
        });
        assert_eq!(
            job(gl),
            Some(("acme-group/app".into(), ".gitlab-ci.yml".into()))
        );
        assert_eq!(job(serde_json::json!({"sub": "job"})), None);
        assert_eq!(job(serde_json::json!({"repository": "acme/app"})), None);
        let odd = serde_json::json!({
            "repository": "acme/\u{7}app",
            "workflow_ref": "x".repeat(500),
        });
        let (repo, workflow) = job(odd).unwrap();
        assert_eq!(repo, "acme/app");
        assert_eq!(workflow.len(), MAX_CI_NAME);
    }

    #[test]
    fn a_malformed_body_is_not_quoted_back() {
        for body in [
            &br#"{"token": "a.b.c", "namespaces": "eyJhbGciOi.secret"}"#[..],
            br#"{"token": ["eyJhbGciOi.secret"]}"#,
            b"eyJhbGciOi.secret",
        ] {
            let e = Exchange::request(body).unwrap_err();
            assert!(matches!(e, ExchangeError::BadRequest(_)));
            assert!(!e.to_string().contains("secret"), "{e}");
        }
        assert!(Exchange::request(br#"{"token": "a.b.c"}"#).is_ok());
    }
}
