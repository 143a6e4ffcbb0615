//! `tfreg-bench lambda --check`: each function started once from its
//! binary (infra/check-cargo-lambda), and the panic probe.

use super::*;

#[derive(Serialize)]
pub(super) struct Started {
    endpoint: String,
    status: u16,
    init_ms: f64,
    first_response_ms: f64,
}

/// Each function started once (through `runner`, if any), its answer checked.
pub(super) async fn check_starts(dir: &Path, runner: &[String]) -> Result<Vec<Started>, BoxError> {
    let backends = create_backends().await?;
    seed::seed(&backends).await?;
    let mut started = Vec::new();
    // The cloudfront rows need a key in SSM (moto): a benchmark's, not the check's.
    for function in FUNCTIONS
        .iter()
        .filter(|f| f.delivery == Delivery::Presigned)
    {
        let event = bytes::Bytes::from(serde_json::to_vec(&http_api_event(
            function.method,
            function.path,
        ))?);
        let binary = locate(dir, function.binary)?;
        let start = runtime_api::cold_start(command(&binary, runner, function, &backends), event)
            .await
            .map_err(|e| format!("{} ({}): {e}", function.endpoint, binary.display()))?;
        if start.status != function.status {
            return Err(format!(
                "{}: answered {} (expected {})",
                function.endpoint, start.status, function.status
            )
            .into());
        }
        started.push(Started {
            endpoint: function.endpoint.into(),
            status: start.status,
            init_ms: ms(start.init),
            first_response_ms: ms(start.first_response),
        });
    }
    started.push(check_fill(dir, runner, &backends).await?);
    Ok(started)
}

/// The fill function, which no route reaches: started once with the event
/// a read function sends it (a provider's version list) for a host that is
/// no upstream here, which it must answer (`null`) without fetching.
async fn check_fill(
    dir: &Path,
    runner: &[String],
    backends: &Backends,
) -> Result<Started, BoxError> {
    let fill = function("fill", "fill", ("", ""), 0, Table::Read);
    let event = bytes::Bytes::from(serde_json::to_vec(&serde_json::json!({
        "host": "registry.example.com",
        "namespace": "hashicorp",
        "name": "null",
        "what": {"kind": "provider_list"},
    }))?);
    let binary = locate(dir, fill.binary)?;
    let start = runtime_api::cold_start(command(&binary, runner, &fill, backends), event)
        .await
        .map_err(|e| format!("fill ({}): {e}", binary.display()))?;
    if start.body.as_ref() != b"null" {
        return Err(format!(
            "fill: answered {:?} (expected null)",
            String::from_utf8_lossy(&start.body)
        )
        .into());
    }
    Ok(Started {
        endpoint: "fill (event)".into(),
        status: start.status,
        init_ms: ms(start.init),
        first_response_ms: ms(start.first_response),
    })
}

pub(super) fn check_markdown(sizes: &[Size], starts: &[Started], runner: &[String]) -> String {
    let mut text = String::from("| binary | size (MB) | zipped (MB) |\n|---|---:|---:|\n");
    for s in sizes {
        text += &format!(
            "| `{}` | {:.2} | {:.2} |\n",
            s.binary,
            mb(s.bytes),
            mb(s.zipped)
        );
    }
    let through = if runner.is_empty() {
        "natively".to_string()
    } else {
        format!("through `{}`", runner.join(" "))
    };
    text += &format!(
        "\nEach function started once {through}, on the emulators, and answered as it should:\n\n| function | status | init (ms) | first response (ms) |\n|---|---:|---:|---:|\n"
    );
    for s in starts {
        text += &format!(
            "| {} | {} | {:.1} | {:.1} |\n",
            s.endpoint, s.status, s.init_ms, s.first_response_ms
        );
    }
    text
}

/// The panic probe (`tests/panic-probe`), built as the functions are built:
/// its handler panics on `probe/panic`, so its first event must be answered
/// with a 500 and the same process must then answer the next one (the same
/// event again) — a panic costs that request, never the sandbox.
pub(super) async fn check_panic_probe(
    binary: &Path,
    runner: &[String],
) -> Result<Started, BoxError> {
    let backends = create_backends().await?;
    let probe = function(
        "panic-probe",
        "panic-probe",
        ("GET", "/v1/providers/probe/panic/versions"),
        500,
        Table::Untouched,
    );
    let event = bytes::Bytes::from(serde_json::to_vec(&http_api_event(
        probe.method,
        probe.path,
    ))?);
    let start = runtime_api::cold_start_then(command(binary, runner, &probe, &backends), event, 2)
        .await
        .map_err(|e| format!("panic-probe ({}): {e}", binary.display()))?;
    if start.status != probe.status || start.handling.len() != 2 {
        return Err(format!(
            "panic-probe: answered {} and handled {} events (expected a 500, then the next event in the same process)",
            start.status,
            start.handling.len()
        )
        .into());
    }
    Ok(Started {
        endpoint: "panic-probe (a panic, then the next event)".into(),
        status: start.status,
        init_ms: ms(start.init),
        first_response_ms: ms(start.first_response),
    })
}
