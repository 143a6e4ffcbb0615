//! The registry's state, shared by every entry point: storage backends, the URL
//! signer and configuration.

use std::sync::Arc;

use tfreg_model::address::Hostname;
use tfreg_model::blob_key::BlobKey;
use tfreg_store::{BlobStore, Digest, ItemStore};
use tokio::sync::OnceCell;

use crate::answer_cache::{Answer, AnswerCache};
use crate::error::Error;
use crate::signed_url::{Grant, UrlSigner};
use crate::token_cache::TokenCache;

/// Default lifetime of archive download and upload URLs, in seconds.
pub const DEFAULT_URL_TTL_SECS: u64 = 300;
/// Longest lifetime an operator may give archive URLs: a day. Archive URLs
/// carry no token, so a leaked one works until it expires; Terraform uses a
/// URL within seconds of getting it. (S3 presigned URLs could last 7 days.)
pub const MAX_URL_TTL_SECS: u64 = 86_400;

/// Limits and settings of one registry.
#[derive(Debug, Clone)]
pub struct Config {
    /// The hostname users write in provider and module addresses (`registry.example.com`, `localhost:8443`).
    pub hostname: Hostname,
    /// Base URL archive links are built on, without a trailing slash (`https://registry.example.com`).
    pub public_url: String,
    /// Lifetime of archive URLs, in seconds.
    pub url_ttl_secs: u64,
    /// When true, reads need no token (discovery and signed archive URLs
    /// never do). Off by default: a registry is private unless its operator
    /// opens it (`tfreg serve` opens it unless given `--private`).
    pub anonymous_reads: bool,
    /// When true, a provider release is published only if a key registered
    /// for its namespace verifies it, in every namespace (without it, only in
    /// namespaces that have registered keys).
    pub require_namespace_keys: bool,
    /// How long a process trusts a token it verified: the bound on how long a
    /// token revoked by another process keeps working here.
    pub token_cache_secs: u64,
    /// Largest archive accepted at publish.
    pub max_archive_bytes: u64,
    /// `terraform login`'s service, advertised by discovery where an
    /// identity provider is configured (none: no login.v1).
    pub login_v1: Option<tfreg_model::protocol::LoginV1>,
    /// The CI issuers the exchange accepts tokens from, where this process
    /// knows them (`tfreg serve`, the admin and auth functions): a trust
    /// policy for another is refused. None: not known (the CLI on the
    /// stores directly), not checked.
    pub ci_issuers: Option<Vec<String>>,
    /// What an upstream's credentials and `connect` settings may name: the
    /// operator's allow-list (default: variables under the prefix only).
    pub upstream_policy: tfreg_model::upstream::OperatorPolicy,
    /// The identity provider's name on the UI's sign-in page ("Sign in with
    /// NAME"), where one is configured (`tfreg_model::sso::display_name`).
    pub sso_name: Option<String>,
    /// How archive URLs are handed out (default: the registry's own).
    pub archive_delivery: ArchiveDelivery,
}

/// How a registry hands out archive URLs ([`Registry::read_url`]).
#[derive(Debug, Clone, Default)]
pub enum ArchiveDelivery {
    /// The registry's own signed `/v1/blobs/...` URLs, answered by the
    /// blob endpoint (in AWS: a presigned S3 redirect). `tfreg serve`'s
    /// only way, and AWS's unless configured otherwise.
    #[default]
    Presigned,
    /// CloudFront signed URLs ([`crate::edge_url`]) for published files;
    /// files the pull-through cache keeps keep the registry's own URLs
    /// (one may not be in the bucket yet: the blob endpoint fetches it,
    /// then redirects to the edge).
    #[cfg(feature = "cloudfront")]
    CloudFront(Arc<crate::edge_url::CloudFrontSigner>),
}

