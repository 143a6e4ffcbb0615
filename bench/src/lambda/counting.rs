//! What counting downloads costs a download (issue 38, `tfreg-bench
//! lambda`): provider-download's warm events with counting off, counted by
//! the function's extension after each response (a Runtime API with
//! Lambda's Extensions API), and counted before each response (a Runtime
//! API without one: the fallback). Measured side by side, the three
//! alternating; the counts the table holds afterwards are checked against
//! the downloads the counted variants answered.

use tfreg_model::usage::Package;

use super::runtime_api::Extensions;
use super::*;

/// Events per process: the first (a cold start), then warm ones.
const EVENTS: usize = 21;

#[derive(Serialize)]
pub(super) struct CountingRow {
    variant: &'static str,
    /// The warm events' median, `invocation/next` to the response.
    response_ms: f64,
    /// The same events until the invocation was complete (the extension
    /// asked for its next event): what Lambda bills.
    complete_ms: f64,
}

/// (name, TFREG_DOWNLOAD_COUNTS, the Runtime API's Extensions API).
const VARIANTS: [(&str, &str, Extensions); 3] = [
    ("off", "false", Extensions::Lambda),
    ("after the response (extension)", "true", Extensions::Lambda),
    (
        "before the response (no Extensions API)",
        "true",
        Extensions::None,
    ),
];

pub(super) async fn counting(dir: &Path, runs: usize) -> Result<Vec<CountingRow>, BoxError> {
    let backends = create_backends().await?;
    seed::seed(&backends).await?;
    let function = FUNCTIONS
        .iter()
        .find(|f| f.endpoint == "provider-download")
        .ok_or("provider-download is one of the functions")?;
    let binary = locate(dir, function.binary)?;
    let event = bytes::Bytes::from(serde_json::to_vec(&http_api_event(
        function.method,
        function.path,
    ))?);
    let mut samples: [[Vec<f64>; 2]; 3] = Default::default();
    let mut counted = 0u64;
    for _ in 0..runs {
        for (i, (name, counts, extensions)) in VARIANTS.into_iter().enumerate() {
            let mut command = command(&binary, &[], function, &backends);
            command.env(tfreg_lambda::config::DOWNLOAD_COUNTS, counts);
            let run = runtime_api::with_extensions(command, event.clone(), EVENTS, extensions)
                .await
                .map_err(|e| format!("provider-download, counting {name}: {e}"))?;
            let registered = counts == "true" && extensions == Extensions::Lambda;
            if run.status != function.status
                || run.handling.len() != EVENTS
                || run.extension != registered
            {
                return Err(format!(
                    "provider-download, counting {name}: answered {} to {} of {EVENTS} events, extension registered: {}",
                    run.status,
                    run.handling.len(),
                    run.extension
                )
                .into());
            }
            if counts == "true" {
                counted += EVENTS as u64;
            }
            let warm = |of: &[Duration]| {
                let mut v: Vec<f64> = of[1..].iter().map(|d| ms(*d)).collect();
                median(&mut v)
            };
            samples[i][0].push(warm(&run.handling));
            samples[i][1].push(warm(&run.completed));
        }
    }
    // Every download of the counted variants is in the table, and none of
    // the other's.
    let registry = tfreg_testkit::TestRegistry::aws_existing(&backends.table).await;
    let package = Package::Provider {
        hostname: "registry.example.com".into(),
        namespace: "acme".into(),
        r#type: "widget".into(),
    };
    let report = tfreg_store::catalog::usage::report(
        registry.registry.items.as_ref(),
        &package,
        Some("1.0.0"),
        false,
    )
    .await?;
    let stored = report.versions.first().map_or(0, |v| v.downloads);
    if stored != counted {
        return Err(format!(
            "the table counts {stored} downloads; the counted variants answered {counted}"
        )
        .into());
    }
    Ok(VARIANTS
        .into_iter()
        .zip(samples.iter_mut())
        .map(|((variant, _, _), s)| CountingRow {
            variant,
            response_ms: median(&mut s[0]),
            complete_ms: median(&mut s[1]),
        })
        .collect())
}

pub(super) fn counting_markdown(rows: &[CountingRow], runs: usize) -> String {
    let off = rows.first().map(|r| (r.response_ms, r.complete_ms));
    let mut text = format!(
        "\n**Counting downloads** (issue 38): provider-download (one `GetItem`, then the download counted: two `UpdateItem ADD`s, a day's counter and the consumer's), {} warm events per process after its cold start, {runs} processes per variant, the three alternating; a Runtime API with Lambda's Extensions API (an invocation is complete, and the next event handed out, once the response is POSTed and the extension has asked for its next event) or without one. *Response*: each event's `invocation/next` to its response, what Terraform waits for; *complete*: to the end of the invocation, what Lambda bills. Medians of the processes' medians. Afterwards the table holds exactly the downloads the two counted variants answered.\n\n| counting | warm response (ms) | × off | warm invocation complete (ms) | × off |\n|---|---:|---:|---:|---:|\n",
        EVENTS - 1
    );
    for r in rows {
        let (response, complete) = match off {
            Some((o_r, o_c)) => (
                format!("{:.2}", r.response_ms / o_r),
                format!("{:.2}", r.complete_ms / o_c),
            ),
            None => ("—".into(), "—".into()),
        };
        text.push_str(&format!(
            "| {} | {:.2} | {response} | {:.2} | {complete} |\n",
            r.variant, r.response_ms, r.complete_ms
        ));
    }
    text
}
