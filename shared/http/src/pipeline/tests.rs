//! The layers' own logic, each alone around a stub service (the whole
//! pipeline's behaviour is `app`'s tests and the suite's).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{HeaderMap, HeaderValue, StatusCode, header};
use tfreg_model::address::Hostname;
use tfreg_model::router::{Endpoint, UiRoute};
use tfreg_model::token::Principal;
use tfreg_store::NoBlobs;
use tfreg_store::sqlite::SqliteStore;
use tower::{Service, ServiceBuilder, ServiceExt as _};

use super::facts::{Caller, Failed, RequestId, Routed, fail};
use super::layer::Step;
use super::*;
use crate::body::{Body, empty};
use crate::error::Error;
use crate::groups::{AuditAs, Call, Handler, Identified, Note, Pages};
use crate::metrics::{FillRecord, PublishRecord, Recorder, RequestRecord};

type Stub = Arc<dyn Fn(Request) -> Response + Send + Sync>;

/// The innermost service: answers what `answer` makes of the request.
fn stub(
    answer: impl Fn(Request) -> Response + Send + Sync + 'static,
) -> impl Service<Request, Response = Response, Error = Infallible, Future: Send>
+ Clone
+ Send
+ Sync
+ 'static {
    let answer: Stub = Arc::new(answer);
    tower::service_fn(move |req: Request| {
        let answer = answer.clone();
        async move { Ok::<_, Infallible>(answer(req)) }
    })
}