impl Config {
    /// Defaults for a registry at `hostname`.
    pub fn new(hostname: Hostname) -> Self {
        Self {
            public_url: format!("https://{hostname}"),
            hostname,
            url_ttl_secs: DEFAULT_URL_TTL_SECS,
            anonymous_reads: false,
            require_namespace_keys: false,
            token_cache_secs: crate::token_cache::DEFAULT_TOKEN_CACHE_SECS,
            max_archive_bytes: 2 * 1024 * 1024 * 1024,
            login_v1: None,
            ci_issuers: None,
            upstream_policy: Default::default(),
            sso_name: None,
            archive_delivery: ArchiveDelivery::Presigned,
        }
    }
}

fn token_cache(config: &Config) -> Arc<TokenCache> {
    Arc::new(TokenCache::new(std::time::Duration::from_secs(
        config.token_cache_secs,
    )))
}

pub use tfreg_model::unix_now;

/// Under what an answer about to be made may be kept, as
/// [`Registry::keeping`] reads it: its key, the store's change counter and
/// the second.
#[derive(Debug)]
pub struct Keeping {
    key: String,
    counter: u64,
    second: u64,
}

/// Everything a handler needs.
#[derive(Clone)]
pub struct Registry {
    pub items: Arc<dyn ItemStore>,
    pub blobs: Arc<dyn BlobStore>,
    /// Set at start by writers; read from the item store on first use by
    /// read-only functions (which may not create it).
    signer: Arc<OnceCell<UrlSigner>>,
    pub config: Config,
    /// Tokens verified lately (see [`crate::token_cache`]).
    pub tokens: Arc<TokenCache>,
    /// Answers made lately, while still current (see [`crate::answer_cache`]);
    /// a clone of the registry starts with none.
    pub answers: AnswerCache,
    /// What fetches a miss of the pull-through cache (none: never fetch).
    pub filler: Option<Arc<dyn crate::fill::Filler>>,
    /// Where requests, fills and publishes are recorded (default: nowhere).
    pub metrics: Arc<dyn crate::metrics::Recorder>,
    /// Where downloads are counted (default: nowhere).
    pub usage: Arc<dyn crate::usage::UsageSink>,
    clock: fn() -> u64,
}

impl Registry {
    pub fn new(
        items: Arc<dyn ItemStore>,
        blobs: Arc<dyn BlobStore>,
        signer: UrlSigner,
        config: Config,
    ) -> Self {
        Self {
            items,
            blobs,
            signer: Arc::new(OnceCell::new_with(Some(signer))),
            tokens: token_cache(&config),
            answers: AnswerCache::default(),
            config,
            filler: None,
            metrics: Arc::new(crate::metrics::NoMetrics),
            usage: Arc::new(crate::usage::NoUsage),
            clock: unix_now,
        }
    }

    /// A registry whose URL signer is read from the item store when first
    /// needed and never created here: for functions that may only read the
    /// table. Until the secret exists (the first publish makes it) no archive
    /// URL has been issued, so none can be valid.
    pub fn with_stored_signer(
        items: Arc<dyn ItemStore>,
        blobs: Arc<dyn BlobStore>,
        config: Config,
    ) -> Self {
        Self {
            items,
            blobs,
            signer: Arc::new(OnceCell::new()),
            tokens: token_cache(&config),
            answers: AnswerCache::default(),
            config,
            filler: None,
            metrics: Arc::new(crate::metrics::NoMetrics),
            usage: Arc::new(crate::usage::NoUsage),
            clock: unix_now,
        }
    }

    /// The URL signer, or `None` while no secret exists (a missing secret is
    /// not cached: the next call looks again).
    /// Callers that ask while a read is in flight (a function's warm-up at
    /// init, another request) wait for that read instead of making their own.
    pub async fn signer_if_ready(&self) -> Result<Option<&UrlSigner>, Error> {
        /// Why no signer was set: the secret is absent (not cached), or the
        /// store failed.
        enum NotSet {
            Absent,
            Store(Error),
        }
        let items = self.items.as_ref();
        let read = self
            .signer
            .get_or_try_init(|| async move {
                match crate::signed_url::read_signer(items).await {
                    Ok(Some(signer)) => Ok(signer),
                    Ok(None) => Err(NotSet::Absent),
                    Err(e) => Err(NotSet::Store(e.into())),
                }
            })
            .await;
        match read {
            Ok(signer) => Ok(Some(signer)),
            Err(NotSet::Absent) => Ok(None),
            Err(NotSet::Store(e)) => Err(e),
        }
    }

