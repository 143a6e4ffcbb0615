//! `tfreg serve`'s metrics (issue 38): Prometheus counters and histograms
//! of every request, fill and publish ([`Prometheus`], the registry's
//! [`Recorder`]), served by a listener of their own, `--metrics-listen`
//! ([`MetricsArgs`]), off by default: plain HTTP, `GET /metrics` and nothing
//! else, in the text exposition format (OpenMetrics, as the
//! prometheus-client crate encodes it).
//!
//! Names: `tfreg_requests_total{endpoint,status_class}`,
//! `tfreg_request_duration_seconds{endpoint}`,
//! `tfreg_fills_total{kind,outcome}`, `tfreg_fill_duration_seconds{kind}`,
//! `tfreg_publishes_total{kind,outcome}`. Every label is bounded: an
//! endpoint's name (never a path), a status class, a kind, an outcome.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use clap::Args;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use tfreg_http::metrics::{FillRecord, PublishRecord, Recorder, RequestRecord};

use crate::cli_error::Result;

/// The text exposition's media type, as the crate's examples serve it.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics (requests by endpoint and status class,
    /// latency, fills and publishes by kind and outcome) at
    /// `http://ADDR/metrics`; off by default. A listener of its own, plain
    /// HTTP, meant for loopback or a private interface, and not an admin
    /// route of the registry's: a scraper would otherwise need an admin
    /// token, the registry's most powerful secret, in its configuration.
    /// The metrics carry no names, versions or identities, and this
    /// listener answers nothing else.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<SocketAddr>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    status_class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabel {
    endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    kind: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Seconds a request takes: 5 ms to 10 s (Prometheus's default buckets).
fn request_buckets() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// Seconds a fill takes: an origin's metadata in a second, an archive in
/// minutes (an upstream's fill timeout is at most 15 minutes).
fn fill_buckets() -> Histogram {
    Histogram::new([
        0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0,
    ])
}

/// The counters and histograms, and their registry.
pub struct Prometheus {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    request_duration: Histograms<EndpointLabel>,
    fills: Family<OutcomeLabels, Counter>,
    fill_duration: Histograms<KindLabel>,
    publishes: Family<OutcomeLabels, Counter>,
}

impl Default for Prometheus {
    fn default() -> Self {
        Self::new()
    }
}

impl Prometheus {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tfreg");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "requests",
            "Requests answered, by endpoint and status class",
            requests.clone(),
        );
        let request_duration: Histograms<EndpointLabel> =
            Family::new_with_constructor(request_buckets);
        registry.register_with_unit(
            "request_duration",
            "Time to answer a request, by endpoint",
            Unit::Seconds,
            request_duration.clone(),
        );
        let fills = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "fills",
            "Pull-through cache fills of a version, by kind and outcome",
            fills.clone(),
        );
        let fill_duration: Histograms<KindLabel> = Family::new_with_constructor(fill_buckets);
        registry.register_with_unit(
            "fill_duration",
            "Time a fill took, by kind",
            Unit::Seconds,
            fill_duration.clone(),
        );
        let publishes = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "publishes",
            "Publishes completed, by kind and outcome",
            publishes.clone(),
        );
        Prometheus {
            registry,
            requests,
            request_duration,
            fills,
            fill_duration,
            publishes,
        }
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

impl Recorder for Prometheus {
    fn request(&self, record: &RequestRecord) {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint: record.endpoint,
                status_class: record.status_class(),
            })
            .inc();
        self.request_duration
            .get_or_create(&EndpointLabel {
                endpoint: record.endpoint,
            })
            .observe(record.latency.as_secs_f64());
    }

    fn fill(&self, record: &FillRecord) {
        self.fills
            .get_or_create(&OutcomeLabels {
                kind: record.kind.name(),
                outcome: record.outcome.name(),
            })
            .inc();
        self.fill_duration
            .get_or_create(&KindLabel {
                kind: record.kind.name(),
            })
            .observe(record.duration.as_secs_f64());
    }

    fn publish(&self, record: &PublishRecord) {
        self.publishes
            .get_or_create(&OutcomeLabels {
                kind: record.kind.name(),
                outcome: record.outcome.name(),
            })
            .inc();
    }
}

/// The metrics listener's routes: `GET /metrics` (HEAD too, as axum
/// answers it), else 404; another method on `/metrics` 405.
pub fn router(metrics: Arc<Prometheus>) -> axum::Router {
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], metrics.encode()) }
            }),
        )
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                "not found: this listener serves only GET /metrics\n",
            )
                .into_response()
        })
}

/// The registry's recorder: with `--metrics-listen`, [`Prometheus`], its
/// listener bound now (a port in use fails start-up) and served until the
/// process ends; without it, nothing is recorded.
pub async fn start(args: &MetricsArgs) -> Result<Arc<dyn Recorder>> {
    let Some(addr) = args.metrics_listen else {
        return Ok(Arc::new(tfreg_http::metrics::NoMetrics));
    };
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr} (--metrics-listen): {e}"))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let metrics = Arc::new(Prometheus::new());
    let app = router(metrics.clone());
    tracing::info!(metrics_listen = %bound, "serving Prometheus metrics at http://{bound}/metrics");
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "the metrics listener stopped");
        }
    });
    Ok(metrics)
}

#[cfg(test)]
mod tests;
