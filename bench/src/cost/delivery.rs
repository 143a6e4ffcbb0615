//! The two ways a deployed registry hands out archives, and what each costs:
//! `presigned` (archive URLs are the registry's `/v1/blobs/...`, answered by
//! the blob function with a presigned S3 redirect, archives leaving AWS out
//! of S3) and `cloudfront` (archive URLs are CloudFront signed URLs, answered
//! at the edge, HEAD included; S3 is read only on a cache miss, and S3 to
//! CloudFront is free). Also a month's bill with the always-free allowances
//! and the volume tiers of data transfer, for a team of a given size.

use super::{GB, Line, PerInit, price};

/// Always-free allowances a month (they do not expire after 12 months) and
/// the volume tiers of data transfer, as published (see BENCHMARKS.md for
/// the pages and the date they were read).
pub mod free {
    /// CloudFront: 1 TB out to the internet a month.
    pub const CLOUDFRONT_GB: f64 = 1024.0;
    /// CloudFront: 10,000,000 HTTP or HTTPS requests a month.
    pub const CLOUDFRONT_REQUESTS: f64 = 10_000_000.0;
    /// Data transfer out to the internet, aggregated over AWS services
    /// (S3, API Gateway; not CloudFront, which has its own): 100 GB a month.
    pub const TRANSFER_OUT_GB: f64 = 100.0;
    /// Lambda: 1,000,000 requests a month.
    pub const LAMBDA_REQUESTS: f64 = 1_000_000.0;
    /// Lambda: 400,000 GB-seconds a month.
    pub const LAMBDA_GB_SECONDS: f64 = 400_000.0;
}

/// Volume tiers of data transfer out, USD per GB, each up to the GB a month
/// it ends at (US and Europe; the last tier open-ended).
pub mod tiers {
    const TB: f64 = 1024.0;
    /// Out of AWS regions (S3, API Gateway) to the internet.
    pub const TRANSFER_OUT: &[(f64, f64)] = &[
        (10.0 * TB, 0.09),
        (50.0 * TB, 0.085),
        (150.0 * TB, 0.07),
        (f64::INFINITY, 0.05),
    ];
    /// Out of CloudFront to the internet, United States and Europe.
    pub const CLOUDFRONT: &[(f64, f64)] = &[
        (10.0 * TB, 0.085),
        (50.0 * TB, 0.080),
        (150.0 * TB, 0.060),
        (500.0 * TB, 0.040),
        (f64::INFINITY, 0.030),
    ];
}

/// How archives reach the client (`TFREG_ARCHIVE_DELIVERY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Delivery {
    Presigned,
    CloudFront,
}

impl Delivery {
    pub const ALL: [Delivery; 2] = [Delivery::Presigned, Delivery::CloudFront];

    pub fn name(self) -> &'static str {
        match self {
            Delivery::Presigned => "presigned",
            Delivery::CloudFront => "cloudfront",
        }
    }
}

/// The endpoint that answers archive URLs in `presigned` mode.
pub const BLOB: &str = "blob";

/// `cloudfront` mode derived from a `presigned` init by the protocol: every
/// archive request (a GET, or a HEAD from Terraform 1.11.0-1.12.0) goes to
/// the edge instead of the blob function, its bytes leave through CloudFront
/// instead of out of S3, and each may be a cache miss, one S3 GET (the bound:
/// immutable objects are read from S3 once per edge cache that keeps them).
pub fn derived_cloudfront(presigned: &PerInit) -> PerInit {
    let mut init = presigned.clone();
    let archives = init.function_requests.remove(BLOB).unwrap_or(0);
    init.cloudfront_requests += archives;
    init.cloudfront_bytes += init.s3_bytes;
    init.s3_requests = archives;
    init.s3_bytes = 0;
    init
}

/// USD for `gb` a month priced by `tiers` (each tier's rate for the GB in it).
pub fn tiered(gb: f64, tiers: &[(f64, f64)]) -> f64 {
    let mut usd = 0.0;
    let mut start = 0.0;
    for &(end, rate) in tiers {
        if gb <= start {
            break;
        }
        usd += (gb.min(end) - start) * rate;
        start = end;
    }
    usd
}

