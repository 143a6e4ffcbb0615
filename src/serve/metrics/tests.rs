use std::time::Duration;

use tfreg_http::metrics::{
    FillOutcome, FillRecord, PackageKind, PublishOutcome, PublishRecord, Recorder, RequestRecord,
};

use super::Prometheus;

#[test]
fn the_exposition_names_each_metric_with_its_labels() {
    let p = Prometheus::new();
    for status in [200, 200, 404] {
        p.request(&RequestRecord {
            endpoint: "provider_versions",
            status,
            latency: Duration::from_millis(30),
            cold_start: false,
        });
    }
    p.fill(&FillRecord {
        kind: PackageKind::Module,
        outcome: FillOutcome::OriginFailed,
        duration: Duration::from_secs(2),
    });
    p.publish(&PublishRecord {
        kind: PackageKind::Provider,
        outcome: PublishOutcome::Refused,
    });
    let text = p.encode();
    for line in [
        "# TYPE tfreg_requests counter",
        r#"tfreg_requests_total{endpoint="provider_versions",status_class="2xx"} 2"#,
        r#"tfreg_requests_total{endpoint="provider_versions",status_class="4xx"} 1"#,
        "# TYPE tfreg_request_duration_seconds histogram",
        r#"tfreg_request_duration_seconds_count{endpoint="provider_versions"} 3"#,
        r#"tfreg_request_duration_seconds_bucket{le="0.025",endpoint="provider_versions"} 0"#,
        r#"tfreg_request_duration_seconds_bucket{le="0.05",endpoint="provider_versions"} 3"#,
        r#"tfreg_fills_total{kind="module",outcome="origin_failed"} 1"#,
        r#"tfreg_fill_duration_seconds_count{kind="module"} 1"#,
        r#"tfreg_publishes_total{kind="provider",outcome="refused"} 1"#,
        "# EOF",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
}
