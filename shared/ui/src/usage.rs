//! A version page's downloads (issue 38): its counts for every reader
//! (in all, the last [`RECENT_DAYS`] days as bars, per platform for a
//! provider), its consumers only for whoever may read them through the
//! admin API ([`AdminRoute::ProviderUsage`]'s rule: an admin of the
//! namespace). A reader's page is built from a report read without
//! consumers, so no consumer's name is in its HTML.

use std::collections::BTreeMap;

use tfreg_http::Registry;
use tfreg_model::router::{AdminRoute, Route};
use tfreg_model::token::{Access, Principal};
use tfreg_model::usage::{ConsumerKind, Package, VersionUsage};
use tfreg_store::catalog::usage;

/// The days the page's bars cover (and its "last N days" count).
pub const RECENT_DAYS: u64 = 30;
const DAY: u64 = 86_400;
/// The bars' drawing: each bar's width and the gap after it, the height.
const BAR_W: u64 = 6;
const BAR_GAP: u64 = 2;
const BARS_H: u64 = 40;

/// One day's bar (SVG attributes: no inline style, as the CSP wants).
#[derive(Debug, Clone)]
pub struct Bar {
    pub x: u64,
    pub y: u64,
    pub height: u64,
    /// `2026-12-02: 3 downloads`.
    pub title: String,
}

/// One consumer's row.
#[derive(Debug, Clone)]
pub struct ConsumerRow {
    pub label: String,
    pub kind: &'static str,
    pub downloads: u64,
    pub first_seen: String,
    pub last_seen: String,
}

/// What the page shows of a version's downloads.
#[derive(Debug, Clone)]
pub struct UsageView {
    pub total: u64,
    pub recent: u64,
    pub recent_days: u64,
    /// `2026-12-02`, or empty: never.
    pub last_download: String,
    pub bars: Vec<Bar>,
    pub width: u64,
    pub height: u64,
    /// `linux_amd64` and its downloads (the days kept), most first.
    pub platforms: Vec<(String, u64)>,
    /// `None`: this reader may not see them.
    pub consumers: Option<Vec<ConsumerRow>>,
}

/// May `principal` see the consumers of a package `route` names: does it
/// meet what the route needs (the pipeline's own rule)?
pub fn may_see_consumers(registry: &Registry, principal: &Principal, route: AdminRoute) -> bool {
    let route = Route::Admin(route);
    match route.access(&registry.config.hostname) {
        Access::Token { scope, realm } => match principal {
            Principal::Operator => true,
            Principal::Anonymous => false,
            Principal::Token(record) => record.allows(scope, realm),
        },
        Access::Public | Access::Session => false,
    }
}

/// The downloads of `version` of `package`, its consumers when `consumers`;
/// `None` where the counts cannot be read now (the page is shown without).
pub async fn view(
    registry: &Registry,
    package: &Package,
    version: &str,
    consumers: bool,
) -> Option<UsageView> {
    let report = usage::report(registry.items.as_ref(), package, Some(version), consumers).await;
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(package = %package.address(), version, error = %e, "cannot read the download counts");
            return None;
        }
    };
    let counted = report.versions.into_iter().find(|v| v.version == version);
    let empty = VersionUsage {
        version: version.to_string(),
        downloads: 0,
        last_download: None,
        days: vec![],
        consumers: vec![],
    };
    Some(of(&counted.unwrap_or(empty), registry.now(), consumers))
}

