//! CloudFront's archive behaviours in the tests (issue 37): the stand-in
//! (`cloudfront-edge.py`, CloudFront's signed-URL rules in front of the S3
//! emulator), its key pairs and the reference signer (botocore's
//! `CloudFrontSigner`), and the Lambda functions handing out CloudFront
//! signed URLs with their signing key in SSM on moto's server.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::{Value, json};

use super::command::ok;
use super::moto::Moto;
use super::server::{Server, dev_cert, free_port, free_port_pair};
use super::tools::{Tools, require_emulators};

const SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/suite/support/cloudfront-edge.py"
);

/// The venv's Python (moto's: botocore and `cryptography`) running the
/// stand-in's script with `args`.
fn script(args: &[&str]) -> Command {
    let mut cmd = Command::new(Tools::get().path("TFREG_VENV_BIN").join("python"));
    cmd.arg(SCRIPT).args(args);
    cmd
}

/// An RSA key pair as CloudFront's key groups hold them: `id` is the
/// public key's id (`Key-Pair-Id`), the private key a PKCS#8 PEM file.
pub struct KeyPair {
    pub id: String,
    pub private: PathBuf,
    pub public_pem: String,
}

impl KeyPair {
    /// A fresh 2048-bit pair in `dir`, its public key known as `id`.
    pub fn generate(dir: &Path, id: &str) -> KeyPair {
        std::fs::create_dir_all(dir).unwrap();
        let private = dir.join(format!("{id}.key"));
        let public = dir.join(format!("{id}.pub"));
        ok(
            script(&[
                "keygen",
                private.to_str().unwrap(),
                public.to_str().unwrap(),
            ])
            .output()
            .unwrap(),
            "cloudfront-edge.py keygen",
        );
        KeyPair {
            id: id.to_string(),
            private,
            public_pem: std::fs::read_to_string(public).unwrap(),
        }
    }

    /// `urls` signed with this key by the reference signer, botocore's
    /// `CloudFrontSigner.generate_presigned_url` (canned policy, valid
    /// before `expires`, Unix seconds), in order.
    pub fn sign(&self, expires: u64, urls: &[&str]) -> Vec<String> {
        let mut args = vec![
            "sign".to_string(),
            self.id.clone(),
            self.private.display().to_string(),
            expires.to_string(),
        ];
        args.extend(urls.iter().map(|u| u.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(script(&args).output().unwrap(), "cloudfront-edge.py sign");
        let signed: Vec<String> = out.lines().map(String::from).collect();
        assert_eq!(signed.len(), urls.len(), "{out}");
        signed
    }
}

/// Unix seconds `from_now` from now (negative: in the past).
pub fn epoch_in(from_now: i64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    (now + from_now) as u64
}

/// One request the stand-in answered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct EdgeRequest {
    pub method: String,
    pub path: String,
    pub status: u16,
    /// The rule that refused it (`expired`, `signature`, `unknown-key`,
    /// `method`, ...), `None` for a request sent on to the bucket.
    pub refused: Option<String>,
}

/// The stand-in, running over HTTPS on 127.0.0.1; stopped on drop (and
/// when the test process ends: it exits once its standard input closes).
pub struct Edge {
    child: Child,
    _stdin: ChildStdin,
    /// `https://127.0.0.1:PORT`: the functions' `TFREG_ARCHIVE_URL`.
    pub url: String,
    config_path: PathBuf,
    config: Value,
    requests: PathBuf,
}

impl Edge {
    /// The stand-in on `port` (0: a free one) with the certificate and key
    /// of `tls` (`server.pem`, `server.key`, as `tfreg dev-cert` makes
    /// them), in front of `bucket` on the S3 emulator (its endpoint,
    /// region and credentials from the environment), its key group `keys`.
    pub fn start(dir: &Path, port: u16, tls: &Path, bucket: &str, keys: &[&KeyPair]) -> Edge {
        require_emulators();
        std::fs::create_dir_all(dir).unwrap();
        let env = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
        let requests = dir.join("edge-requests.jsonl");
        let config = json!({
            "port": port,
            "cert": tls.join("server.pem"),
            "key": tls.join("server.key"),
            "bucket": bucket,
            "s3": {
                "endpoint": env("AWS_ENDPOINT_URL_S3"),
                "region": env("AWS_REGION"),
                "access_key": env("AWS_ACCESS_KEY_ID"),
                "secret_key": env("AWS_SECRET_ACCESS_KEY"),
            },
            "keys": {},
            "requests": requests,
        });
        let mut edge_cfg = (dir.join("edge.json"), config);
        write_key_group(&edge_cfg.0, &mut edge_cfg.1, keys);
        let mut child = script(&["serve", edge_cfg.0.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("edge.log")).unwrap())
            .spawn()
            .expect("start cloudfront-edge.py");
        let stdin = child.stdin.take().unwrap();
        let mut ready = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        let port = ready
            .strip_prefix("listening ")
            .and_then(|p| p.trim().parse::<u16>().ok())
            .unwrap_or_else(|| {
                panic!(
                    "cloudfront-edge.py did not start ({ready:?}):\n{}",
                    std::fs::read_to_string(dir.join("edge.log")).unwrap_or_default()
                )
            });
        Edge {
            child,
            _stdin: stdin,
            url: format!("https://127.0.0.1:{port}"),
            config_path: edge_cfg.0,
            config: edge_cfg.1,
            requests,
        }
    }