/// What `inits` inits a month cost, line by line: the always-free allowances
/// taken off first (CloudFront's, Lambda's, the 100 GB of transfer out), then
/// the volume tiers of transfer from their start. No free tier is counted for
/// API Gateway (its free tier lasts 12 months), DynamoDB on demand, S3
/// requests or CloudWatch Logs.
pub fn monthly(init: &PerInit, inits: f64) -> Vec<Line> {
    let invocations = init.invocations() as f64 * inits;
    let gb_seconds = invocations * init.billed_ms_per_invocation / 1000.0 * init.memory_mb / 1024.0;
    let out_gb = (init.s3_bytes + init.function_bytes) as f64 * inits / GB;
    let edge_gb = init.cloudfront_bytes as f64 * inits / GB;
    let edge_requests = init.cloudfront_requests as f64 * inits;
    let over = |used: f64, allowance: f64| (used - allowance).max(0.0);
    let mut lines = vec![
        Line {
            service: "API Gateway",
            what: format!("{invocations:.0} HTTP API requests"),
            usd_per_1000: invocations * price::API_REQUEST,
        },
        Line {
            service: "Lambda",
            what: format!("{invocations:.0} invocations (1,000,000 free)"),
            usd_per_1000: over(invocations, free::LAMBDA_REQUESTS) * price::LAMBDA_REQUEST,
        },
        Line {
            service: "Lambda",
            what: format!("{gb_seconds:.0} GB-s (400,000 free)"),
            usd_per_1000: over(gb_seconds, free::LAMBDA_GB_SECONDS) * price::LAMBDA_GB_SECOND_ARM64,
        },
        Line {
            service: "DynamoDB",
            what: format!("{:.0} read units", init.dynamodb_read_units * inits),
            usd_per_1000: init.dynamodb_read_units * inits * price::DYNAMODB_READ_UNIT,
        },
        Line {
            service: "S3",
            what: format!("{:.0} GET/HEAD", init.s3_requests as f64 * inits),
            usd_per_1000: init.s3_requests as f64 * inits * price::S3_GET,
        },
        Line {
            service: "Data transfer",
            what: format!("{out_gb:.1} GB out of S3 and the API (100 GB free)"),
            usd_per_1000: tiered(over(out_gb, free::TRANSFER_OUT_GB), tiers::TRANSFER_OUT),
        },
        Line {
            service: "CloudFront",
            what: format!("{edge_requests:.0} requests (10,000,000 free)"),
            usd_per_1000: over(edge_requests, free::CLOUDFRONT_REQUESTS)
                * price::CLOUDFRONT_REQUEST,
        },
        Line {
            service: "CloudFront",
            what: format!("{edge_gb:.1} GB out (1 TB free)"),
            usd_per_1000: tiered(over(edge_gb, free::CLOUDFRONT_GB), tiers::CLOUDFRONT),
        },
        Line {
            service: "CloudWatch Logs",
            what: format!(
                "{:.2} GB ingested",
                invocations * init.log_bytes_per_invocation / GB
            ),
            usd_per_1000: invocations * init.log_bytes_per_invocation / GB
                * price::LOGS_INGESTED_GB,
        },
    ];
    lines.sort_by(|a, b| b.usd_per_1000.total_cmp(&a.usd_per_1000));
    lines
}

/// USD per 1,000 inits while every always-free allowance still has room
/// (the first inits of a month).
pub fn inside_free_tier(init: &PerInit) -> f64 {
    super::total(&monthly(init, 1.0)) * 1000.0
}

/// Inits a month before the first of the allowances that bound the archives
/// (transfer out: 100 GB out of S3, or CloudFront's 1 TB and 10,000,000
/// requests) is used up.
pub fn free_inits_per_month(init: &PerInit) -> f64 {
    let per = |allowance: f64, used: f64| {
        if used > 0.0 {
            allowance / used
        } else {
            f64::INFINITY
        }
    };
    let out = per(
        free::TRANSFER_OUT_GB,
        (init.s3_bytes + init.function_bytes) as f64 / GB,
    );
    let edge = per(free::CLOUDFRONT_GB, init.cloudfront_bytes as f64 / GB).min(per(
        free::CLOUDFRONT_REQUESTS,
        init.cloudfront_requests as f64,
    ));
    if init.s3_bytes > 0 {
        out
    } else {
        edge.min(out)
    }
}

/// A team: inits a day, 30 days a month.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Team {
    pub name: &'static str,
    pub inits_per_day: f64,
}

impl Team {
    pub fn inits_per_month(&self) -> f64 {
        self.inits_per_day * 30.0
    }
}

