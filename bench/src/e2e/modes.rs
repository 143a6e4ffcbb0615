//! The e2e run's two archive modes side by side: what one init asks of each
//! part of the stack and of the client, USD per 1,000 inits inside and beyond
//! the free tier, and a month's bill for three team sizes. The `presigned`
//! figures are the run's counts; the `cloudfront` ones are counted when the
//! run had the functions behind the CloudFront stand-in (the `lambda-edge`
//! subject), else derived from the protocol ([`delivery::derived_cloudfront`]).

use std::collections::BTreeMap;

use super::field;
use crate::cost::delivery::{self, BLOB, Delivery, TEAMS};
use crate::cost::{self, PerInit};

/// Requests of one init by `METHOD status` on one endpoint (the archive
/// URLs: GET answered 307 to S3, HEAD answered by the function).
pub(crate) fn by_method(lines: &[String], endpoint: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in lines {
        if field(line, "endpoint").as_deref() != Some(endpoint) {
            continue;
        }
        let method = field(line, "method").unwrap_or_default();
        let status = field(line, "status").unwrap_or_default();
        *counts.entry(format!("{method} {status}")).or_insert(0) += 1;
    }
    counts
}

/// What the CloudFront stand-in answered during one init (its request log,
/// one JSON line a request), by `METHOD status`, and how many it refused.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub(crate) struct EdgeCount {
    pub(crate) by_method: BTreeMap<String, u64>,
    /// Forwarded to the bucket: every request it allows (it keeps no
    /// cache), so each is the S3 GET or HEAD of a miss.
    pub(crate) origin: u64,
    pub(crate) refused: u64,
}

impl EdgeCount {
    pub(crate) fn from_log(lines: &[String]) -> EdgeCount {
        let mut count = EdgeCount::default();
        for line in lines {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            let method = v["method"].as_str().unwrap_or("?");
            let status = v["status"].as_u64().unwrap_or(0);
            *count
                .by_method
                .entry(format!("{method} {status}"))
                .or_insert(0) += 1;
            if v["refused"].is_null() {
                count.origin += 1;
            } else {
                count.refused += 1;
            }
        }
        count
    }

    pub(crate) fn requests(&self) -> u64 {
        self.by_method.values().sum()
    }
}

/// `cloudfront` mode from the counts of the functions behind the stand-in:
/// their requests (discovery aside: CloudFront serves it), the edge's
/// requests and the misses it forwarded to S3; the rest as in `presigned`.
pub(crate) fn counted_cloudfront(
    presigned: &PerInit,
    functions: &BTreeMap<String, u64>,
    edge: &EdgeCount,
) -> PerInit {
    let mut init = presigned.clone();
    init.function_requests = functions
        .iter()
        .filter(|(e, _)| e.as_str() != "discovery")
        .map(|(e, n)| (e.clone(), *n))
        .collect();
    init.cloudfront_requests = presigned.cloudfront_requests + edge.requests();
    init.cloudfront_bytes = presigned.cloudfront_bytes + presigned.s3_bytes;
    init.s3_requests = edge.origin;
    init.s3_bytes = 0;
    init
}

/// Both modes' per-init figures and where the `cloudfront` ones come from.
pub(crate) struct Modes {
    pub(crate) presigned: PerInit,
    pub(crate) cloudfront: PerInit,
    /// `presigned`'s archive requests by `METHOD status` (the Lambda subject's).
    pub(crate) blob: BTreeMap<String, u64>,
    /// The stand-in's count, when the run had it.
    pub(crate) edge: Option<EdgeCount>,
    /// Why the `cloudfront` counts are derived, when they are.
    pub(crate) derived_because: &'static str,
}

/// The reasons [`Modes::derived_because`] gives.
pub(crate) const NO_STAND_IN: &str = "this checkout's scripts/lambda-local has no cloudfront mode";
pub(crate) const NOT_AT_THE_EDGE: &str = "the functions started in cloudfront mode handed out their own archive URLs (no archive request reached the stand-in: functions without that mode)";