/// The view of `v` at `now`.
pub fn of(v: &VersionUsage, now: u64, consumers: bool) -> UsageView {
    let mut by_day: BTreeMap<&str, u64> = BTreeMap::new();
    let mut by_platform: BTreeMap<&str, u64> = BTreeMap::new();
    for d in &v.days {
        *by_day.entry(&d.day).or_default() += d.downloads;
        if let Some(p) = &d.platform {
            *by_platform.entry(p).or_default() += d.downloads;
        }
    }
    let days: Vec<(String, u64)> = (0..RECENT_DAYS)
        .rev()
        .map(|i| {
            let day = tfreg_model::date::ymd(now.saturating_sub(i * DAY));
            let n = by_day.get(day.as_str()).copied().unwrap_or(0);
            (day, n)
        })
        .collect();
    let top = days.iter().map(|d| d.1).max().unwrap_or(0).max(1);
    let bars = days
        .iter()
        .enumerate()
        .map(|(i, (day, n))| {
            // At least a sliver for a day with downloads; none without.
            let height = if *n == 0 {
                0
            } else {
                (n * BARS_H).div_ceil(top).max(2)
            };
            Bar {
                x: i as u64 * (BAR_W + BAR_GAP),
                y: BARS_H - height,
                height,
                title: format!("{day}: {n} download{}", if *n == 1 { "" } else { "s" }),
            }
        })
        .collect();
    let mut platforms: Vec<(String, u64)> = by_platform
        .into_iter()
        .map(|(p, n)| (p.to_string(), n))
        .collect();
    platforms.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    UsageView {
        total: v.downloads,
        recent: days.iter().map(|d| d.1).sum(),
        recent_days: RECENT_DAYS,
        last_download: v
            .last_download
            .map(tfreg_model::date::ymd)
            .unwrap_or_default(),
        bars,
        width: RECENT_DAYS * (BAR_W + BAR_GAP) - BAR_GAP,
        height: BARS_H,
        platforms,
        consumers: consumers.then(|| {
            v.consumers
                .iter()
                .map(|c| ConsumerRow {
                    label: c.consumer.label.clone(),
                    kind: match c.consumer.kind {
                        ConsumerKind::Token => "token",
                        ConsumerKind::Sso => "SSO",
                        ConsumerKind::Ci => "CI",
                        ConsumerKind::Anonymous => "anonymous",
                    },
                    downloads: c.downloads,
                    first_seen: tfreg_model::date::ymd(c.first_seen),
                    last_seen: tfreg_model::date::ymd(c.last_seen),
                })
                .collect()
        }),
    }
}

#[cfg(test)]
mod tests {
    use tfreg_model::usage::{Consumer, ConsumerUsage, DayCount};

    use super::*;

    #[test]
    fn bars_cover_the_last_days_and_consumers_only_when_asked() {
        let now = 1_796_212_800; // 2026-12-02 12:00Z
        let v = VersionUsage {
            version: "1.0.0".into(),
            downloads: 9,
            last_download: Some(now),
            days: vec![
                DayCount {
                    day: "2026-12-02".into(),
                    platform: Some("linux_amd64".into()),
                    downloads: 4,
                },
                DayCount {
                    day: "2026-12-02".into(),
                    platform: Some("darwin_arm64".into()),
                    downloads: 4,
                },
                // Older than the bars: in the total and per platform only.
                DayCount {
                    day: "2026-10-01".into(),
                    platform: Some("linux_amd64".into()),
                    downloads: 1,
                },
            ],
            consumers: vec![ConsumerUsage {
                consumer: Consumer {
                    kind: ConsumerKind::Sso,
                    id: "sso:iss|alice".into(),
                    label: "alice@example.com".into(),
                },
                downloads: 9,
                first_seen: now - 60 * DAY,
                last_seen: now,
            }],
        };
        let view = of(&v, now, false);
        assert_eq!((view.total, view.recent), (9, 8));
        assert_eq!(view.bars.len(), RECENT_DAYS as usize);
        let last = view.bars.last().unwrap();
        assert_eq!((last.height, last.y), (BARS_H, 0));
        assert_eq!(last.title, "2026-12-02: 8 downloads");
        assert!(view.bars[..29].iter().all(|b| b.height == 0));
        assert_eq!(
            view.platforms,
            [
                ("linux_amd64".to_string(), 5),
                ("darwin_arm64".to_string(), 4)
            ]
        );
        assert!(view.consumers.is_none());
        let rows = of(&v, now, true).consumers.unwrap();
        assert_eq!(rows[0].label, "alice@example.com");
        assert_eq!(rows[0].kind, "SSO");
        assert_eq!(rows[0].last_seen, "2026-12-02");
    }
}
