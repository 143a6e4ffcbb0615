//! The functions' metrics (issue 38): CloudWatch embedded metric format
//! (EMF). One JSON line per request, per fill and per publish on stdout,
//! where Lambda's log agent sends it to CloudWatch Logs and CloudWatch
//! extracts the metrics from it: no API call, nothing on the request's path
//! but one `write`.
//!
//! A line is `{"_aws": {"Timestamp": ms, "CloudWatchMetrics": [{"Namespace",
//! "Dimensions": [["Endpoint"]], "Metrics": [{"Name", "Unit"}]}]}, ...}` with
//! each metric's value and each dimension's value as top-level members
//! ("Specification: Embedded metric format", AWS CloudWatch user guide).
//! The tracing JSON lines put an event's fields at their top level too, but
//! cannot hold the nested `_aws` object: these lines are written whole,
//! each by one `write_all` of the line and its newline on stdout (which
//! holds stdout's lock for the call, so a tracing line never lands inside
//! one).
//!
//! Names (COMMON to the template's alarms and dashboard, which read them):
//! requests by `Endpoint` (`Requests`, `ClientErrors`, `ServerErrors`,
//! `Latency`, `ColdStarts`), fills and publishes by `Kind` (`Fills`,
//! `FillFailures`, `FillDuration`; `Publishes`, `PublishFailures`). The
//! dimensions are bounded (an endpoint's name, a package kind): every other
//! fact (status, outcome, function, request id) is a property, searchable
//! in Logs Insights and billed as no metric.

use std::io::Write;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};
use tfreg_http::metrics::{FillRecord, PublishOutcome, PublishRecord, Recorder, RequestRecord};

use crate::config::METRICS_NAMESPACE;

/// The namespace when [`METRICS_NAMESPACE`] is unset (the template sets
/// `tfreg/<stack name>`).
pub const DEFAULT_NAMESPACE: &str = "tfreg";

tokio::task_local! {
    /// The Lambda invocation's request id (the `RequestId` of its REPORT
    /// line), while the pipeline answers it (set by `response::run`).
    pub(crate) static LAMBDA_REQUEST_ID: String;
}

/// Where the lines go: stdout in a function, a buffer in tests.
type Sink = Box<dyn Fn(&[u8]) + Send + Sync>;

/// The EMF [`Recorder`].
pub struct Emf {
    namespace: String,
    /// `AWS_LAMBDA_FUNCTION_NAME`.
    function: Option<String>,
    clock: fn() -> u64,
    sink: Sink,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn stdout(line: &[u8]) {
    // One write of the whole line: a lost metric line is no reason to fail.
    let _ = std::io::stdout().write_all(line);
}

impl Emf {
    /// From the function's environment: [`METRICS_NAMESPACE`] (else
    /// [`DEFAULT_NAMESPACE`]) and `AWS_LAMBDA_FUNCTION_NAME`; lines to stdout.
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Self {
        let namespace = get(METRICS_NAMESPACE)
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        Emf {
            namespace,
            function: get("AWS_LAMBDA_FUNCTION_NAME").filter(|f| !f.is_empty()),
            clock: now_ms,
            sink: Box::new(stdout),
        }
    }

    /// Lines to `sink`, stamped by `clock` (tests).
    pub fn with_sink(
        mut self,
        clock: fn() -> u64,
        sink: impl Fn(&[u8]) + Send + Sync + 'static,
    ) -> Self {
        self.clock = clock;
        self.sink = Box::new(sink);
        self
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    fn emit(&self, line: Value) {
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        (self.sink)(&bytes);
    }

    fn properties(&self) -> Map<String, Value> {
        let mut p = Map::new();
        if let Some(f) = &self.function {
            p.insert("Function".into(), f.clone().into());
        }
        p
    }
}

fn millis(d: Duration) -> f64 {
    // To the microsecond, as the request log line.
    (d.as_secs_f64() * 1e6).round() / 1000.0
}

/// One EMF line: its `_aws` metadata for one metric set of `dimension`,
/// then `values` (the dimension's value, the metrics' values, properties)
/// at the top level.
pub fn line(
    namespace: &str,
    timestamp_ms: u64,
    dimension: &str,
    metrics: &[(&str, &str)],
    values: Map<String, Value>,
) -> Value {
    let definitions: Vec<Value> = metrics
        .iter()
        .map(|(name, unit)| json!({"Name": name, "Unit": unit}))
        .collect();
    let mut top = Map::new();
    top.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [[dimension]],
                "Metrics": definitions,
            }],
        }),
    );
    top.extend(values);
    Value::Object(top)
}