impl Modes {
    fn init(&self, mode: Delivery) -> &PerInit {
        match mode {
            Delivery::Presigned => &self.presigned,
            Delivery::CloudFront => &self.cloudfront,
        }
    }

    fn source(&self) -> &'static str {
        if self.edge.is_some() {
            "counted"
        } else {
            "derived"
        }
    }

    /// The Markdown: requests and round trips, USD per 1,000 inits, the
    /// bills of three teams, the prices and where they come from.
    pub(crate) fn markdown(&self) -> String {
        let (p, c) = (&self.presigned, &self.cloudfront);
        let gets = count_of(&self.blob, "GET");
        let heads = count_of(&self.blob, "HEAD");
        let archives = gets + heads;
        let redirected = self.blob.get("GET 307").copied().unwrap_or(0);
        let api = |i: &PerInit| i.invocations();
        // A client's HTTP requests: discovery, the API, each archive URL, and
        // in presigned mode each redirect followed to S3.
        let client_p = p.cloudfront_requests + api(p) + redirected;
        let client_c = c.cloudfront_requests + api(c);
        let src = self.source();
        let edge_note = match &self.edge {
            Some(e) => format!(
                "Counted: the `presigned` column from the Lambda functions' request lines of one init; the `cloudfront` column from an init of the same configuration against the functions with `TFREG_ARCHIVE_DELIVERY=cloudfront` behind the CloudFront stand-in (tests/suite/support/cloudfront-edge.py, which checks each signed URL as CloudFront does and forwards it to the S3 emulator): its request log ({} requests: {}; {} refused) and the functions' request lines. The stand-in keeps no cache, so every request it allows is counted as a miss, one S3 request: the bound (CloudFront reads an immutable object from S3 once per edge cache that keeps it).",
                e.requests(),
                e.by_method
                    .iter()
                    .map(|(k, n)| format!("{n} × {k}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                e.refused,
            ),
            None => format!(
                "Derived for `cloudfront` ({}): from the `presigned` counts by the protocol, each archive URL one request to the edge (a GET, or a HEAD) instead of the blob function, each at most one S3 request (a miss). The `presigned` column is counted.",
                self.derived_because
            ),
        };
        let mut md = format!(
            "### Two archive modes: requests per init and a client's round trips\n\n\
             `presigned` (`TFREG_ARCHIVE_DELIVERY` unset or `presigned`): archive URLs are the registry's `/v1/blobs/...`, each answered by the blob function (a 307 to a presigned S3 URL for a GET; a HEAD answered by the function, which asks S3 for the length). `cloudfront`: archive URLs are CloudFront signed URLs (canned policy), answered at the edge, HEAD included; S3 is read through origin access control on a miss only. {edge_note}\n\n\
             | per init | presigned | cloudfront ({src}) |\n|---|---:|---:|\n\
             | HTTP API requests = Lambda invocations | {} | {} |\n\
             | of which the blob function | {} | {} |\n\
             | CloudFront requests (discovery; archives in cloudfront mode) | {} | {} |\n\
             | S3 GET/HEAD requests | {} | {} (at most: one per miss) |\n\
             | DynamoDB read units | {:.0} | {:.0} |\n\
             | archive bytes out of S3 to the internet | {:.1} MB | 0 (S3 to CloudFront is free) |\n\
             | archive bytes out of CloudFront | 0 | {:.1} MB |\n\
             | a client's HTTP requests in all | {client_p} | {client_c} |\n\n\
             | archive request (of {archives} an init: {gets} GET, {heads} HEAD) | presigned | cloudfront |\n|---|---|---|\n\
             | GET | 2 round trips, 2 hosts: the archive URL (API Gateway, the blob function: 307), then the presigned URL (S3) | 1 round trip: the signed URL at the edge (a miss: the edge reads S3, inside AWS) |\n\
             | HEAD (Terraform 1.11.0 and later: {heads} an init here) | 1 round trip (API Gateway, the blob function, which makes one S3 HeadObject) | 1 round trip: the edge |\n\
             | what a slow archive waits for | a blob function cold start on its path (see the lambda section) | none: no function on the path |\n\n",
            api(p),
            api(c),
            p.function_requests.get(BLOB).copied().unwrap_or(0),
            c.function_requests.get(BLOB).copied().unwrap_or(0),
            p.cloudfront_requests,
            c.cloudfront_requests,
            p.s3_requests,
            c.s3_requests,
            p.dynamodb_read_units,
            c.dynamodb_read_units,
            p.s3_bytes as f64 / 1e6,
            c.cloudfront_bytes as f64 / 1e6,
        );
        md += "### Cost of 1,000 inits, each mode\n\n*Inside the free tier*: the first inits of a month, while the always-free allowances have room (CloudFront's 1 TB out and 10,000,000 requests; 100 GB of data transfer out of AWS a month, which presigned archives use; Lambda's 1,000,000 requests and 400,000 GB-s). *Beyond it*: every line at the first paid tier, no allowance left (e.g. 10 TB of archives a month).\n\n| mode | inside the free tier (USD per 1,000 inits) | beyond it (USD per 1,000 inits) | free transfer lasts (inits a month) | largest line beyond it |\n|---|---:|---:|---:|---|\n";
        for mode in Delivery::ALL {
            let init = self.init(mode);
            let beyond = cost::per_thousand_inits(init);
            md += &format!(
                "| {} | {:.3} | {:.3} | {:.0} | {} ({:.0}%) |\n",
                mode.name(),
                delivery::inside_free_tier(init),
                cost::total(&beyond),
                delivery::free_inits_per_month(init),
                beyond[0].service,
                beyond[0].usd_per_1000 / cost::total(&beyond) * 100.0,
            );
        }
        md += &format!(
            "\n`cloudfront` beyond the free tier, line by line (`presigned`'s is the table above):\n\n{}\n",
            cost::table(&cost::per_thousand_inits(c), "USD per 1,000 inits")
        );
        md += "### A month's bill for three team sizes\n\nThe 10 providers + 10 modules configuration above, from nothing each time (CI runners keep no plugin cache), 30 days a month; the allowances taken off first, then data transfer's volume tiers (S3 out: USD 0.09/GB to 10 TB, 0.085 to 50 TB; CloudFront: 0.085/GB to 10 TB, 0.080 to 50 TB). No free tier counted for API Gateway (12 months only), DynamoDB, S3 requests or logs.\n\n| team | inits a day | archives out a month | presigned (USD a month) | cloudfront (USD a month) | cloudfront, USD per 1,000 inits |\n|---|---:|---:|---:|---:|---:|\n";
        let mut goal = String::new();
        let mut cheaper_everywhere = true;
        let mut largest = ("", 0.0);
        for team in TEAMS {
            let n = team.inits_per_month();
            let bill = |init: &PerInit| cost::total(&delivery::monthly(init, n));
            let tb = n * (p.s3_bytes as f64) / (1024f64.powi(4));
            let (bp, bc) = (bill(p), bill(c));
            cheaper_everywhere &= bc <= bp;
            largest = (team.name, (1.0 - bc / bp) * 100.0);
            md += &format!(
                "| {} | {} | {:.2} TB | {:.2} | {:.2} | {:.3} |\n",
                team.name,
                team.inits_per_day,
                tb,
                bp,
                bc,
                bc / n * 1000.0
            );
            if tb < 1.0 {
                goal = format!(
                    "**Goal (issue 37): at most USD 0.25 per 1,000 inits for a team under 1 TB a month.** The {}, {} inits a month ({:.2} TB): `cloudfront` USD {:.3} per 1,000 inits ({}), `presigned` USD {:.3}. ",
                    team.name,
                    n,
                    tb,
                    bc / n * 1000.0,
                    if bc / n * 1000.0 <= 0.25 {
                        "met"
                    } else {
                        "not met"
                    },
                    bp / n * 1000.0,
                );
            }
        }
        md += &format!(
            "\n{goal}Beyond CloudFront's free tier the archives cost nearly what they cost out of S3 (USD 0.085/GB instead of 0.09): for the {} `cloudfront` saves {:.0}% (that rate, and the blob function's invocations and S3 requests an init no longer makes). {}\n\n",
            largest.0,
            largest.1,
            if cheaper_everywhere {
                "`cloudfront` costs less at every size here: by cost, it is the mode to choose."
            } else {
                "`cloudfront` does not cost less at every size here: see the lines above."
            }
        );
        md += "**Prices** (us-east-1, USD; read 2026-12-02): CloudFront from aws.amazon.com/cloudfront/pricing: always-free tier 1 TB of data transfer out and 10,000,000 HTTP or HTTPS requests a month; transfer out USD 0.085/GB for the first 10 TB (United States, Mexico, Canada; Europe, Israel), 0.080 the next 40 TB; origin fetches from S3 free. HTTPS requests USD 0.0100 per 10,000 in the United States (0.0120 in Europe), as infracost's CloudFront price list has them (infracost/infracost#323). Lambda's always-free 1,000,000 requests and 400,000 GB-s from docs.aws.amazon.com/whitepapers/latest/how-aws-pricing-works/lambda.html. Data transfer out of AWS: 100 GB a month free, aggregated over services (aws.amazon.com/s3/pricing), then USD 0.09/GB to 10 TB and 0.085/GB to 50 TB (the published rate card, as egress price guides quote it in 2026). The other prices are the model's constants (bench/src/cost.rs).\n";
        md
    }

    pub(crate) fn figures(&self) -> serde_json::Value {
        let teams: Vec<_> = TEAMS
            .iter()
            .map(|t| {
                let n = t.inits_per_month();
                serde_json::json!({
                    "team": t,
                    "usd_per_month": {
                        "presigned": cost::total(&delivery::monthly(&self.presigned, n)),
                        "cloudfront": cost::total(&delivery::monthly(&self.cloudfront, n)),
                    },
                })
            })
            .collect();
        serde_json::json!({
            "cloudfront_counts": self.source(),
            "per_init": { "presigned": self.presigned, "cloudfront": self.cloudfront },
            "blob_requests": self.blob,
            "edge": self.edge,
            "usd_per_1000_inits": {
                "presigned": {
                    "inside_free_tier": delivery::inside_free_tier(&self.presigned),
                    "beyond": cost::total(&cost::per_thousand_inits(&self.presigned)),
                },
                "cloudfront": {
                    "inside_free_tier": delivery::inside_free_tier(&self.cloudfront),
                    "beyond": cost::total(&cost::per_thousand_inits(&self.cloudfront)),
                },
            },
            "teams": teams,
        })
    }
}

fn count_of(counts: &BTreeMap<String, u64>, method: &str) -> u64 {
    counts
        .iter()
        .filter(|(k, _)| k.split(' ').next() == Some(method))
        .map(|(_, n)| n)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_requests_are_counted_by_method_and_status() {
        let lines = [
            "x method=GET path=/v1/blobs/a endpoint=\"blob\" status=307 latency_ms=1",
            "x method=HEAD path=/v1/blobs/a endpoint=\"blob\" status=200 latency_ms=1",
            "x method=GET path=/v1/blobs/b endpoint=\"blob\" status=307 latency_ms=1",
            "x method=GET path=/v1/providers/x endpoint=\"provider-versions\" status=200",
        ]
        .map(String::from);
        let counts = by_method(&lines, "blob");
        assert_eq!(counts["GET 307"], 2);
        assert_eq!(counts["HEAD 200"], 1);
        assert_eq!(counts.len(), 2);
        assert_eq!(count_of(&counts, "GET"), 2);
    }

    #[test]
    fn the_edge_log_counts_refusals_apart_from_misses() {
        let lines = [
            r#"{"method": "HEAD", "path": "/archives/a", "status": 200, "refused": null}"#,
            r#"{"method": "GET", "path": "/archives/a", "status": 200, "refused": null}"#,
            r#"{"method": "GET", "path": "/archives/b", "status": 403, "refused": "expired"}"#,
            "not json",
        ]
        .map(String::from);
        let edge = EdgeCount::from_log(&lines);
        assert_eq!(edge.requests(), 3);
        assert_eq!(edge.origin, 2);
        assert_eq!(edge.refused, 1);
        assert_eq!(edge.by_method["GET 200"], 1);
    }
}
