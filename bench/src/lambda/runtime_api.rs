//! A minimal Lambda Runtime API on loopback: it starts one function process,
//! hands it one event (or a few, one after the other) and times the moments
//! of a cold start as Lambda sees them: the first `GET
//! /2018-06-01/runtime/invocation/next` (init done), the response POSTed for
//! that event, and how long each later event took from its `next` to its
//! response. With [`Extensions::Lambda`] it has Lambda's Extensions API
//! too: an extension the function registers gets an `INVOKE` per event, and,
//! as in Lambda, an invocation is complete (the next event handed out) only
//! once the runtime has POSTed its response *and* every extension has asked
//! for its next event.

use std::convert::Infallible;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

/// Longest a cold start may take before the run is given up as failed.
const GIVE_UP: Duration = Duration::from_secs(30);

/// One cold start, timed from the moment the process was spawned.
#[derive(Debug, Clone)]
pub struct ColdStart {
    /// Until the first `invocation/next`: what Lambda bills as init.
    pub init: Duration,
    /// Until the response to the first event.
    pub first_response: Duration,
    /// The `statusCode` of that response (API Gateway's payload 2.0); 0
    /// when it is none (the fill function answers its events with `null`).
    pub status: u16,
    /// That response's body.
    pub body: Bytes,
    /// Each event's handling, from its `invocation/next` to its response:
    /// the first event's, then the warm ones'.
    pub handling: Vec<Duration>,
    /// Each event's invocation, from its `invocation/next` until it was
    /// complete: its response, or later the extension's next `event/next`
    /// (what Lambda bills, and what the next event waits for).
    pub completed: Vec<Duration>,
    /// Whether the function registered an extension.
    pub extension: bool,
}

/// Whether the Runtime API has Lambda's Extensions API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extensions {
    /// None: registering answers 404 (as the bench's API did before).
    None,
    /// Lambda's: register, `event/next` with an `INVOKE` per event.
    Lambda,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("the function reported an error: {0}")]
    Function(String),
    #[error("the function exited before answering ({0})")]
    Exited(std::process::ExitStatus),
    #[error("no answer within {GIVE_UP:?}")]
    TimedOut,
    #[error("the response is not an API Gateway payload 2.0 response: {0}")]
    Response(String),
}

/// Every event answered, or an error the function reported.
type Outcome = Result<(), String>;

struct State {
    started: Instant,
    event: Bytes,
    invocations: usize,
    /// The first event is handed out this long after init ended.
    first_event_after: Duration,
    /// When the first `invocation/next` came: init's end.
    init_at: Mutex<Option<Duration>>,
    nexts: AtomicUsize,
    /// When each event was handed out, and each response.
    next_at: Mutex<Vec<Duration>>,
    responses: Mutex<Vec<(Duration, Bytes)>>,
    outcome: Mutex<Option<oneshot::Sender<Outcome>>>,
    extensions: Extensions,
    registered: std::sync::atomic::AtomicBool,
    /// Events handed to the runtime so far.
    handed: tokio::sync::watch::Sender<usize>,
    /// Events the extension is done with (it asked for the next one).
    extension_done: tokio::sync::watch::Sender<usize>,
    extension_nexts: AtomicUsize,
    /// When the extension was done with each event.
    extension_done_at: Mutex<Vec<Duration>>,
}

const REGISTER: &str = "/2020-01-01/extension/register";
const EXTENSION_NEXT: &str = "/2020-01-01/extension/event/next";

