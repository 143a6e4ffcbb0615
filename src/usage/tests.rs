use tfreg_model::usage::{Consumer, ConsumerKind, ConsumerUsage, DayCount, Package, UsageReport};

use super::*;

const NOW: u64 = 1_796_212_800; // 2026-12-02 12:00:00Z

fn answer() -> UsageAnswer {
    let day = |d: &str, platform: &str, n| DayCount {
        day: d.into(),
        platform: Some(platform.into()),
        downloads: n,
    };
    let mut lifecycle = BTreeMap::new();
    lifecycle.insert(
        "1.0.0".to_string(),
        VersionState {
            deprecated: Some("use 2.0.0".into()),
            ..VersionState::default()
        },
    );
    lifecycle.insert("2.0.0".to_string(), VersionState::default());
    UsageAnswer {
        report: UsageReport {
            package: Package::Provider {
                hostname: "registry.test".into(),
                namespace: "acme".into(),
                r#type: "null".into(),
            },
            versions: vec![
                VersionUsage {
                    version: "2.0.0".into(),
                    downloads: 0,
                    last_download: None,
                    days: vec![],
                    consumers: vec![],
                },
                VersionUsage {
                    version: "1.0.0".into(),
                    downloads: 5,
                    last_download: Some(NOW - 3600),
                    days: vec![
                        day("2026-12-02", "linux_amd64", 3),
                        day("2026-12-02", "darwin_arm64", 1),
                        day("2026-11-30", "linux_amd64", 1),
                    ],
                    consumers: vec![ConsumerUsage {
                        consumer: Consumer {
                            kind: ConsumerKind::Ci,
                            id: "ci:iss|repo:acme/infra".into(),
                            label: "acme/infra .github/workflows/plan.yml".into(),
                        },
                        downloads: 5,
                        first_seen: NOW - 2 * DAY,
                        last_seen: NOW - 3600,
                    }],
                },
            ],
        },
        lifecycle,
    }
}

#[test]
fn addresses_of_two_parts_are_providers_of_three_modules() {
    assert!(matches!(
        route_of("acme/null").unwrap(),
        AdminRoute::ProviderUsage { .. }
    ));
    assert!(matches!(
        route_of("acme/vpc/aws").unwrap(),
        AdminRoute::ModuleUsage { .. }
    ));
    for bad in ["acme", "a/b/c/d", "acme/not valid"] {
        assert!(route_of(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_table_shows_state_counts_days_platforms_and_consumers() {
    let text = table(&answer(), NOW, 3, None);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "registry.test/acme/null");
    assert!(lines[1].starts_with("VERSION") && lines[1].ends_with("LAST 3 DAYS"));
    assert!(lines[2].starts_with("2.0.0") && lines[2].contains("listed"));
    assert!(lines[2].ends_with("  ···"), "{}", lines[2]);
    assert!(lines[2].contains("          0  -  "), "{}", lines[2]);
    let v1 = lines[3];
    assert!(v1.starts_with("1.0.0") && v1.contains("deprecated") && v1.contains(" 5  "));
    // 11-30: 1, 12-01: 0, 12-02: 4.
    assert!(v1.ends_with("▂·█"), "{v1}");
    assert_eq!(lines[4].trim(), "platforms: linux_amd64 4, darwin_arm64 1");
    assert_eq!(lines[5].trim(), "deprecated: use 2.0.0");
    assert!(lines[6].trim().starts_with("CONSUMER"));
    assert!(lines[7].contains("acme/infra .github/workflows/plan.yml") && lines[7].contains("ci"));
    assert!(
        lines[7].contains("2026-11-30 12:00:00Z") && lines[7].ends_with("2026-12-02 11:00:00Z")
    );
}

#[test]
fn sparklines_scale_to_the_busiest_day() {
    assert_eq!(sparkline(&[0, 1, 8, 4]), "·▁█▄");
    assert_eq!(sparkline(&[0, 0]), "··");
    assert_eq!(sparkline(&[1000, 1]), "█▁");
}
