//! The functions' request line: one lean JSON object, measured beside the
//! format they wrote before.

use std::sync::{Arc, Mutex};

use tfreg_testkit::TestRegistry;

/// The Lambda functions' log format before it was made lean (the event
/// under `fields`, every span of the invocation repeated on each line):
/// the baseline of the figure the test prints.
fn before<W>(writer: W) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_current_span(false)
        .with_target(false)
        .without_time()
        .with_writer(writer)
        .finish()
}

/// The log a request to `path` writes through the subscriber `make`
/// builds on a writer, inside a span like the Lambda runtime's for each
/// invocation.
fn log_of<S, F>(path: &'static str, make: F) -> (u16, String)
where
    S: tracing::Subscriber + Send + Sync + 'static,
    F: FnOnce(SinkWriter) -> S,
{
    let buf = Arc::new(Mutex::new(Vec::new()));
    let writer: SinkWriter = {
        let buf = buf.clone();
        Box::new(move || Sink(buf.clone()))
    };
    let subscriber = make(writer);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = runtime.block_on(TestRegistry::embedded());
    let status = tracing::subscriber::with_default(subscriber, || {
        let span = tracing::info_span!(
            "Lambda runtime invoke",
            requestId = "8476a536-e9f4-11e8-9739-2dfe598c3fcd",
            xrayTraceId =
                "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1"
        );
        let _entered = span.enter();
        runtime.block_on(registry.get(path)).status.as_u16()
    });
    (
        status,
        String::from_utf8(buf.lock().unwrap().clone()).unwrap(),
    )
}

/// The functions' log as they write it.
fn lambda_log_of(path: &'static str) -> (u16, String) {
    log_of(path, |w| {
        tfreg_lambda::log_subscriber(tfreg_lambda::log_filter(|_| None), w)
    })
}

type SinkWriter = Box<dyn Fn() -> Sink + Send + Sync>;

struct Sink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_lambda_request_line_is_one_lean_json_object() {
    let path = "/v1/providers/hashicorp/null/versions";
    let (status, log) = lambda_log_of(path);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 1, "one line per request:\n{log}");
    eprintln!(
        "FIGURE lambda request line: {} bytes: {}",
        lines[0].len() + 1,
        lines[0]
    );
    let line: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    let fields = line.as_object().unwrap();
    let mut keys: Vec<&str> = fields.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "endpoint",
            "latency_ms",
            "level",
            "message",
            "method",
            "path",
            "request_id",
            "status"
        ],
        "the request's fields, each once, at the top level; no spans: {log}"
    );
    assert_eq!(line["message"], "request");
    assert_eq!(line["path"], path);
    assert_eq!(line["endpoint"], "provider-versions");
    assert_eq!(line["status"], status);
    assert_eq!(line["request_id"].as_str().map(str::len), Some(16));
    let (_, old) = log_of(path, before);
    eprintln!(
        "FIGURE lambda request line: {} bytes before, {} after",
        old.len(),
        log.len()
    );
    assert!(
        log.len() * 2 < old.len(),
        "the lean line is well under half the old one: {} vs {}",
        log.len(),
        old.len()
    );
}