    /// The distribution's key group is now `keys` (a key rotated in or out);
    /// the stand-in reads it on its next request.
    pub fn trust(&mut self, keys: &[&KeyPair]) {
        write_key_group(&self.config_path, &mut self.config, keys);
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<EdgeRequest> {
        std::fs::read_to_string(&self.requests)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

/// `config`'s key group set to `keys`, written to `path`.
fn write_key_group(path: &Path, config: &mut Value, keys: &[&KeyPair]) {
    config["keys"] = keys
        .iter()
        .map(|k| (k.id.clone(), Value::String(k.public_pem.clone())))
        .collect::<serde_json::Map<_, _>>()
        .into();
    // Written whole, then renamed: the stand-in never reads half a file.
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, config.to_string()).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

impl Drop for Edge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bucket of its own on the S3 emulator holding `objects` (key, bytes),
/// and a development certificate for 127.0.0.1 in `dir` (`dir/tls`): what
/// the stand-in needs without the functions. The bucket's name.
pub fn bucket_with(dir: &Path, objects: &[(&str, &[u8])]) -> String {
    require_emulators();
    dev_cert(dir);
    let bucket = format!("tfreg-edge-{:08x}", rand::random::<u32>());
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let (_, s3) = tfreg_testkit::aws_clients(&Default::default()).await;
        s3.create_bucket().bucket(&bucket).send().await.unwrap();
        for (key, bytes) in objects {
            s3.put_object()
                .bucket(&bucket)
                .key(*key)
                .body(bytes.to_vec().into())
                .send()
                .await
                .unwrap();
        }
    });
    bucket
}

/// The SSM parameter holding the functions' CloudFront signing key.
pub const SIGNING_KEY_PARAMETER: &str = "/tfreg-e2e/archive-signing-key-a";

/// The Lambda functions in cloudfront mode (`TFREG_ARCHIVE_DELIVERY`), their
/// signed archive URLs leading to the stand-in in front of their bucket.
pub struct EdgeRig {
    pub server: Server,
    pub edge: Edge,
    /// SSM, where the signing key is (stops on drop).
    pub moto: Moto,
}

impl EdgeRig {
    /// The functions (with `settings` beside cloudfront mode's), their
    /// private key a SecureString in SSM on moto's server, read at init.
    pub fn start(dir: &Path, settings: &[(&str, &str)]) -> EdgeRig {
        let key = KeyPair::generate(&dir.join("keys"), "K2TFREGEDGEA1");
        let moto = Moto::start(&dir.join("moto.log"));
        moto.put_parameter(
            SIGNING_KEY_PARAMETER,
            &std::fs::read_to_string(&key.private).unwrap(),
        );
        let edge_port = free_port();
        let archive_url = format!("https://127.0.0.1:{edge_port}");
        let mut all: Vec<(&str, &str)> = vec![
            ("TFREG_ARCHIVE_DELIVERY", "cloudfront"),
            ("TFREG_ARCHIVE_URL", &archive_url),
            ("TFREG_CLOUDFRONT_KEY_PAIR_ID", &key.id),
            ("TFREG_ARCHIVE_SIGNING_KEY", SIGNING_KEY_PARAMETER),
            ("AWS_ENDPOINT_URL_SSM", &moto.url),
        ];
        all.extend_from_slice(settings);
        let lambda = dir.join("lambda");
        let server = Server::start_lambda_on(&lambda, free_port_pair(), &all);
        // The functions' own development certificate: Terraform trusts its
        // CA (`server.ca`) for the registry and the distribution alike.
        let edge = Edge::start(
            &dir.join("edge"),
            edge_port,
            &lambda.join("tls"),
            server.table().expect("a Lambda server's bucket"),
            &[&key],
        );
        EdgeRig { server, edge, moto }
    }
}
