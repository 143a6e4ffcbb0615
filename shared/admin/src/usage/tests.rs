use tfreg_model::usage::{Consumer, ConsumerKind, ConsumerUsage, DayCount};
use tfreg_store::catalog::index::Listing;

use super::*;

fn listing(version: &str, deprecated: Option<&str>, yanked: bool) -> Listing {
    Listing {
        version: version.into(),
        protocols: vec![],
        platforms: vec![],
        deprecated: deprecated.map(str::to_string),
        yanked,
    }
}

fn counted(version: &str, downloads: u64) -> VersionUsage {
    VersionUsage {
        version: version.into(),
        downloads,
        last_download: Some(1_000),
        days: vec![DayCount {
            day: "1970-01-01".into(),
            platform: None,
            downloads,
        }],
        consumers: vec![ConsumerUsage {
            consumer: Consumer {
                kind: ConsumerKind::Token,
                id: "token:0123456789ab".into(),
                label: "ci (0123456789ab)".into(),
            },
            downloads,
            first_seen: 900,
            last_seen: 1_000,
        }],
    }
}

fn package() -> Package {
    module_package(
        &Hostname::parse("registry.test").unwrap(),
        &ModuleName::parse("acme", "vpc", "aws").unwrap(),
    )
}

#[test]
fn the_query_takes_version_and_host_and_nothing_else() {
    assert_eq!(UsageQuery::parse(None).unwrap(), UsageQuery::default());
    let q = UsageQuery::parse(Some("version=1.2.0&host=registry.terraform.io")).unwrap();
    assert_eq!(q.version.unwrap().to_string(), "1.2.0");
    assert_eq!(q.host.unwrap().as_str(), "registry.terraform.io");
    for bad in [
        "version=1.x",
        "version=",
        "host=exa%20mple",
        "hosts=x.test",
        "version=1.0.0&version=2.0.0",
        "consumers=false",
    ] {
        let err = UsageQuery::parse(Some(bad)).unwrap_err();
        assert_eq!(err.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
}

#[test]
fn every_version_is_listed_newest_first_with_its_lifecycle() {
    let index = VersionIndex::of(
        1,
        [
            listing("1.0.0", Some("use 2"), false),
            listing("1.10.0", None, true),
            listing("2.0.0", None, false),
        ],
    );
    let report = UsageReport {
        package: package(),
        // 0.9.0 was counted, then deleted.
        versions: vec![counted("1.0.0", 7), counted("0.9.0", 2)],
    };
    let answer = complete(report, Some(&index), None);
    let versions: Vec<_> = answer
        .report
        .versions
        .iter()
        .map(|v| (v.version.as_str(), v.downloads))
        .collect();
    assert_eq!(
        versions,
        [("2.0.0", 0), ("1.10.0", 0), ("1.0.0", 7), ("0.9.0", 2)]
    );
    let state = |v: &str| answer.lifecycle[v].describe();
    assert_eq!(state("1.0.0"), "deprecated");
    assert_eq!(state("1.10.0"), "yanked");
    assert_eq!(state("2.0.0"), "listed");
    assert_eq!(state("0.9.0"), "deleted");
    // The wire form reads back, as a plain UsageReport too.
    let text = serde_json::to_string(&answer).unwrap();
    assert_eq!(serde_json::from_str::<UsageAnswer>(&text).unwrap(), answer);
    let plain: UsageReport = serde_json::from_str(&text).unwrap();
    assert_eq!(plain, answer.report);
}

#[test]
fn one_version_asked_lists_that_one() {
    let index = VersionIndex::of(
        1,
        [listing("1.0.0", None, false), listing("2.0.0", None, false)],
    );
    let empty = UsageReport {
        package: package(),
        versions: vec![],
    };
    let answer = complete(empty.clone(), Some(&index), Some("2.0.0"));
    assert_eq!(answer.report.versions.len(), 1);
    assert_eq!(answer.report.versions[0].version, "2.0.0");
    assert_eq!(answer.report.versions[0].downloads, 0);
    // Not in the index nor counted: nothing (the handler's 404).
    assert!(
        complete(empty.clone(), Some(&index), Some("3.0.0"))
            .report
            .versions
            .is_empty()
    );
    // No index (a cached package): the counts as they are, no lifecycle.
    let answer = complete(empty, None, None);
    assert!(answer.report.versions.is_empty() && answer.lifecycle.is_empty());
}

#[test]
fn force_is_true_or_false() {
    assert!(!force_of(None).unwrap());
    assert!(force_of(Some("force=true")).unwrap());
    assert!(!force_of(Some("force=false")).unwrap());
    assert_eq!(
        force_of(Some("force=yes")).unwrap_err().status(),
        StatusCode::BAD_REQUEST
    );
}