    /// The URL signer; its absence is a server fault here (an archive exists,
    /// so a publish made the secret, unless someone deleted it).
    pub async fn signer(&self) -> Result<&UrlSigner, Error> {
        self.signer_if_ready().await?.ok_or_else(|| {
            Error::internal(
                "the URL signing secret is missing from the table: publish once, or run `tfreg aws init`",
            )
        })
    }

    /// Replace the clock (tests of expiry).
    /// This registry, fetching cache misses with `filler`.
    pub fn with_filler(mut self, filler: Arc<dyn crate::fill::Filler>) -> Self {
        self.filler = Some(filler);
        self
    }

    /// This registry, recording to `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<dyn crate::metrics::Recorder>) -> Self {
        self.metrics = metrics;
        self
    }

    /// This registry, counting downloads in `usage`.
    pub fn with_usage(mut self, usage: Arc<dyn crate::usage::UsageSink>) -> Self {
        self.usage = usage;
        self
    }

    pub fn with_clock(mut self, clock: fn() -> u64) -> Self {
        self.clock = clock;
        self
    }

    /// Unix seconds now.
    pub fn now(&self) -> u64 {
        (self.clock)()
    }

    /// How an answer about to be made may be kept ([`crate::answer_cache`]):
    /// under the key `key` makes, the store's change counter, read before
    /// the reads that make the answer (what they return is at least that
    /// new), and the second. `None` where the store has no counter
    /// (DynamoDB): nothing is kept, and no key is made.
    pub fn keeping(&self, key: impl FnOnce() -> String) -> Option<Keeping> {
        let counter = self.items.change_counter()?;
        Some(Keeping {
            key: key(),
            counter,
            second: self.now(),
        })
    }

    /// The answer kept under `keeping`, if any.
    pub fn kept_answer(&self, keeping: Option<&Keeping>) -> Option<Answer> {
        let k = keeping?;
        self.answers.get(&k.key, k.counter, k.second)
    }

    /// Keep `answer` under `keeping`, unless the second has ended since:
    /// signed URLs name their expiry, so an answer made across a second's
    /// end is not that second's answer.
    pub fn keep_answer(&self, keeping: Option<&Keeping>, answer: &Answer) {
        if let Some(k) = keeping.filter(|k| self.now() == k.second) {
            self.answers.put(&k.key, k.counter, k.second, answer);
        }
    }

    /// A signed URL to the registry's own blob endpoint granting `grant`.
    pub async fn blob_url(&self, grant: Grant<'_>) -> Result<String, Error> {
        let key = match grant {
            Grant::Read(key) | Grant::Write(key, _) => key,
        };
        let expires = self.now() + self.config.url_ttl_secs;
        let query = self.signer().await?.sign(grant, expires);
        let path = tfreg_model::router::Route::Blob(key.clone()).path();
        Ok(format!("{}{path}?{query}", self.config.public_url))
    }

    /// A download URL for an archive, with the registry's URL lifetime:
    /// as [`Config::archive_delivery`] says (a CloudFront URL's expiry is
    /// rounded down to a step, `edge_url::expiry`).
    pub async fn read_url(&self, key: &BlobKey) -> Result<String, Error> {
        #[cfg(feature = "cloudfront")]
        if let ArchiveDelivery::CloudFront(edge) = &self.config.archive_delivery
            && !key.is_cached()
        {
            let expires = crate::edge_url::expiry(self.now(), self.config.url_ttl_secs);
            return Ok(edge.archive_url(key, expires));
        }
        self.blob_url(Grant::Read(key)).await
    }

    /// An upload URL for one slot, for exactly the declared bytes.
    pub async fn upload_url(&self, key: &BlobKey, expected: &Digest) -> Result<String, Error> {
        self.blob_url(Grant::Write(key, expected)).await
    }
}