/// An extension's `register` and `event/next`.
async fn extension(state: &State, path: &str) -> Option<Response<Full<Bytes>>> {
    if path == REGISTER {
        if state.extensions == Extensions::None {
            return Some(reply(404, Bytes::new()));
        }
        state.registered.store(true, Ordering::SeqCst);
        let mut response = reply(
            200,
            Bytes::from_static(
                br#"{"functionName":"bench","functionVersion":"$LATEST","handler":"bootstrap"}"#,
            ),
        );
        response.headers_mut().insert(
            "lambda-extension-identifier",
            "bench-extension".parse().expect("header"),
        );
        return Some(response);
    }
    if path != EXTENSION_NEXT {
        return None;
    }
    // Its k-th `next` says it is done with event k (the first: with init).
    let k = state.extension_nexts.fetch_add(1, Ordering::SeqCst);
    if k > 0 {
        state
            .extension_done_at
            .lock()
            .expect("extension lock")
            .push(state.started.elapsed());
        state.extension_done.send_replace(k);
    }
    if k >= state.invocations {
        std::future::pending::<()>().await;
    }
    let mut handed = state.handed.subscribe();
    let _ = handed.wait_for(|n| *n > k).await;
    let body = format!(
        r#"{{"eventType":"INVOKE","requestId":"bench-{}","deadlineMs":0,"invokedFunctionArn":"arn:aws:lambda:us-east-1:000000000000:function:bench","tracing":{{}}}}"#,
        k + 1
    );
    Some(reply(200, Bytes::from(body)))
}

const NEXT: &str = "/2018-06-01/runtime/invocation/next";

fn reply(status: u16, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("a valid status");
    response
}

async fn handle(state: Arc<State>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_string();
    if let Some(response) = extension(&state, &path).await {
        return response;
    }
    if path == NEXT {
        let n = state.nexts.fetch_add(1, Ordering::SeqCst);
        if n >= state.invocations {
            // No more events: the next one never comes (the process is killed).
            std::future::pending::<()>().await;
        }
        // As Lambda: event n+1 only once the extension is done with event n.
        if n > 0 && state.registered.load(Ordering::SeqCst) {
            let mut done = state.extension_done.subscribe();
            let _ = done.wait_for(|d| *d >= n).await;
        }
        if n == 0 {
            *state.init_at.lock().expect("init lock") = Some(state.started.elapsed());
            // Only when asked: even a zero sleep waits for the timer's next
            // tick (up to a millisecond).
            if !state.first_event_after.is_zero() {
                tokio::time::sleep(state.first_event_after).await;
            }
        }
        state
            .next_at
            .lock()
            .expect("next lock")
            .push(state.started.elapsed());
        state.handed.send_replace(n + 1);
        let deadline = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            + Duration::from_secs(60);
        let mut response = reply(200, state.event.clone());
        let headers = response.headers_mut();
        headers.insert(
            "lambda-runtime-aws-request-id",
            format!("bench-{}", n + 1).parse().expect("header"),
        );
        headers.insert(
            "lambda-runtime-deadline-ms",
            deadline.as_millis().to_string().parse().expect("header"),
        );
        headers.insert(
            "lambda-runtime-invoked-function-arn",
            "arn:aws:lambda:us-east-1:000000000000:function:bench"
                .parse()
                .expect("header"),
        );
        headers.insert("content-type", "application/json".parse().expect("header"));
        return response;
    }
    let is_error = path.ends_with("/error");
    let is_response = path.ends_with("/response");
    let body = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let outcome = if is_response {
        let mut responses = state.responses.lock().expect("responses lock");
        responses.push((state.started.elapsed(), body));
        if responses.len() < state.invocations {
            return reply(202, Bytes::new());
        }
        Ok(())
    } else if is_error {
        Err(String::from_utf8_lossy(&body).into_owned())
    } else {
        return reply(404, Bytes::new());
    };
    if let Some(done) = state.outcome.lock().expect("outcome lock").take() {
        let _ = done.send(outcome);
    }
    reply(202, Bytes::new())
}

/// Start `command` against a fresh Runtime API, give it `event`, time it, kill it.
pub async fn cold_start(
    command: tokio::process::Command,
    event: Bytes,
) -> Result<ColdStart, RunError> {
    cold_start_then(command, event, 1).await
}

/// [`cold_start`], then the same event again until it has had `invocations`.
pub async fn cold_start_then(
    command: tokio::process::Command,
    event: Bytes,
    invocations: usize,
) -> Result<ColdStart, RunError> {
    run(
        command,
        event,
        invocations,
        Duration::ZERO,
        Extensions::None,
    )
    .await
}

/// [`cold_start_then`] against a Runtime API with `extensions`.
pub async fn with_extensions(
    command: tokio::process::Command,
    event: Bytes,
    invocations: usize,
    extensions: Extensions,
) -> Result<ColdStart, RunError> {
    run(command, event, invocations, Duration::ZERO, extensions).await
}

