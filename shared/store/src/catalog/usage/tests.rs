use tfreg_model::usage::{ConsumerKind, Download, Package};

use super::*;
use crate::sqlite::SqliteStore;

fn provider() -> Package {
    Package::Provider {
        hostname: "registry.example.com".into(),
        namespace: "acme".into(),
        r#type: "null".into(),
    }
}

fn consumer(id: &str) -> Consumer {
    Consumer {
        kind: ConsumerKind::Token,
        id: format!("token:{id}"),
        label: format!("t ({id})"),
    }
}

fn download(version: &str, platform: Option<&str>, who: &str, at: u64) -> Download {
    Download {
        package: provider(),
        version: version.into(),
        platform: platform.map(String::from),
        consumer: consumer(who),
        at,
    }
}

const DAY1: u64 = 1_764_633_600; // 2025-12-02T00:00:00Z

#[tokio::test]
async fn a_batch_is_one_add_per_counter_and_reports_sum_it() {
    let store = SqliteStore::in_memory().unwrap();
    let batch = [
        download("1.0.0", Some("linux_amd64"), "a", DAY1 + 10),
        download("1.0.0", Some("linux_amd64"), "a", DAY1 + 20),
        download("1.0.0", Some("darwin_arm64"), "b", DAY1 + 30),
        download("1.0.0", Some("linux_amd64"), "b", DAY1 + 86_400 + 5),
        download("1.10.0", Some("linux_amd64"), "a", DAY1 + 40),
        download("1.2.0", None, "a", DAY1 + 50),
    ];
    let mut tally = Tally::new();
    for d in &batch {
        tally.count(d);
    }
    assert_eq!(tally.downloads(), 6);
    // Days: 1.0.0 x (day1 linux, day1 darwin, day2 linux), 1.10.0, 1.2.0;
    // consumers: 1.0.0 x (a, b), 1.10.0 a, 1.2.0 a.
    assert_eq!(tally.counters(), 5 + 4);
    add(&store, &batch).await.unwrap();
    // Again: the counts add up.
    add(&store, &batch[..1]).await.unwrap();

    let report = report(&store, &provider(), None, true).await.unwrap();
    let versions: Vec<&str> = report.versions.iter().map(|v| v.version.as_str()).collect();
    assert_eq!(
        versions,
        ["1.10.0", "1.2.0", "1.0.0"],
        "semver, newest first"
    );
    let v1 = &report.versions[2];
    assert_eq!(v1.downloads, 5);
    assert_eq!(v1.last_download, Some(DAY1 + 86_400 + 5));
    let days: Vec<(&str, Option<&str>, u64)> = v1
        .days
        .iter()
        .map(|d| (d.day.as_str(), d.platform.as_deref(), d.downloads))
        .collect();
    assert_eq!(
        days,
        [
            ("2025-12-03", Some("linux_amd64"), 1),
            ("2025-12-02", Some("darwin_arm64"), 1),
            ("2025-12-02", Some("linux_amd64"), 3),
        ]
    );
    let seen: Vec<(&str, u64, u64, u64)> = v1
        .consumers
        .iter()
        .map(|c| {
            (
                c.consumer.id.as_str(),
                c.downloads,
                c.first_seen,
                c.last_seen,
            )
        })
        .collect();
    // b was seen last (day 2); a's last add was the second batch's
    // (at DAY1 + 10: each add sets its own time).
    assert_eq!(
        seen,
        [
            ("token:b", 2, DAY1 + 86_400 + 5, DAY1 + 86_400 + 5),
            ("token:a", 3, DAY1 + 20, DAY1 + 10),
        ]
    );
    let v12 = &report.versions[1];
    assert_eq!(v12.days[0].platform, None, "a mirror download shows none");

    // One version; consumers left out.
    let one = report_of(&store, Some("1.0.0"), false).await;
    assert_eq!(one.versions.len(), 1);
    assert_eq!(one.versions[0].downloads, 5);
    assert!(one.versions[0].consumers.is_empty());
    assert_eq!(one.versions[0].days.len(), 3);
    // A version with no downloads, another package: nothing.
    assert!(
        report_of(&store, Some("9.9.9"), true)
            .await
            .versions
            .is_empty()
    );
}

async fn report_of(store: &SqliteStore, version: Option<&str>, consumers: bool) -> UsageReport {
    report(store, &provider(), version, consumers)
        .await
        .unwrap()
}

#[tokio::test]
async fn day_counters_expire_after_the_days_kept_consumers_never() {
    let store = SqliteStore::in_memory().unwrap();
    add(&store, &[download("1.0.0", None, "a", DAY1 + 10)])
        .await
        .unwrap();
    let items = query_all(&store, &usage_pk(&provider()), "").await.unwrap();
    let day = items.iter().find(|i| i.sk.starts_with("DAY#")).unwrap();
    assert_eq!(day.sk, "DAY#1.0.0#2025-12-02#-");
    assert_eq!(day.expires_at, Some(DAY1 + 86_400 + DAYS_KEPT * 86_400));
    let consumer = items
        .iter()
        .find(|i| i.sk.starts_with("CONSUMER#"))
        .unwrap();
    assert_eq!(consumer.sk, "CONSUMER#1.0.0#token:a");
    assert_eq!(consumer.expires_at, None);
    assert_eq!(consumer.counter.unwrap().n, 1);
}

#[tokio::test]
async fn the_latest_label_wins_and_a_failed_batch_can_be_put_back() {
    let mut tally = Tally::new();
    let mut renamed = download("1.0.0", None, "a", DAY1 + 20);
    renamed.consumer.label = "renamed (a)".into();
    tally.count(&renamed);
    tally.count(&download("1.0.0", None, "a", DAY1 + 10));
    let mut other = Tally::new();
    other.count(&download("1.0.0", None, "a", DAY1 + 5));
    tally.merge(other);
    assert_eq!(tally.downloads(), 3);
    assert_eq!(tally.counters(), 2);
    let adds: Vec<Add> = tally.adds().collect();
    assert!(
        adds.iter().all(|a| a.by == 3 && a.at == DAY1 + 20),
        "{adds:?}"
    );
    let store = SqliteStore::in_memory().unwrap();
    tally.write(&store).await.unwrap();
    let r = report(&store, &provider(), None, true).await.unwrap();
    assert_eq!(r.versions[0].consumers[0].consumer.label, "renamed (a)");
}