/// The three team sizes of the monthly bills.
pub const TEAMS: [Team; 3] = [
    Team {
        name: "small team",
        inits_per_day: 20.0,
    },
    Team {
        name: "large team",
        inits_per_day: 500.0,
    },
    Team {
        name: "organisation (CI on every commit)",
        inits_per_day: 20_000.0,
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// The e2e run's figures: 40 API requests + 50 archive requests, 68 MB.
    fn presigned() -> PerInit {
        PerInit {
            function_requests: BTreeMap::from([
                ("blob".to_string(), 50),
                ("provider-download".to_string(), 40),
            ]),
            cloudfront_requests: 1,
            cloudfront_bytes: 127,
            s3_requests: 50,
            s3_bytes: 67_947_521,
            function_bytes: 0,
            dynamodb_read_units: 44.0,
            log_bytes_per_invocation: 780.0,
            billed_ms_per_invocation: 6.0,
            memory_mb: 256.0,
        }
    }

    #[test]
    fn cloudfront_moves_the_archives_from_the_blob_function_to_the_edge() {
        let edge = derived_cloudfront(&presigned());
        assert_eq!(edge.invocations(), 40);
        assert!(!edge.function_requests.contains_key(BLOB));
        assert_eq!(edge.cloudfront_requests, 51);
        assert_eq!(edge.cloudfront_bytes, 67_947_521 + 127);
        assert_eq!(edge.s3_bytes, 0);
        // At most one S3 GET per archive request: each a miss.
        assert_eq!(edge.s3_requests, 50);
    }

    #[test]
    fn tiers_price_each_gb_at_its_tier() {
        let t = &[(10.0, 1.0), (20.0, 0.5), (f64::INFINITY, 0.1)];
        assert_eq!(tiered(0.0, t), 0.0);
        assert_eq!(tiered(4.0, t), 4.0);
        assert_eq!(tiered(15.0, t), 10.0 + 2.5);
        assert!((tiered(30.0, t) - (10.0 + 5.0 + 1.0)).abs() < 1e-12);
    }

    #[test]
    fn allowances_come_off_before_the_price() {
        let edge = derived_cloudfront(&presigned());
        // 1,000 inits: 63 GB through CloudFront, inside its 1 TB; 51,000
        // requests, inside its 10 million: no CloudFront line to pay.
        let month = monthly(&edge, 1000.0);
        let cloudfront: f64 = month
            .iter()
            .filter(|l| l.service == "CloudFront")
            .map(|l| l.usd_per_1000)
            .sum();
        assert_eq!(cloudfront, 0.0);
        // 100,000 inits: 6.3 TB, of which 5.3 TB are paid at USD 0.085/GB.
        let gb = 100_000.0 * edge.cloudfront_bytes as f64 / GB;
        let paid = month_line(&monthly(&edge, 100_000.0), "GB out");
        assert!((paid - (gb - 1024.0) * 0.085).abs() < 1e-6, "{paid}");
        // Presigned: 100 GB free, then USD 0.09/GB.
        let gb = 10_000.0 * presigned().s3_bytes as f64 / GB;
        let paid = month_line(&monthly(&presigned(), 10_000.0), "GB out of S3");
        assert!((paid - (gb - 100.0) * 0.09).abs() < 1e-6, "{paid}");
    }

    fn month_line(lines: &[Line], what: &str) -> f64 {
        lines
            .iter()
            .find(|l| l.what.contains(what))
            .unwrap()
            .usd_per_1000
    }

    #[test]
    fn inside_the_free_tier_cloudfront_meets_the_goal_and_presigned_only_briefly() {
        let p = presigned();
        let edge = derived_cloudfront(&p);
        // The goal: at most USD 0.25 per 1,000 inits under 1 TB a month.
        let under_1_tb = 15_000.0;
        assert!(super::super::total(&monthly(&edge, under_1_tb)) / 15.0 <= 0.25);
        assert!(super::super::total(&monthly(&p, under_1_tb)) / 15.0 > 0.25);
        // Presigned's free transfer lasts ~1,580 inits; CloudFront's ~16,000.
        assert!((free_inits_per_month(&p) - 1580.0).abs() < 5.0);
        assert!((free_inits_per_month(&edge) - 16_180.0).abs() < 20.0);
        assert!(inside_free_tier(&edge) < inside_free_tier(&p));
    }
}
