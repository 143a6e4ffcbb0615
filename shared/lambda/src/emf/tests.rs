use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tfreg_http::metrics::{
    FillOutcome, FillRecord, PackageKind, PublishOutcome, PublishRecord, Recorder, RequestRecord,
};

use super::{DEFAULT_NAMESPACE, Emf, LAMBDA_REQUEST_ID};
use crate::config::METRICS_NAMESPACE;

fn request(status: u16, cold_start: bool) -> RequestRecord {
    RequestRecord {
        endpoint: "provider_versions",
        status,
        latency: Duration::from_micros(12_345),
        cold_start,
    }
}

/// An Emf writing into a buffer, stamped 1700000000123, as function `f`.
fn recorder(namespace: Option<&str>) -> (Emf, Arc<Mutex<Vec<u8>>>) {
    let out = Arc::new(Mutex::new(Vec::new()));
    let sink = out.clone();
    let ns = namespace.map(String::from);
    let emf = Emf::from_env(move |name| match name {
        METRICS_NAMESPACE => ns.clone(),
        "AWS_LAMBDA_FUNCTION_NAME" => Some("tfreg-ReadFunction-abc".into()),
        _ => None,
    })
    .with_sink(
        || 1_700_000_000_123,
        move |b| sink.lock().unwrap().extend_from_slice(b),
    );
    (emf, out)
}

fn lines(out: &Mutex<Vec<u8>>) -> Vec<Value> {
    let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What the specification requires beyond its schema: each metric named
/// is a top-level number, each dimension a top-level string.
fn check_members(line: &Value) {
    for set in line["_aws"]["CloudWatchMetrics"].as_array().unwrap() {
        for m in set["Metrics"].as_array().unwrap() {
            let name = m["Name"].as_str().unwrap();
            assert!(line[name].is_number(), "{name} in {line}");
        }
        for d in set["Dimensions"][0].as_array().unwrap() {
            let name = d.as_str().unwrap();
            assert!(line[name].is_string(), "{name} in {line}");
        }
    }
}

#[test]
fn a_request_is_one_line_with_its_metrics_and_properties() {
    let (emf, out) = recorder(Some("tfreg/prod"));
    emf.request(&request(404, true));
    let got = lines(&out);
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0],
        json!({
            "_aws": {
                "Timestamp": 1_700_000_000_123u64,
                "CloudWatchMetrics": [{
                    "Namespace": "tfreg/prod",
                    "Dimensions": [["Endpoint"]],
                    "Metrics": [
                        {"Name": "Requests", "Unit": "Count"},
                        {"Name": "ClientErrors", "Unit": "Count"},
                        {"Name": "ServerErrors", "Unit": "Count"},
                        {"Name": "Latency", "Unit": "Milliseconds"},
                        {"Name": "ColdStarts", "Unit": "Count"},
                    ],
                }],
            },
            "Endpoint": "provider_versions",
            "Requests": 1,
            "ClientErrors": 1,
            "ServerErrors": 0,
            "Latency": 12.345,
            "ColdStarts": 1,
            "Status": 404,
            "StatusClass": "4xx",
            "Function": "tfreg-ReadFunction-abc",
        })
    );
    check_members(&got[0]);
}

#[test]
fn a_5xx_counts_as_a_server_error_and_a_2xx_as_neither() {
    let (emf, out) = recorder(None);
    emf.request(&request(503, false));
    emf.request(&request(200, false));
    let got = lines(&out);
    assert_eq!(
        (&got[0]["ServerErrors"], &got[0]["ClientErrors"]),
        (&json!(1), &json!(0))
    );
    assert_eq!(got[0]["StatusClass"], "5xx");
    assert_eq!(
        (&got[1]["ServerErrors"], &got[1]["ClientErrors"]),
        (&json!(0), &json!(0))
    );
    assert_eq!(got[1]["ColdStarts"], 0);
    // Unset: the default namespace.
    assert_eq!(
        got[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"],
        DEFAULT_NAMESPACE
    );
}

#[test]
fn fills_and_publishes_are_dimensioned_by_kind() {
    let (emf, out) = recorder(Some("ns"));
    for outcome in [FillOutcome::Filled, FillOutcome::OriginFailed] {
        emf.fill(&FillRecord {
            kind: PackageKind::Module,
            outcome,
            duration: Duration::from_millis(1500),
        });
    }
    for outcome in [PublishOutcome::Published, PublishOutcome::Refused] {
        emf.publish(&PublishRecord {
            kind: PackageKind::Provider,
            outcome,
        });
    }
    let got = lines(&out);
    assert_eq!(got.len(), 4);
    for l in &got {
        check_members(l);
        assert_eq!(
            l["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
            json!([["Kind"]])
        );
    }
    assert_eq!(
        [
            &got[0]["Kind"],
            &got[0]["Fills"],
            &got[0]["FillFailures"],
            &got[0]["Outcome"]
        ],
        [&json!("module"), &json!(1), &json!(0), &json!("filled")]
    );
    assert_eq!(got[0]["FillDuration"], 1500.0);
    assert_eq!(
        [&got[1]["FillFailures"], &got[1]["Outcome"]],
        [&json!(1), &json!("origin_failed")]
    );
    assert_eq!(
        [
            &got[2]["Kind"],
            &got[2]["PublishFailures"],
            &got[2]["Outcome"]
        ],
        [&json!("provider"), &json!(0), &json!("published")]
    );
    assert_eq!(
        [&got[3]["PublishFailures"], &got[3]["Outcome"]],
        [&json!(1), &json!("refused")]
    );
    let names: Vec<&str> = got[2]["_aws"]["CloudWatchMetrics"][0]["Metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Publishes", "PublishFailures"]);
}

#[tokio::test]
async fn the_lambda_request_id_is_a_property_while_one_is_answered() {
    let (emf, out) = recorder(None);
    LAMBDA_REQUEST_ID
        .scope("8f1c-request".to_string(), async {
            emf.request(&request(200, false))
        })
        .await;
    emf.request(&request(200, false));
    let got = lines(&out);
    assert_eq!(got[0]["RequestId"], "8f1c-request");
    assert!(got[1].get("RequestId").is_none(), "{}", got[1]);
}

#[test]
fn each_line_is_written_whole_in_one_write() {
    let writes = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
    let sink = writes.clone();
    let emf =
        Emf::from_env(|_| None).with_sink(|| 1, move |b| sink.lock().unwrap().push(b.to_vec()));
    // A function name that needs escaping stays one line.
    let emf = Emf {
        function: Some("a\"b\nc".into()),
        ..emf
    };
    emf.request(&request(200, false));
    emf.fill(&FillRecord {
        kind: PackageKind::Provider,
        outcome: FillOutcome::Failed,
        duration: Duration::ZERO,
    });
    let writes = writes.lock().unwrap();
    assert_eq!(writes.len(), 2);
    for w in writes.iter() {
        let text = std::str::from_utf8(w).unwrap();
        assert_eq!(text.matches('\n').count(), 1, "{text:?}");
        assert!(text.ends_with('\n'));
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(v["Function"], "a\"b\nc");
    }
}
