//! What "pay per request" comes to: USD per 1,000 `terraform init` runs of a
//! configuration, from the requests and bytes one run was counted making (the
//! e2e benchmark counts them), at AWS list prices; and the idle cost per month.
//!
//! Pure arithmetic: every input is a measured count or a stated assumption,
//! and every price is a named constant with its unit, so the report can show
//! each line and which one dominates.

use std::collections::BTreeMap;

pub mod delivery;

/// AWS list prices, us-east-1, as published on aws.amazon.com/pricing
/// (checked 2026-11, CloudFront's again 2026-12-02; first pricing tier of
/// each; no free tier counted here: [`delivery::monthly`] counts them).
pub mod price {
    /// API Gateway HTTP API, per request (USD 1.00 per million).
    pub const API_REQUEST: f64 = 1.00 / 1e6;
    /// Lambda, per invocation (USD 0.20 per million).
    pub const LAMBDA_REQUEST: f64 = 0.20 / 1e6;
    /// Lambda on arm64, per GB-second of billed duration.
    pub const LAMBDA_GB_SECOND_ARM64: f64 = 0.000_013_333_4;
    /// DynamoDB on-demand, per read request unit (USD 0.125 per million).
    pub const DYNAMODB_READ_UNIT: f64 = 0.125 / 1e6;
    /// DynamoDB storage, per GB-month.
    pub const DYNAMODB_GB_MONTH: f64 = 0.25;
    /// S3 Standard GET (and HEAD), per request (USD 0.0004 per 1,000).
    pub const S3_GET: f64 = 0.0004 / 1e3;
    /// S3 Standard storage, per GB-month.
    pub const S3_GB_MONTH: f64 = 0.023;
    /// Data transfer out of AWS to the internet, per GB (first 10 TB tier).
    pub const TRANSFER_OUT_GB: f64 = 0.09;
    /// CloudFront HTTPS requests, per request (USD 0.0100 per 10,000, US).
    pub const CLOUDFRONT_REQUEST: f64 = 0.0100 / 1e4;
    /// CloudFront transfer out, per GB (US, first 10 TB).
    pub const CLOUDFRONT_GB: f64 = 0.085;
    /// CloudWatch Logs ingestion, per GB.
    pub const LOGS_INGESTED_GB: f64 = 0.50;
    /// DynamoDB on-demand, per write request unit (USD 0.625 per million).
    pub const DYNAMODB_WRITE_UNIT: f64 = 0.625 / 1e6;
    /// S3 Standard PUT, per request (USD 0.005 per 1,000).
    pub const S3_PUT: f64 = 0.005 / 1e3;
}

const GB: f64 = 1024.0 * 1024.0 * 1024.0;

/// What one `terraform init` made the deployed stack do, counted or stated.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PerInit {
    /// Requests that reach a Lambda function through API Gateway, by endpoint.
    pub function_requests: BTreeMap<String, u64>,
    /// Requests CloudFront answers (the discovery document).
    pub cloudfront_requests: u64,
    /// Bytes of those answers.
    pub cloudfront_bytes: u64,
    /// GETs and HEADs of archives on presigned S3 URLs.
    pub s3_requests: u64,
    /// Bytes those GETs return (leaving AWS).
    pub s3_bytes: u64,
    /// Bytes of JSON the functions return (leaving AWS through API Gateway).
    pub function_bytes: u64,
    /// DynamoDB read request units the functions use.
    pub dynamodb_read_units: f64,
    /// Log bytes CloudWatch ingests per function invocation (the request line,
    /// anything else at info, and Lambda's own START/END/REPORT lines).
    pub log_bytes_per_invocation: f64,
    /// Billed milliseconds per warm invocation.
    pub billed_ms_per_invocation: f64,
    /// Memory of the read functions, MB (template.yaml `ReadMemorySize`).
    pub memory_mb: f64,
}

impl PerInit {
    pub fn invocations(&self) -> u64 {
        self.function_requests.values().sum()
    }
}

/// One line of the bill.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Line {
    pub service: &'static str,
    pub what: String,
    /// USD per 1,000 inits.
    pub usd_per_1000: f64,
}

