//! The registry's one log line per request, read back: the compact text of
//! `tfreg serve` and the JSON of the Lambda functions.

/// One `request` log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLine {
    pub method: String,
    pub path: String,
    pub endpoint: String,
    pub status: u16,
}

/// The value of `key=` in a compact log line: a quoted string or a bare word.
fn field(line: &str, key: &str) -> Option<String> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[at..];
    if let Some(quoted) = rest.strip_prefix('"') {
        let end = quoted.find('"')?;
        Some(quoted[..end].to_string())
    } else {
        Some(rest.split_whitespace().next()?.to_string())
    }
}

fn parse_json(line: &str) -> Option<RequestLine> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let f = if v["fields"].is_object() {
        &v["fields"]
    } else {
        &v
    };
    (f["message"] == "request").then(|| RequestLine {
        method: f["method"].as_str().unwrap_or_default().to_string(),
        path: f["path"].as_str().unwrap_or_default().to_string(),
        endpoint: f["endpoint"].as_str().unwrap_or_default().to_string(),
        status: f["status"].as_u64().unwrap_or_default() as u16,
    })
}

fn parse_text(line: &str) -> Option<RequestLine> {
    if !line.contains(" request ") && !line.contains(" request:") {
        return None;
    }
    Some(RequestLine {
        method: field(line, "method")?,
        path: field(line, "path")?,
        endpoint: field(line, "endpoint")?,
        status: field(line, "status")?.parse().ok()?,
    })
}

/// Every request line of a log, in order.
pub fn requests(log: &str) -> Vec<RequestLine> {
    log.lines()
        .filter_map(|l| parse_json(l).or_else(|| parse_text(l)))
        .collect()
}

/// Fail unless the log holds at least `min` request lines and none of them
/// answered 5xx (a check that cannot pass on an unreadable or empty log).
pub fn assert_no_server_errors(log: &str, min: usize) -> Vec<RequestLine> {
    let lines = requests(log);
    assert!(
        lines.len() >= min,
        "expected at least {min} request lines, found {}:\n{log}",
        lines.len()
    );
    let failed: Vec<&RequestLine> = lines.iter().filter(|l| l.status >= 500).collect();
    assert!(failed.is_empty(), "requests answered 5xx: {failed:#?}");
    lines
}

#[test]
fn both_log_formats_are_read() {
    let text = "2026-11-22T10:00:00.000Z  INFO request method=HEAD path=\"/v1/blobs/archives/a/b.zip\" endpoint=\"blob\" status=200 latency_ms=0.5\n\
                2026-11-22T10:00:00.000Z ERROR request method=GET path=\"/v1/x\" endpoint=\"none\" status=503 latency_ms=1 error=store unavailable: down\n\
                2026-11-22T10:00:00.000Z  INFO audit action=\"publish\"";
    let json = r#"{"level":"INFO","fields":{"message":"request","method":"GET","path":"/v1/providers/a/b/versions","endpoint":"provider-versions","status":200,"latency_ms":1.0}}"#;
    let lines = requests(&format!("{text}\n{json}"));
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0].method, "HEAD");
    assert_eq!(lines[0].endpoint, "blob");
    assert_eq!(lines[1].status, 503);
    assert_eq!(lines[2].path, "/v1/providers/a/b/versions");
    let err = std::panic::catch_unwind(|| assert_no_server_errors(text, 1));
    assert!(err.is_err(), "a 503 fails the check");
    let err = std::panic::catch_unwind(|| assert_no_server_errors("", 1));
    assert!(err.is_err(), "an empty log fails the check");
}
