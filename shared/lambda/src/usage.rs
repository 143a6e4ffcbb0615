//! Download counts in a Lambda function (issue 38): tallied in memory
//! during the invocation ([`Tallied`]) and written after the response is
//! sent, before the sandbox is frozen, by an internal Lambda extension in
//! this process (the Extensions API): registered for `INVOKE` at init, on
//! each `INVOKE` it waits for the handler's "done", flushes, then asks for
//! the next event, so Lambda holds the sandbox until the counts are written
//! while API Gateway already has the answer.
//!
//! Not the `lambda-extension` crate: it links a hyper server (for the Logs
//! and Telemetry APIs), chrono and more into the read function for two
//! requests that the runtime's own client ([`lambda_runtime_api_client`],
//! already in every function's graph through lambda_http) makes as well.
//!
//! A runtime API without the Extensions API (registration refused, or not
//! answering): the counts are written before the handler returns instead
//! (the answer waits for the writes), said once in the log.

use std::sync::Arc;

use lambda_http::http;
use lambda_runtime_api_client::body::Body;
use tfreg_http::usage::Tallied;
use tfreg_store::ItemStore;
use tokio::sync::mpsc;

/// How often counts left over are written while the extension waits.
const SWEEP: std::time::Duration = std::time::Duration::from_secs(1);
/// How long the extension waits for the handler's answer to an INVOKE.
const DONE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// The name the extension registers under.
const EXTENSION_NAME: &str = "tfreg-usage";
const NAME_HEADER: &str = "Lambda-Extension-Name";
const ID_HEADER: &str = "Lambda-Extension-Identifier";

/// How the function's counts reach the store.
pub(crate) struct Counting {
    sink: Arc<Tallied>,
    store: Arc<dyn ItemStore>,
    /// The extension's "the handler is done" signal; `None`: flush inline.
    done: Option<mpsc::UnboundedSender<()>>,
}

impl Counting {
    /// Register the extension (at init, before the runtime's first `next`)
    /// and start it; fall back to flushing inline when the runtime API has
    /// no Extensions API.
    pub(crate) async fn start(sink: Arc<Tallied>, store: Arc<dyn ItemStore>) -> Counting {
        let registered = match client() {
            Ok(client) => register(&client).await.map(|id| (client, id)),
            Err(e) => Err(e),
        };
        let done = match registered {
            Ok((client, id)) => {
                let (tx, rx) = mpsc::unbounded_channel();
                tokio::spawn(extension(client, id, rx, sink.clone(), store.clone()));
                tracing::debug!("download counts are written after each response (extension)");
                Some(tx)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the runtime API has no Extensions API: download counts are written before each response");
                None
            }
        };
        Counting { sink, store, done }
    }

    /// The handler has its answer: the extension writes the counts once the
    /// response is on its way; without one, they are written now.
    pub(crate) async fn done(&self) {
        match &self.done {
            Some(tx) => {
                let _ = tx.send(());
            }
            None => {
                let _ = self.sink.flush(self.store.as_ref()).await;
            }
        }
    }
}

/// What stops the extension from registering.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExtensionError {
    #[error("no runtime API address (AWS_LAMBDA_RUNTIME_API)")]
    NoRuntimeApi,
    #[error("the Extensions API: {0}")]
    Api(String),
}

/// A client of the runtime API, whose address is read as the runtime reads
/// it (`lambda_runtime_api_client`'s own rule): `127.0.0.1:9001` in Lambda,
/// a URL with a path (`http://127.0.0.1:9000/.rt/<function>`) under
/// `cargo lambda watch`.
fn client() -> Result<lambda_runtime_api_client::Client, ExtensionError> {
    let api = std::env::var("AWS_LAMBDA_RUNTIME_API").map_err(|_| ExtensionError::NoRuntimeApi)?;
    let uri = http::Uri::try_from(api.as_str()).map_err(|_| ExtensionError::NoRuntimeApi)?;
    lambda_runtime_api_client::Client::builder()
        .with_endpoint(uri)
        .build()
        .map_err(|e| ExtensionError::Api(e.to_string()))
}

async fn register(client: &lambda_runtime_api_client::Client) -> Result<String, ExtensionError> {
    let request = lambda_runtime_api_client::build_request()
        .method(http::Method::POST)
        .uri("/2020-01-01/extension/register")
        .header(NAME_HEADER, EXTENSION_NAME)
        .body(Body::from(r#"{"events":["INVOKE"]}"#))
        .map_err(|e| ExtensionError::Api(e.to_string()))?;
    let response = tokio::time::timeout(std::time::Duration::from_secs(2), client.call(request))
        .await
        .map_err(|_| ExtensionError::Api("registration did not answer".into()))?
        .map_err(|e| ExtensionError::Api(e.to_string()))?;
    if !response.status().is_success() {
        return Err(ExtensionError::Api(format!(
            "registration answered {}",
            response.status()
        )));
    }
    response
        .headers()
        .get(ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
        .ok_or_else(|| ExtensionError::Api(format!("registration gave no {ID_HEADER}")))
}

/// The extension's life: next event, wait for the handler, flush, again.
async fn extension(
    client: lambda_runtime_api_client::Client,
    id: String,
    mut done: mpsc::UnboundedReceiver<()>,
    sink: Arc<Tallied>,
    store: Arc<dyn ItemStore>,
) {
    let mut sweep = tokio::time::interval(SWEEP);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let next = async {
            let request = lambda_runtime_api_client::build_request()
                .method(http::Method::GET)
                .uri("/2020-01-01/extension/event/next")
                .header(ID_HEADER, id.as_str())
                .body(Body::empty())?;
            client.call(request).await
        };
        tokio::pin!(next);
        // Waiting for the next event, counts left over are written each
        // SWEEP: never in Lambda, which delivers every INVOKE (and freezes
        // the sandbox meanwhile); under a runtime API that may miss one to
        // an extension busy writing (`cargo lambda watch`), the counts of
        // that invocation would wait for another. It only writes: the
        // handler's "done"s stay for the INVOKE they belong to.
        let answered = loop {
            tokio::select! {
                answered = &mut next => break answered,
                _ = sweep.tick() => {
                    if sink.pending() > 0 {
                        let _ = sink.flush(store.as_ref()).await;
                    }
                }
            }
        };
        match answered {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => {
                tracing::warn!(status = %response.status(), "the Extensions API refused the next event");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the Extensions API did not give the next event");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                continue;
            }
        }
        // An INVOKE (the only event an internal extension gets): wait for
        // the handler's answer, then write what it counted.
        // Bounded: a handler never called (an event lambda_http cannot
        // read) must not hold the invocation until the function's timeout;
        // its counts, if any, are written with a later invocation's.
        match tokio::time::timeout(DONE_WAIT, done.recv()).await {
            Ok(Some(())) => {}
            Ok(None) => return,
            Err(_) => {
                tracing::warn!(
                    "no answer from the handler in {DONE_WAIT:?}: its download counts are written later"
                );
                continue;
            }
        }
        // Counts of invocations whose "done" was queued meanwhile too.
        while done.try_recv().is_ok() {}
        let _ = sink.flush(store.as_ref()).await;
    }
}