/// The bill of 1,000 inits, line by line, largest first.
pub fn per_thousand_inits(init: &PerInit) -> Vec<Line> {
    let n = 1000.0;
    let invocations = init.invocations() as f64;
    let gb_seconds = invocations * init.billed_ms_per_invocation / 1000.0 * init.memory_mb / 1024.0;
    let log_gb = invocations * init.log_bytes_per_invocation / GB;
    let mut lines = vec![
        Line {
            service: "API Gateway",
            what: format!("{invocations} HTTP API requests"),
            usd_per_1000: n * invocations * price::API_REQUEST,
        },
        Line {
            service: "Lambda",
            what: format!("{invocations} invocations"),
            usd_per_1000: n * invocations * price::LAMBDA_REQUEST,
        },
        Line {
            service: "Lambda",
            what: format!(
                "{:.3} GB-s ({} ms x {} MB, arm64)",
                gb_seconds, init.billed_ms_per_invocation, init.memory_mb
            ),
            usd_per_1000: n * gb_seconds * price::LAMBDA_GB_SECOND_ARM64,
        },
        Line {
            service: "DynamoDB",
            what: format!("{} read units", init.dynamodb_read_units),
            usd_per_1000: n * init.dynamodb_read_units * price::DYNAMODB_READ_UNIT,
        },
        Line {
            service: "S3",
            what: format!("{} GET/HEAD", init.s3_requests),
            usd_per_1000: n * init.s3_requests as f64 * price::S3_GET,
        },
        Line {
            service: "Data transfer",
            what: format!(
                "{:.1} MB out (archives from S3, JSON from the API)",
                (init.s3_bytes + init.function_bytes) as f64 / 1e6
            ),
            usd_per_1000: n * (init.s3_bytes + init.function_bytes) as f64 / GB
                * price::TRANSFER_OUT_GB,
        },
        Line {
            service: "CloudFront",
            what: format!(
                "{} requests, {} B",
                init.cloudfront_requests, init.cloudfront_bytes
            ),
            usd_per_1000: n
                * (init.cloudfront_requests as f64 * price::CLOUDFRONT_REQUEST
                    + init.cloudfront_bytes as f64 / GB * price::CLOUDFRONT_GB),
        },
        Line {
            service: "CloudWatch Logs",
            what: format!(
                "{:.0} B ingested ({} B per invocation)",
                invocations * init.log_bytes_per_invocation,
                init.log_bytes_per_invocation
            ),
            usd_per_1000: n * log_gb * price::LOGS_INGESTED_GB,
        },
    ];
    lines.sort_by(|a, b| b.usd_per_1000.total_cmp(&a.usd_per_1000));
    lines
}

/// What some requests made the deployed stack do, data transfer aside
/// (the cache's bill: a hit's and a miss's send the client the same bytes,
/// and what a fill fetches comes into AWS, which is free).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Usage {
    /// HTTP API requests (each invokes a function).
    pub api_requests: f64,
    /// Lambda invocations: those requests', and asynchronous `Invoke`s.
    pub invocations: f64,
    /// Billed duration times memory.
    pub gb_seconds: f64,
    pub read_units: f64,
    pub write_units: f64,
    pub s3_gets: f64,
    pub s3_puts: f64,
    pub log_bytes: f64,
}

/// The bill of `n` times `usage`, line by line, largest first.
pub fn bill(usage: &Usage, n: f64) -> Vec<Line> {
    let u = usage;
    let mut lines = vec![
        Line {
            service: "API Gateway",
            what: format!("{:.1} HTTP API requests", u.api_requests),
            usd_per_1000: n * u.api_requests * price::API_REQUEST,
        },
        Line {
            service: "Lambda",
            what: format!("{:.1} invocations", u.invocations),
            usd_per_1000: n * u.invocations * price::LAMBDA_REQUEST,
        },
        Line {
            service: "Lambda",
            what: format!("{:.4} GB-s (arm64)", u.gb_seconds),
            usd_per_1000: n * u.gb_seconds * price::LAMBDA_GB_SECOND_ARM64,
        },
        Line {
            service: "DynamoDB",
            what: format!("{:.1} read units", u.read_units),
            usd_per_1000: n * u.read_units * price::DYNAMODB_READ_UNIT,
        },
        Line {
            service: "DynamoDB",
            what: format!("{:.1} write units", u.write_units),
            usd_per_1000: n * u.write_units * price::DYNAMODB_WRITE_UNIT,
        },
        Line {
            service: "S3",
            what: format!("{:.1} GET", u.s3_gets),
            usd_per_1000: n * u.s3_gets * price::S3_GET,
        },
        Line {
            service: "S3",
            what: format!("{:.1} PUT", u.s3_puts),
            usd_per_1000: n * u.s3_puts * price::S3_PUT,
        },
        Line {
            service: "CloudWatch Logs",
            what: format!("{:.0} B ingested", u.log_bytes),
            usd_per_1000: n * u.log_bytes / GB * price::LOGS_INGESTED_GB,
        },
    ];
    lines.retain(|l| l.usd_per_1000 > 0.0);
    lines.sort_by(|a, b| b.usd_per_1000.total_cmp(&a.usd_per_1000));
    lines
}

