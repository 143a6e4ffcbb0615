//! The `lambda-edge` subject: the Lambda functions with archives from the
//! CloudFront stand-in (`scripts/lambda-local` in cloudfront mode), its
//! request log, and the table of what one init asks of each subject.

use super::*;

/// The profile the functions are built and run with: the bench binary's
/// (`scripts/bench` builds release; a debug bench counts the same requests
/// in less build time, its times are then no figures to compare).
pub(crate) const PROFILE: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};

/// scripts/lambda-local's arguments for a delivery mode.
pub(crate) fn lambda_local_args(delivery: Delivery) -> Vec<&'static str> {
    let mut args = Vec::new();
    if PROFILE == "release" {
        args.push("--release");
    }
    if delivery == Delivery::CloudFront {
        args.extend(CLOUDFRONT_ARGS);
    }
    args
}

/// What puts scripts/lambda-local in cloudfront mode (the functions sign
/// CloudFront URLs; the stand-in answers them on `--port` + 2).
const CLOUDFRONT_ARGS: [&str; 1] = ["--cloudfront"];

/// Where scripts/lambda-local's CloudFront stand-in logs its requests
/// (one JSON line a request), under its data directory.
const EDGE_LOG: &str = "cloudfront/requests.jsonl";

fn lambda_local() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lambda-local")
}

/// Whether this checkout's scripts/lambda-local has a cloudfront mode.
pub(crate) fn supported() -> bool {
    Command::new(lambda_local())
        .arg("--help")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(CLOUDFRONT_ARGS[0]))
        .unwrap_or(false)
}

pub(crate) fn log_len(edge: &Registry) -> Result<u64, Error> {
    Ok(std::fs::metadata(edge.data.join(EDGE_LOG))
        .map(|m| m.len())
        .unwrap_or(0))
}

pub(crate) fn log_since(edge: &Registry, offset: u64) -> Result<Vec<String>, Error> {
    let text = std::fs::read(edge.data.join(EDGE_LOG)).unwrap_or_default();
    let new = text.get(offset as usize..).unwrap_or_default();
    Ok(String::from_utf8_lossy(new)
        .lines()
        .map(str::to_string)
        .collect())
}

/// Requests of one init by endpoint: tfreg serve's, the functions', and the
/// functions' with archives from the edge (when the run had them).
pub(crate) fn requests_table(
    serve: &BTreeMap<String, u64>,
    lambda: &BTreeMap<String, u64>,
    edge: Option<&BTreeMap<String, u64>>,
) -> String {
    let mut endpoints: Vec<&String> = serve.keys().chain(lambda.keys()).collect();
    if let Some(e) = edge {
        endpoints.extend(e.keys());
    }
    endpoints.sort();
    endpoints.dedup();
    let get = |m: &BTreeMap<String, u64>, e: &str| m.get(e).copied().unwrap_or(0);
    let mut md = String::from("| endpoint | tfreg serve | Lambda functions |");
    md += if edge.is_some() {
        " Lambda functions, archives from the edge |\n|---|---:|---:|---:|\n"
    } else {
        "\n|---|---:|---:|\n"
    };
    for endpoint in endpoints {
        md += &format!(
            "| {endpoint} | {} | {} |",
            get(serve, endpoint),
            get(lambda, endpoint)
        );
        if let Some(e) = edge {
            md += &format!(" {} |", get(e, endpoint));
        }
        md += "\n";
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_column_for_the_edge_only_when_it_ran() {
        let serve = BTreeMap::from([("blob".to_string(), 50), ("discovery".to_string(), 1)]);
        let edge = BTreeMap::from([("discovery".to_string(), 1)]);
        let without = requests_table(&serve, &serve, None);
        assert!(without.contains("| blob | 50 | 50 |\n"), "{without}");
        let with = requests_table(&serve, &serve, Some(&edge));
        assert!(with.contains("| blob | 50 | 50 | 0 |\n"), "{with}");
        assert!(with.contains("| discovery | 1 | 1 | 1 |\n"), "{with}");
    }
}