async fn call<S>(service: S, req: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    match service.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

async fn text(resp: Response) -> String {
    let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .unwrap();
    String::from_utf8_lossy(&body).into_owned()
}

fn get(path: &str) -> Request {
    http::Request::get(path).body(Body::empty()).unwrap()
}

fn shared(served: Served, metrics: Option<Arc<dyn Recorder>>) -> Arc<Shared> {
    let config = crate::Config::new(Hostname::parse("registry.test").unwrap());
    let mut registry = Registry::with_stored_signer(
        Arc::new(SqliteStore::in_memory().unwrap()),
        Arc::new(NoBlobs),
        config,
    );
    if let Some(metrics) = metrics {
        registry = registry.with_metrics(metrics);
    }
    Arc::new(Shared {
        registry: Arc::new(registry),
        served,
    })
}

fn routed(action: Option<&'static str>, in_browser: bool) -> Routed {
    Routed {
        endpoint: Endpoint::Admin,
        in_browser,
        audit_action: action,
        audit_target: "tokens".into(),
    }
}

fn failed(resp: &Response) -> Option<String> {
    resp.extensions().get::<Failed>().map(|f| f.0.to_string())
}

#[tokio::test]
async fn header_limits_refuse_too_many_lines_and_too_many_bytes() {
    let limited = || {
        ServiceBuilder::new()
            .layer(Step(limits::Limits))
            .service(stub(|_| empty(StatusCode::NO_CONTENT)))
    };
    let with = |headers: Vec<(String, String)>| {
        let mut req = get("/");
        for (name, value) in headers {
            req.headers_mut().append(
                http::HeaderName::try_from(name).unwrap(),
                HeaderValue::try_from(value).unwrap(),
            );
        }
        req
    };
    let lines = |n: usize| (0..n).map(|i| (format!("x-h{i}"), "v".into())).collect();
    let resp = call(limited(), with(lines(limits::MAX_HEADERS))).await;
    assert_eq!(
        resp.status(),
        StatusCode::NO_CONTENT,
        "at the bound: served"
    );
    let resp = call(limited(), with(lines(limits::MAX_HEADERS + 1))).await;
    assert_eq!(resp.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert!(failed(&resp).unwrap().contains("101 header lines"));
    // One header of exactly the bound (name "x-big" + value), then one byte more.
    let big = |extra: usize| {
        vec![(
            "x-big".into(),
            "a".repeat(limits::MAX_HEADER_BYTES - 5 + extra),
        )]
    };
    let resp = call(limited(), with(big(0))).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    let resp = call(limited(), with(big(1))).await;
    assert_eq!(resp.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    assert!(failed(&resp).unwrap().contains("bytes of headers"));
}

#[tokio::test]
async fn a_head_answer_keeps_its_headers_and_drops_its_body() {
    let head = || {
        ServiceBuilder::new()
            .layer(Step(head::HeadBody))
            .service(stub(|_| {
                let mut resp = http::Response::new(Body::from("hello"));
                resp.headers_mut()
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(5));
                resp
            }))
    };
    let req = http::Request::head("/x").body(Body::empty()).unwrap();
    let resp = call(head(), req).await;
    assert_eq!(resp.headers()[header::CONTENT_LENGTH], "5");
    assert_eq!(text(resp).await, "");
    let resp = call(head(), get("/x")).await;
    assert_eq!(text(resp).await, "hello", "a GET keeps its body");
}

#[tokio::test]
async fn a_panic_is_a_500_carrying_its_message_for_the_log() {
    let guarded = |message: &'static str, owned: bool| {
        ServiceBuilder::new()
            .layer(Step(guard::Guard))
            .service(stub(move |_| {
                if owned {
                    std::panic::panic_any(format!("{message}!"))
                }
                std::panic::panic_any(message)
            }))
    };
    for (owned, told) in [(false, "boom"), (true, "boom!")] {
        let resp = call(guarded("boom", owned), get("/")).await;
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let detail = failed(&resp).unwrap();
        assert_eq!(
            detail,
            format!("internal error: the handler panicked: {told}")
        );
    }
    let fine = ServiceBuilder::new()
        .layer(Step(guard::Guard))
        .service(stub(|_| empty(StatusCode::NO_CONTENT)));
    assert_eq!(call(fine, get("/")).await.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn the_request_id_is_one_for_the_layers_and_the_header() {
    let service = ServiceBuilder::new()
        .layer(Step(request_id::MakeRequestId))
        .service(stub(|req| {
            let mut resp = empty(StatusCode::OK);
            let seen = RequestId::of(req.extensions()).to_string();
            resp.headers_mut()
                .insert("x-seen", HeaderValue::from_str(&seen).unwrap());
            resp
        }));
    let resp = call(service, get("/")).await;
    let id = &resp.headers()[request_id::REQUEST_ID_HEADER];
    assert!(id.is_sensitive());
    assert_eq!(id, &resp.headers()["x-seen"]);
    let id = id.to_str().unwrap();
    assert_eq!(id.len(), 16);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
}

#[tokio::test]
async fn routing_tells_the_layers_inside_the_route_and_those_outside_what_it_was() {
    let routed_service = || {
        ServiceBuilder::new()
            .layer(Step(route::Router))
            .service(stub(|req| {
                let found = req.extensions().get::<tfreg_model::router::Route>();
                assert_eq!(found, Some(&tfreg_model::router::Route::Discovery));
                empty(StatusCode::OK)
            }))
    };
    let resp = call(routed_service(), get("/.well-known/terraform.json")).await;
    let routed = resp.extensions().get::<Routed>().unwrap();
    assert_eq!(routed.endpoint, Endpoint::Discovery);
    assert_eq!(routed.audit_action, None);
    let resp = call(routed_service(), get("/nowhere")).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert!(failed(&resp).is_some());
    assert_eq!(Routed::endpoint_name(resp.extensions()), "none");
}

#[tokio::test]
async fn the_operator_is_authorised_and_a_refusal_keeps_who_asked() {
    let shared = shared(Served::new(), None);
    let authorized = || {
        ServiceBuilder::new()
            .layer(Step(route::Router))
            .layer(Step(authorize::Authorize(shared.clone())))
            .service(stub(|req| {
                let who = req.extensions().get::<Principal>().unwrap();
                assert!(matches!(who, Principal::Operator), "{who:?}");
                empty(StatusCode::NO_CONTENT)
            }))
    };
    let mut req = get("/v1/admin/tokens");
    req.extensions_mut().insert(Caller::Operator);
    assert_eq!(
        call(authorized(), req).await.status(),
        StatusCode::NO_CONTENT
    );
    // From the network, without a token: refused before the handler.
    let resp = call(authorized(), get("/v1/admin/tokens")).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(matches!(
        resp.extensions().get::<Principal>(),
        Some(Principal::Anonymous)
    ));
    assert!(resp.extensions().get::<Routed>().is_some());
}

/// A UI whose error page names who it was written for.
struct StubPages;

#[async_trait::async_trait]
impl Handler<UiRoute> for StubPages {
    async fn handle(
        &self,
        _: &Registry,
        _: UiRoute,
        _: Call<'_>,
        _: Body,
    ) -> Result<Response, Error> {
        Ok(empty(StatusCode::OK))
    }
}

impl Pages for StubPages {
    fn error_page(
        &self,
        _: &Registry,
        err: &Error,
        request_id: &str,
        call: &Call<'_>,
        path: &str,
    ) -> Response {
        let page = format!(
            "{} {} {path}?{} for {} {request_id}",
            err.status().as_u16(),
            call.method,
            call.query.unwrap_or(""),
            call.principal.actor().kind,
        );
        let mut resp = http::Response::new(Body::from(page));
        *resp.status_mut() = err.status();
        resp
    }

    fn secure(&self, headers: &mut HeaderMap) {
        headers.insert("x-secured", HeaderValue::from_static("1"));
    }
}

fn with_errors(
    served: Served,
    answer: impl Fn(Request) -> Response + Send + Sync + 'static,
) -> impl Service<Request, Response = Response, Error = Infallible> {
    ServiceBuilder::new()
        .layer(Step(errors::Errors(shared(served, None))))
        .service(stub(answer))
}

#[tokio::test]
async fn errors_are_json_plain_text_for_a_browser_step_or_a_ui_page() {
    let refused = |in_browser: bool| {
        move |_: Request| {
            let mut resp = fail(Error::Forbidden("no right".into()));
            resp.extensions_mut()
                .insert(routed(Some("token.create"), in_browser));
            resp.extensions_mut().insert(Principal::Operator);
            resp
        }
    };
    // JSON, with the facts kept for the layers outside.
    let resp = call(
        with_errors(Served::new(), refused(false)),
        get("/v1/admin/tokens"),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    assert!(resp.extensions().get::<Routed>().is_some());
    assert_eq!(failed(&resp).as_deref(), Some("no right"));
    assert_eq!(text(resp).await, r#"{"errors":["no right"]}"#);
    // A sign-in's browser step: plain text.
    let resp = call(
        with_errors(Served::new(), refused(true)),
        get("/oauth/authorize"),
    )
    .await;
    assert_eq!(
        resp.headers()[header::CONTENT_TYPE],
        "text/plain; charset=utf-8"
    );
    assert!(text(resp).await.starts_with("Sign-in failed: no right"));
    // A UI path where the UI is served: its page, for who asked, secured.
    let ui = || Served::new().ui(StubPages);
    let mut req = get("/ui/tokens?page=2");
    req.extensions_mut().insert(RequestId(0xab));
    let resp = call(with_errors(ui(), refused(true)), req).await;
    assert_eq!(resp.headers()["x-secured"], "1");
    assert!(resp.extensions().get::<Failed>().is_some());
    assert_eq!(
        text(resp).await,
        "403 GET /ui/tokens?page=2 for operator 00000000000000ab"
    );
    // Where the UI is not served, a UI path's error is JSON.
    let resp = call(
        with_errors(Served::new(), refused(false)),
        get("/ui/tokens"),
    )
    .await;
    assert!(resp.headers().get("x-secured").is_none());
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    // An answer is left as it is, secured on a UI path.
    let answer = |_: Request| empty(StatusCode::NO_CONTENT);
    let resp = call(with_errors(ui(), answer), get("/ui/tokens")).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(resp.headers()["x-secured"], "1");
}

fn facts(items: impl FnOnce(&mut http::Extensions)) -> http::Extensions {
    let mut extensions = http::Extensions::new();
    items(&mut extensions);
    extensions
}

#[test]
fn the_audit_record_is_of_a_routed_change_only() {
    let id = RequestId(7);
    assert_eq!(AuditRecord::of(200, &facts(|_| {}), id), None, "no route");
    let read = facts(|f| {
        f.insert(routed(None, false));
    });
    assert_eq!(AuditRecord::of(200, &read, id), None, "a read");
    // A route without an action, whose handler says what it did.
    let signed_in = facts(|f| {
        f.insert(routed(None, true));
        f.insert(AuditAs("token.login"));
    });
    let record = AuditRecord::of(200, &signed_in, id).unwrap();
    assert_eq!(record.action, "token.login");
    // The route's action comes first.
    let created = facts(|f| {
        f.insert(routed(Some("token.create"), false));
        f.insert(AuditAs("other"));
    });
    assert_eq!(
        AuditRecord::of(201, &created, id).unwrap().action,
        "token.create"
    );
}

#[test]
fn the_audit_record_names_who_and_is_kept_when_they_are_known() {
    let id = RequestId(7);
    let anonymous = facts(|f| {
        f.insert(routed(Some("token.create"), false));
    });
    let record = AuditRecord::of(401, &anonymous, id).unwrap();
    assert_eq!(record.actor.kind, "anonymous");
    assert!(!record.keep, "logged only");
    let operator = facts(|f| {
        f.insert(routed(Some("token.create"), false));
        f.insert(Principal::Operator);
    });
    let record = AuditRecord::of(201, &operator, id).unwrap();
    assert_eq!(record.actor.kind, "operator");
    assert!(record.keep);
    // A sign-in's handler found who it was: named, and kept.
    let identified = facts(|f| {
        f.insert(routed(Some("token.login"), false));
        f.insert(Principal::Anonymous);
        f.insert(Identified(tfreg_model::token::Actor {
            kind: "token".into(),
            token_id: Some("t1".into()),
            token_name: Some("sso:ann".into()),
        }));
    });
    let record = AuditRecord::of(200, &identified, id).unwrap();
    assert_eq!(record.actor.token_name.as_deref(), Some("sso:ann"));
    assert!(record.keep);
}

#[test]
fn the_audit_detail_is_the_errors_public_message_else_the_note_escaped() {
    let id = RequestId(0x2a);
    let noted = facts(|f| {
        f.insert(routed(Some("release.yank"), false));
        f.insert(Note("yanked\u{1b}[2J".into()));
    });
    let record = AuditRecord::of(200, &noted, id).unwrap();
    assert_eq!(
        record.detail.as_deref(),
        Some(&*tfreg_model::text::escaped("yanked\u{1b}[2J"))
    );
    assert_ne!(record.detail.as_deref(), Some("yanked\u{1b}[2J"));
    let failed = facts(|f| {
        f.insert(routed(Some("release.yank"), false));
        f.insert(Note("not this".into()));
        f.insert(Failed(Arc::new(Error::internal("the store's detail"))));
    });
    let event = AuditRecord::of(500, &failed, id)
        .unwrap()
        .event(1_700_000_000);
    assert_eq!(
        event.detail.as_deref(),
        Some("internal error (request id 000000000000002a); the registry logged the details")
    );
    assert_eq!(event.outcome, tfreg_model::audit::Outcome::Failed);
    assert_eq!((event.status, event.at), (500, 1_700_000_000));
    assert_eq!(event.request_id, "000000000000002a");
    assert_eq!(
        (event.action.as_str(), event.target.as_str()),
        ("release.yank", "tokens")
    );
}

/// The records a recorder was given.
#[derive(Default)]
struct Recorded(Mutex<Vec<RequestRecord>>);

impl Recorder for Recorded {
    fn request(&self, record: &RequestRecord) {
        self.0.lock().unwrap().push(record.clone());
    }
    fn fill(&self, _: &FillRecord) {}
    fn publish(&self, _: &PublishRecord) {}
}

#[tokio::test]
async fn metrics_see_the_final_status_and_the_endpoint_and_one_cold_start() {
    let recorded = Arc::new(Recorded::default());
    let shared = shared(Served::new(), Some(recorded.clone()));
    let measured = || {
        ServiceBuilder::new()
            .layer(Step(metrics::Measure(shared.clone())))
            .layer(Step(errors::Errors(shared.clone())))
            .layer(Step(route::Router))
            .service(stub(|_| empty(StatusCode::OK)))
    };
    call(measured(), get("/.well-known/terraform.json")).await;
    call(measured(), get("/nowhere")).await;
    let records = recorded.0.lock().unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!((records[0].endpoint, records[0].status), ("discovery", 200));
    assert_eq!((records[1].endpoint, records[1].status), ("none", 404));
    assert!(
        !records[1].cold_start,
        "only a process's first request is cold"
    );
}