/// What the stack costs in a month with no requests: storage only (no
/// provisioned capacity anywhere: HTTP API, Lambda, on-demand DynamoDB and
/// CloudFront cost nothing idle).
pub fn idle_per_month(table_bytes: u64, archive_bytes: u64) -> Vec<Line> {
    vec![
        Line {
            service: "DynamoDB",
            what: format!("{table_bytes} B stored"),
            usd_per_1000: table_bytes as f64 / GB * price::DYNAMODB_GB_MONTH,
        },
        Line {
            service: "S3",
            what: format!("{archive_bytes} B of archives"),
            usd_per_1000: archive_bytes as f64 / GB * price::S3_GB_MONTH,
        },
    ]
}

/// What an edge cache in front of the API could save at most: the lines
/// behind a request it answers (Lambda, DynamoDB, logs). The request itself is
/// billed by CloudFront instead of API Gateway at the same price.
pub fn edge_cacheable(bill: &[Line]) -> f64 {
    bill.iter()
        .filter(|l| matches!(l.service, "Lambda" | "DynamoDB" | "CloudWatch Logs"))
        .map(|l| l.usd_per_1000)
        .sum()
}

pub fn total(lines: &[Line]) -> f64 {
    lines.iter().map(|l| l.usd_per_1000).sum()
}

/// The bill as a Markdown table, with each line's share.
pub fn table(lines: &[Line], unit: &str) -> String {
    let sum = total(lines);
    let mut out = format!("| service | what | {unit} | share |\n|---|---|---:|---:|\n");
    for line in lines {
        let share = if sum > 0.0 {
            line.usd_per_1000 / sum * 100.0
        } else {
            0.0
        };
        out += &format!(
            "| {} | {} | {:.5} | {:.1}% |\n",
            line.service, line.what, line.usd_per_1000, share
        );
    }
    out += &format!("| **total** | | **{sum:.5}** | |\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_init() -> PerInit {
        PerInit {
            function_requests: BTreeMap::from([
                ("provider-versions".to_string(), 10),
                ("provider-download".to_string(), 10),
            ]),
            cloudfront_requests: 1,
            cloudfront_bytes: 100,
            s3_requests: 30,
            s3_bytes: 1024 * 1024 * 1024,
            function_bytes: 0,
            dynamodb_read_units: 10.0,
            log_bytes_per_invocation: 500.0,
            billed_ms_per_invocation: 10.0,
            memory_mb: 1024.0,
        }
    }

    #[test]
    fn each_line_is_count_times_price() {
        let lines = per_thousand_inits(&one_init());
        let get = |service: &str, what: &str| {
            lines
                .iter()
                .find(|l| l.service == service && l.what.contains(what))
                .unwrap()
                .usd_per_1000
        };
        // 20 requests x 1,000 inits x USD 1 per million.
        assert!((get("API Gateway", "requests") - 0.02).abs() < 1e-12);
        // 20 x 10 ms x 1 GB = 0.2 GB-s per init.
        assert!((get("Lambda", "GB-s") - 200.0 * price::LAMBDA_GB_SECOND_ARM64).abs() < 1e-12);
        // 1 GB out per init.
        assert!((get("Data transfer", "MB out") - 1000.0 * price::TRANSFER_OUT_GB).abs() < 1e-9);
        // The largest line comes first.
        assert_eq!(lines[0].service, "Data transfer");
        assert!(
            lines
                .windows(2)
                .all(|w| w[0].usd_per_1000 >= w[1].usd_per_1000)
        );
    }

    #[test]
    fn the_table_sums_its_lines() {
        let lines = per_thousand_inits(&one_init());
        let table = table(&lines, "USD per 1,000 inits");
        assert!(
            table.contains(&format!("**{:.5}**", total(&lines))),
            "{table}"
        );
        assert_eq!(table.lines().count(), lines.len() + 3);
    }

    #[test]
    fn an_edge_cache_saves_only_what_is_behind_the_api() {
        let lines = per_thousand_inits(&one_init());
        let behind: f64 = lines
            .iter()
            .filter(|l| l.service != "API Gateway" && l.service != "Data transfer")
            .filter(|l| l.service != "S3" && l.service != "CloudFront")
            .map(|l| l.usd_per_1000)
            .sum();
        assert!((edge_cacheable(&lines) - behind).abs() < 1e-12);
        // The request price of CloudFront and of the HTTP API are the same.
        assert_eq!(price::CLOUDFRONT_REQUEST, price::API_REQUEST);
    }
}
