//! [`lambda_body`] against lambda_http's own conversion of the same
//! response (its `IntoResponse` for `http::Response`), the reference.

use lambda_http::http::{HeaderName, HeaderValue};

use super::*;

/// lambda_http's body for a response with these headers and bytes.
async fn reference(headers: &[(&str, &str)], bytes: &[u8]) -> Body {
    let mut response = Response::new(Body::Binary(bytes.to_vec()));
    for (name, value) in headers {
        response.headers_mut().insert(
            HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_bytes(value.as_bytes()).expect("header value"),
        );
    }
    response.into_response().await.into_body()
}

fn ours(headers: &[(&str, &str)], bytes: &[u8]) -> Body {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(
            HeaderName::from_bytes(name.as_bytes()).expect("header name"),
            HeaderValue::from_bytes(value.as_bytes()).expect("header value"),
        );
    }
    lambda_body(&map, bytes.to_vec())
}

/// What the two bodies hold, comparable: (text?, bytes).
fn held(body: &Body) -> (bool, Vec<u8>) {
    match body {
        Body::Text(text) => (true, text.as_bytes().to_vec()),
        Body::Binary(bytes) => (false, bytes.clone()),
        Body::Empty => (true, Vec::new()),
        _ => unreachable!("lambda_http's Body has three kinds"),
    }
}

/// A response's headers and body.
type Case = (&'static [(&'static str, &'static str)], &'static [u8]);

/// Every kind of answer the registry gives, and the edges of the rule:
/// the same body, text or binary, as lambda_http made it.
#[tokio::test]
async fn utf8_bodies_are_sent_as_lambda_http_sent_them() {
    let json = br#"{"versions":[{"version":"1.0.0"}]}"#.as_slice();
    let cases: &[Case] = &[
        (&[("content-type", "application/json")], json),
        (&[("content-type", "application/json; charset=utf-8")], json),
        (
            &[("content-type", "text/html; charset=utf-8")],
            "<p>é</p>".as_bytes(),
        ),
        (&[("content-type", "text/css")], b"body{}"),
        (
            &[("content-type", "text/plain; charset=utf-8")],
            b"abc  x.zip\n",
        ),
        (&[("content-type", "application/javascript")], b"let a=1;"),
        (&[("content-type", "image/svg+xml")], b"<svg/>"),
        (&[("content-type", "application/problem+json")], b"{}"),
        (&[("content-type", "application/vnd.x+yaml; v=1")], b"a: 1"),
        (&[("content-type", "application/zip")], b"PK\x03\x04"),
        (&[("content-type", "application/octet-stream")], b"\x00\xff"),
        (
            &[("content-type", "application/pgp-signature")],
            b"\x89\x01",
        ),
        (&[("content-type", "image/png")], b"\x89PNG"),
        (&[], b""),
        (&[], b"no content type"),
        (&[("location", "https://example.com/x")], b""),
        (
            &[
                ("content-type", "application/json"),
                ("content-encoding", "gzip"),
            ],
            b"\x1f\x8b",
        ),
        (
            &[
                ("content-type", "application/x-custom"),
                ("x-lambda-http-content-encoding", "text"),
            ],
            b"as text",
        ),
        // Not visible ASCII: lambda_http reads it as no type, so binary.
        (&[("content-type", "\u{e9}bad")], b"odd type"),
    ];
    for (headers, bytes) in cases {
        let theirs = held(&reference(headers, bytes).await);
        assert_eq!(held(&ours(headers, bytes)), theirs, "{headers:?}");
    }
}

/// A body declared as text that is not UTF-8 keeps its bytes (binary),
/// where lambda_http would have replaced what it could not decode.
#[tokio::test]
async fn a_text_body_that_is_not_utf8_is_sent_byte_for_byte() {
    let headers: &[(&str, &str)] = &[("content-type", "text/plain")];
    let bytes = b"caf\xe9";
    assert_eq!(held(&ours(headers, bytes)), (false, bytes.to_vec()));
    let (text, theirs) = held(&reference(headers, bytes).await);
    assert!(text && theirs != bytes, "lambda_http decodes it lossily");
}

/// A body that fails to read (none of the pipeline's can: they are in
/// memory) is our bug: the pipeline's own 500, naming the request.
#[tokio::test]
async fn a_body_that_cannot_be_read_is_answered_as_our_bug() {
    let failing =
        futures_util::stream::iter([Err::<axum::body::Bytes, _>(std::io::Error::other("gone"))]);
    let mut response = axum::response::Response::new(axum::body::Body::from_stream(failing));
    response.headers_mut().insert(
        REQUEST_ID_HEADER,
        HeaderValue::from_static("0123456789abcdef"),
    );
    let answered = finish(response).await;
    assert_eq!(answered.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let (text, body) = held(answered.body());
    let body: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
    let message = body["errors"][0].as_str().expect("an error");
    assert!(text && message.contains("0123456789abcdef"), "{body}");
    assert!(
        !message.contains("gone"),
        "the detail is logged, not answered: {body}"
    );
}
