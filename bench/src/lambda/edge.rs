//! The signing functions as `TFREG_ARCHIVE_DELIVERY=cloudfront` runs them
//! (issue 37): their archive signing key read once at init from SSM
//! Parameter Store (a moto server of this run's, as `scripts/lambda-local
//! --cloudfront` keeps it), every archive URL of an answer signed with it.
//! The key is made and stored as lambda-local does: the CloudFront
//! stand-in's `keygen` (2048-bit RSA), boto3's `put_parameter` (SecureString).

use std::process::Stdio;

use super::BoxError;

/// The SSM parameter and the key pair id the functions are given.
const PARAMETER: &str = "/tfreg-bench/archive-signing-key-a";
const KEY_PAIR_ID: &str = "K2TFREGBENCHA1";

/// A moto server holding the signing key, and the environment a signing
/// function needs to read it; moto stops when this is dropped.
pub(super) struct Edge {
    _moto: tokio::process::Child,
    _dir: tempfile::TempDir,
    endpoint: String,
}

impl Edge {
    /// Start moto (`TFREG_MOTO_SERVER`, from .tools/env), make a key with the
    /// venv's python (`TFREG_VENV_BIN`) and store it.
    pub(super) async fn start() -> Result<Edge, BoxError> {
        let tool = |name: &str| {
            std::env::var(name).map_err(|_| {
                format!("{name} is not set: the cloudfront rows need the tools (source .tools/env)")
            })
        };
        let moto_server = tool("TFREG_MOTO_SERVER")?;
        let python = format!("{}/python", tool("TFREG_VENV_BIN")?);
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let moto = tokio::process::Command::new(&moto_server)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let endpoint = format!("http://127.0.0.1:{port}");
        let ready = async {
            loop {
                if reqwest::get(format!("{endpoint}/moto-api/")).await.is_ok() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), ready)
            .await
            .map_err(|_| "moto did not start within 60 s")?;
        let stand_in = super::workspace().join("tests/suite/support/cloudfront-edge.py");
        let private = dir.path().join("signing-key.pem");
        let public = dir.path().join("signing-key.pub");
        run(tokio::process::Command::new(&python)
            .arg(&stand_in)
            .arg("keygen")
            .arg(&private)
            .arg(&public))
        .await?;
        run(tokio::process::Command::new(&python)
            .args(["-c", PUT_PARAMETER, &endpoint, PARAMETER])
            .arg(&private)
            .envs(credentials()))
        .await?;
        Ok(Edge {
            _moto: moto,
            _dir: dir,
            endpoint,
        })
    }

    /// What a signing function is given (its URLs' host never answers
    /// here: nothing follows them).
    pub(super) fn environment(&self) -> Vec<(&'static str, String)> {
        vec![
            ("TFREG_ARCHIVE_DELIVERY", "cloudfront".into()),
            ("TFREG_ARCHIVE_URL", "https://registry.example.com".into()),
            ("TFREG_CLOUDFRONT_KEY_PAIR_ID", KEY_PAIR_ID.into()),
            ("TFREG_ARCHIVE_SIGNING_KEY", PARAMETER.into()),
            ("AWS_ENDPOINT_URL_SSM", self.endpoint.clone()),
        ]
    }
}

const PUT_PARAMETER: &str = "import boto3, sys
boto3.client('ssm', endpoint_url=sys.argv[1]).put_parameter(
    Name=sys.argv[2], Type='SecureString', Overwrite=True, Value=open(sys.argv[3]).read())";

/// boto3's region and credentials: the bench's own (the emulators'), else moto's defaults.
fn credentials() -> Vec<(&'static str, String)> {
    [
        ("AWS_REGION", "us-east-1"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
    ]
    .into_iter()
    .map(|(name, default)| (name, std::env::var(name).unwrap_or_else(|_| default.into())))
    .collect()
}

async fn run(command: &mut tokio::process::Command) -> Result<(), BoxError> {
    let out = command.output().await?;
    if !out.status.success() {
        return Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(())
}