const COUNT: &str = "Count";
const MILLISECONDS: &str = "Milliseconds";

/// A request's line.
pub fn request_line(
    namespace: &str,
    timestamp_ms: u64,
    record: &RequestRecord,
    mut properties: Map<String, Value>,
) -> Value {
    let class = record.status_class();
    properties.insert("Endpoint".into(), record.endpoint.into());
    properties.insert("Requests".into(), 1.into());
    properties.insert("ClientErrors".into(), u8::from(class == "4xx").into());
    properties.insert("ServerErrors".into(), u8::from(class == "5xx").into());
    properties.insert("Latency".into(), millis(record.latency).into());
    properties.insert("ColdStarts".into(), u8::from(record.cold_start).into());
    properties.insert("Status".into(), record.status.into());
    properties.insert("StatusClass".into(), class.into());
    line(
        namespace,
        timestamp_ms,
        "Endpoint",
        &[
            ("Requests", COUNT),
            ("ClientErrors", COUNT),
            ("ServerErrors", COUNT),
            ("Latency", MILLISECONDS),
            ("ColdStarts", COUNT),
        ],
        properties,
    )
}

/// A fill's line.
pub fn fill_line(
    namespace: &str,
    timestamp_ms: u64,
    record: &FillRecord,
    mut properties: Map<String, Value>,
) -> Value {
    properties.insert("Kind".into(), record.kind.name().into());
    properties.insert("Fills".into(), 1.into());
    properties.insert(
        "FillFailures".into(),
        u8::from(record.outcome.is_failure()).into(),
    );
    properties.insert("FillDuration".into(), millis(record.duration).into());
    properties.insert("Outcome".into(), record.outcome.name().into());
    line(
        namespace,
        timestamp_ms,
        "Kind",
        &[
            ("Fills", COUNT),
            ("FillFailures", COUNT),
            ("FillDuration", MILLISECONDS),
        ],
        properties,
    )
}

/// A publish's line.
pub fn publish_line(
    namespace: &str,
    timestamp_ms: u64,
    record: &PublishRecord,
    mut properties: Map<String, Value>,
) -> Value {
    let failed = record.outcome != PublishOutcome::Published;
    properties.insert("Kind".into(), record.kind.name().into());
    properties.insert("Publishes".into(), 1.into());
    properties.insert("PublishFailures".into(), u8::from(failed).into());
    properties.insert("Outcome".into(), record.outcome.name().into());
    line(
        namespace,
        timestamp_ms,
        "Kind",
        &[("Publishes", COUNT), ("PublishFailures", COUNT)],
        properties,
    )
}

/// The function's recorder: [`Emf::from_env`], lines to stdout.
pub fn recorder() -> std::sync::Arc<dyn Recorder> {
    std::sync::Arc::new(Emf::from_env(|name| std::env::var(name).ok()))
}

impl Recorder for Emf {
    fn request(&self, record: &RequestRecord) {
        let mut properties = self.properties();
        if let Ok(id) = LAMBDA_REQUEST_ID.try_with(String::clone)
            && !id.is_empty()
        {
            properties.insert("RequestId".into(), id.into());
        }
        self.emit(request_line(
            &self.namespace,
            (self.clock)(),
            record,
            properties,
        ));
    }

    fn fill(&self, record: &FillRecord) {
        let line = fill_line(&self.namespace, (self.clock)(), record, self.properties());
        self.emit(line);
    }

    fn publish(&self, record: &PublishRecord) {
        let line = publish_line(&self.namespace, (self.clock)(), record, self.properties());
        self.emit(line);
    }
}

#[cfg(test)]
mod tests;