/// [`cold_start_then`] of a function initialised ahead of its first event
/// (Lambda's provisioned concurrency): the first event comes
/// `first_event_after` its init ended. `first_response` includes the wait.
pub async fn initialised_ahead(
    command: tokio::process::Command,
    event: Bytes,
    invocations: usize,
    first_event_after: Duration,
) -> Result<ColdStart, RunError> {
    run(
        command,
        event,
        invocations,
        first_event_after,
        Extensions::None,
    )
    .await
}

async fn run(
    mut command: tokio::process::Command,
    event: Bytes,
    invocations: usize,
    first_event_after: Duration,
    extensions: Extensions,
) -> Result<ColdStart, RunError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let (done, outcome) = oneshot::channel();
    let state = Arc::new(State {
        started: Instant::now(),
        event,
        invocations: invocations.max(1),
        first_event_after,
        init_at: Mutex::new(None),
        nexts: AtomicUsize::new(0),
        next_at: Mutex::new(Vec::new()),
        responses: Mutex::new(Vec::new()),
        outcome: Mutex::new(Some(done)),
        extensions,
        registered: std::sync::atomic::AtomicBool::new(false),
        handed: tokio::sync::watch::channel(0).0,
        extension_done: tokio::sync::watch::channel(0).0,
        extension_nexts: AtomicUsize::new(0),
        extension_done_at: Mutex::new(Vec::new()),
    });
    let server_state = state.clone();
    let server = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let state = server_state.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handle(state, request).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    command
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    // Timed from here: `started` above is a few microseconds earlier.
    let mut child = command.spawn()?;
    let result = tokio::select! {
        outcome = tokio::time::timeout(GIVE_UP, outcome) => match outcome {
            Ok(Ok(outcome)) => outcome.map_err(RunError::Function),
            Ok(Err(_)) | Err(_) => Err(RunError::TimedOut),
        },
        status = child.wait() => Err(match status {
            Ok(status) => RunError::Exited(status),
            Err(e) => RunError::Io(e),
        }),
    };
    // The last invocation is complete once the extension is done with it.
    let extension = state.registered.load(Ordering::SeqCst);
    if result.is_ok() && extension {
        let mut done = state.extension_done.subscribe();
        let last = state.invocations;
        if tokio::time::timeout(GIVE_UP, done.wait_for(|d| *d >= last))
            .await
            .is_err()
        {
            let _ = child.kill().await;
            server.abort();
            return Err(RunError::TimedOut);
        }
    }
    let _ = child.kill().await;
    server.abort();
    result?;
    let extension_done_at = state
        .extension_done_at
        .lock()
        .expect("extension lock")
        .clone();
    let next_at = state.next_at.lock().expect("next lock").clone();
    let responses = state.responses.lock().expect("responses lock").clone();
    let init = state
        .init_at
        .lock()
        .expect("init lock")
        .ok_or_else(|| RunError::Response("answered without asking for an event".into()))?;
    let (first_response, body) = responses
        .first()
        .cloned()
        .ok_or_else(|| RunError::Response("no response".into()))?;
    Ok(ColdStart {
        init,
        first_response,
        status: status_code(&body).unwrap_or(0),
        body,
        handling: next_at
            .iter()
            .zip(&responses)
            .map(|(next, (response, _))| response.saturating_sub(*next))
            .collect(),
        completed: next_at
            .iter()
            .zip(&responses)
            .enumerate()
            .map(|(i, (next, (response, _)))| {
                let done = extension_done_at.get(i).copied().unwrap_or_default();
                (*response).max(done).saturating_sub(*next)
            })
            .collect(),
        extension,
    })
}

/// The `statusCode` of an API Gateway payload 2.0 response.
pub fn status_code(body: &[u8]) -> Result<u16, RunError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| RunError::Response(e.to_string()))?;
    value
        .get("statusCode")
        .and_then(serde_json::Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .ok_or_else(|| RunError::Response(String::from_utf8_lossy(body).into_owned()))
}
