//! A rehearsed stack (`infra/rehearse up`: template.yaml transformed as
//! `sam deploy` transforms it, created on moto's server with IAM
//! enforcement on) and its functions run as Lambda runs them (issue 36):
//! each function's real binary under its own name, with the environment
//! the stack gave it, credentials from STS AssumeRole into its own role,
//! `AWS_ENDPOINT_URL` at moto, and every AWS call it makes recorded
//! (`TFREG_RECORD_AWS_CALLS`).
//!
//! What differs from AWS, each for a reason: `TFREG_HOSTNAME` is the test's
//! own address (it stands in for the CloudFront domain);
//! `TFREG_S3_FORCE_PATH_STYLE` (moto on an IP address has no bucket
//! hostnames); S3 is reached through `presigned-proxy.py`, since moto 5.2.5
//! with IAM enforcement answers every presigned URL 500 (it reads an
//! Authorization header a presigned request has not): the proxy verifies a
//! presigned URL itself and sends it on signed with the same role's
//! credentials, so moto still decides what the role may do to which key;
//! the bucket has no policy (moto applies DenyInsecureTransport to every
//! request, its condition ignored); Lambda's Invoke goes to `cargo lambda
//! watch` (moto's runs no code); the
//! test origins and providers on loopback are allowed by the test-only
//! settings named in `extra`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;
use tfreg_store::aws::record::{Call, RECORD_AWS_CALLS, parse};

use super::command::ok;
use super::edge::{Edge, KeyPair};
use super::iam::ARCHIVE_SIGNING_KEY;
use super::moto::Moto;
use super::server::{Server, StackFunction, free_port, free_port_pair};
use super::tools::Tools;

/// A running process, ended on drop.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A rehearsed stack whose roles are assumed, before its functions start.
pub struct Rehearsal {
    /// infra/rehearse's facts.json.
    pub facts: Value,
    pub facts_path: PathBuf,
    /// The assumed roles' credentials, by function logical id.
    pub credentials: BTreeMap<String, Value>,
    dir: PathBuf,
    s3: String,
    proxy: Running,
    pub moto: Moto,
}

/// A rehearsed stack and its functions, running.
pub struct Rehearsed {
    pub server: Server,
    /// With `ArchiveDelivery=cloudfront`: the CloudFront stand-in for the
    /// distribution's archive behaviours, in front of moto's bucket.
    pub edge: Option<Edge>,
    pub facts: Value,
    pub facts_path: PathBuf,
    pub credentials: BTreeMap<String, Value>,
    calls: PathBuf,
    _proxy: Running,
    _moto: Moto,
}

/// `infra/rehearse up --config CONFIG` on a moto of the test's own.
pub fn rehearse(dir: &Path, config: &str) -> (Moto, Value) {
    let tools = Tools::get();
    std::fs::create_dir_all(dir).unwrap();
    let moto = Moto::start(&dir.join("moto.log"));
    let out = dir.join("stack");
    ok(
        Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/infra/rehearse"))
            .args(["up", "--config", config, "--out"])
            .arg(&out)
            .args(["--moto-url", &moto.url])
            .env("TFREG_VENV_BIN", tools.path("TFREG_VENV_BIN"))
            .env("TFREG_MOTO_SERVER", tools.path("TFREG_MOTO_SERVER"))
            .output()
            .unwrap(),
        "infra/rehearse up",
    );
    let facts = serde_json::from_str(&std::fs::read_to_string(out.join("facts.json")).unwrap())
        .expect("facts.json");
    (moto, facts)
}

/// The venv's Python running `code` with `args`; its stdout.
pub fn python(code: &str, args: &[&str]) -> String {
    let python = Tools::get().path("TFREG_VENV_BIN").join("python");
    ok(
        Command::new(python)
            .arg("-c")
            .arg(code)
            .args(args)
            .output()
            .unwrap(),
        "python",
    )
}

const ASSUME_ROLES: &str = r#"
import boto3, json, sys
f = json.load(open(sys.argv[1]))
c = f["credentials"]
sts = boto3.client("sts", endpoint_url=f["moto"]["url"], region_name=f["region"],
                   aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"])
out = {}
for lid, fn in f["functions"].items():
    got = sts.assume_role(RoleArn=fn["role_arn"], RoleSessionName=lid[:64])["Credentials"]
    out[lid] = {k: got[k] for k in ("AccessKeyId", "SecretAccessKey", "SessionToken")}
print(json.dumps(out))
"#;

/// An API Gateway route key as `cargo lambda watch` writes its path.
fn watch_path(route_key: &str) -> String {
    if route_key == "$default" {
        return "/{*path}".into();
    }
    let path = route_key.split_once(' ').map_or(route_key, |(_, p)| p);
    path.split('/')
        .map(
            |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix("+}")) {
                Some(greedy) => format!("{{*{greedy}}}"),
                None => seg.to_string(),
            },
        )
        .collect::<Vec<_>>()
        .join("/")
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), String::from)
}

impl Rehearsal {
    /// The stack of `config` on a moto of its own, a role assumed for each
    /// function, the presigned-URL proxy in front of moto's S3.
    pub fn up(dir: &Path, config: &str) -> Rehearsal {
        let (moto, facts) = rehearse(dir, config);
        let facts_path = dir.join("stack/facts.json");
        // moto evaluates the bucket policy's DenyInsecureTransport without
        // its condition (aws:SecureTransport false), so it denies every
        // object request, 403 with no body; the requests here are plain
        // HTTP to moto anyway. Over HTTPS in AWS the statement never
        // applies: it goes here.
        python(
            r#"
import boto3, json, sys
f = json.load(open(sys.argv[1])); c = f["credentials"]
boto3.client("s3", endpoint_url=f["moto"]["url"], region_name=f["region"],
             aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"]
             ).delete_bucket_policy(Bucket=f["bucket"])
"#,
            &[facts_path.to_str().unwrap()],
        );
        let credentials: BTreeMap<String, Value> =
            serde_json::from_str(&python(ASSUME_ROLES, &[facts_path.to_str().unwrap()]))
                .expect("assumed roles");
        // Every key the proxy may see a presigned URL of.
        let keys: serde_json::Map<String, Value> = credentials
            .values()
            .map(|c| {
                (
                    text(&c["AccessKeyId"]),
                    serde_json::json!({"secret": c["SecretAccessKey"], "token": c["SessionToken"]}),
                )
            })
            .collect();
        let keys_file = dir.join("presign-keys.json");
        std::fs::write(&keys_file, Value::Object(keys).to_string()).unwrap();
        let proxy_port = free_port();
        let mut proxy = Command::new(Tools::get().path("TFREG_VENV_BIN").join("python"))
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/suite/support/presigned-proxy.py"
            ))
            .arg(proxy_port.to_string())
            .arg(&moto.url)
            .arg(&keys_file)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(dir.join("presigned-proxy.log")).unwrap())
            .spawn()
            .expect("the presigned-URL proxy");
        let mut ready = String::new();
        std::io::BufReader::new(proxy.stdout.take().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert!(ready.starts_with("listening"), "proxy: {ready}");
        Rehearsal {
            facts,
            facts_path,
            credentials,
            dir: dir.to_path_buf(),
            s3: format!("http://127.0.0.1:{proxy_port}"),
            proxy: Running(proxy),
            moto,
        }
    }

    /// A value the stack's deployer reads with boto3: `code` prints it,
    /// given `kw` (client keyword arguments) and `f` (facts.json).
    pub fn as_deployer(&self, code: &str) -> String {
        let prelude = r#"
import boto3, json, sys
f = json.load(open(sys.argv[1])); c = f["credentials"]
kw = dict(endpoint_url=f["moto"]["url"], region_name=f["region"],
          aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"])
"#;
        python(
            &format!("{prelude}{code}"),
            &[self.facts_path.to_str().unwrap()],
        )
        .trim()
        .to_string()
    }

    /// The functions started, the registry at `127.0.0.1:port` (from
    /// [`free_port_pair`]); `extra(logical id)` says what a function gets
    /// beside the stack's environment (the test's own stand-ins, each
    /// named in the test).
    pub fn serve(self, port: u16, extra: impl Fn(&str) -> Vec<(String, String)>) -> Rehearsed {
        let Rehearsal {
            facts,
            facts_path,
            credentials,
            dir,
            s3,
            proxy,
            moto,
        } = self;
        let dir = dir.as_path();
        let host = format!("127.0.0.1:{port}");
        let region = text(&facts["region"]);
        // The distribution's archive behaviours: the stand-in's address in
        // place of the distribution's (TFREG_ARCHIVE_URL, as TFREG_HOSTNAME).
        let edge_port = (facts["archives"]["delivery"] == "cloudfront").then(free_port);
        let calls = dir.join("calls");
        std::fs::create_dir_all(&calls).unwrap();
        let mut functions = vec![];
        for (lid, f) in facts["functions"].as_object().unwrap() {
            let c = &credentials[lid];
            let mut env: BTreeMap<String, String> = f["environment"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), text(v)))
                .collect();
            for (k, v) in [
                ("AWS_REGION", region.clone()),
                ("AWS_DEFAULT_REGION", region.clone()),
                ("AWS_ACCESS_KEY_ID", text(&c["AccessKeyId"])),
                ("AWS_SECRET_ACCESS_KEY", text(&c["SecretAccessKey"])),
                ("AWS_SESSION_TOKEN", text(&c["SessionToken"])),
                ("AWS_ENDPOINT_URL", moto.url.clone()),
                ("AWS_ENDPOINT_URL_S3", s3.clone()),
                ("TFREG_S3_FORCE_PATH_STYLE", "true".into()),
                ("TFREG_HOSTNAME", host.clone()),
                (
                    RECORD_AWS_CALLS,
                    calls.join(format!("{lid}.jsonl")).display().to_string(),
                ),
            ] {
                env.insert(k.to_string(), v);
            }
            if let (Some(port), true) = (edge_port, env.contains_key("TFREG_ARCHIVE_URL")) {
                env.insert(
                    "TFREG_ARCHIVE_URL".into(),
                    format!("https://127.0.0.1:{port}"),
                );
            }
            env.extend(extra(lid));
            functions.push(StackFunction {
                name: text(&f["name"]),
                binary: text(&f["binary"]),
                env: env.into_iter().collect(),
            });
        }
        let routes: Vec<(String, String)> = facts["routes"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(key, lid)| {
                (
                    watch_path(key),
                    text(&facts["functions"][text(lid)]["name"]),
                )
            })
            .collect();
        let deployer = &facts["credentials"];
        let store_args = [
            "--table",
            &text(&facts["table"]),
            "--bucket",
            &text(&facts["bucket"]),
            "--s3-force-path-style",
        ]
        .map(String::from)
        .to_vec();
        let store_env = Rehearsed::deployer_env(&facts, &moto, deployer);
        let server = Server::start_stack_functions(
            &dir.join("functions"),
            port,
            &functions,
            &routes,
            (store_args, store_env),
        );
        let edge = edge_port.map(|edge_port| Rehearsed::edge(&facts, &moto, dir, edge_port));
        Rehearsed {
            server,
            edge,
            facts,
            facts_path,
            credentials,
            calls,
            _proxy: proxy,
            _moto: moto,
        }
    }
}

impl Rehearsed {
    /// A stack of `config` served on a free port, its functions given only
    /// the stack's environment.
    pub fn start(dir: &Path, config: &str) -> Rehearsed {
        Rehearsal::up(dir, config).serve(free_port_pair(), |_| vec![])
    }

    /// The stand-in on `port` with the functions' development certificate
    /// (Terraform trusts its CA for both), its key group the stack's public
    /// keys by their CloudFront ids, reading moto's bucket as the deployer
    /// (in AWS the distribution's service principal, which the bucket
    /// policy admits: moto takes no service principal).
    fn edge(facts: &Value, moto: &Moto, dir: &Path, port: u16) -> Edge {
        let archives = &facts["archives"];
        let keys: Vec<KeyPair> = archives["public_keys"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(lid, id)| {
                let slot = lid.trim_start_matches("ArchiveSigningKey");
                let body = text(&facts["archive_keys"][slot]["public"]).replace('.', "\n");
                KeyPair {
                    id: text(id),
                    private: PathBuf::new(),
                    public_pem: format!(
                        "-----BEGIN PUBLIC KEY-----\n{body}\n-----END PUBLIC KEY-----\n"
                    ),
                }
            })
            .collect();
        let deployer = &facts["credentials"];
        Edge::start_on(
            &dir.join("edge"),
            port,
            &dir.join("functions/tls"),
            &text(&facts["bucket"]),
            serde_json::json!({
                "endpoint": moto.url,
                "region": facts["region"],
                "access_key": deployer["AccessKeyId"],
                "secret_key": deployer["SecretAccessKey"],
            }),
            &keys.iter().collect::<Vec<_>>(),
        )
    }

    /// The deployer's environment for the `tfreg` CLI on the stack's stores
    /// (the README's "with AWS credentials").
    fn deployer_env(facts: &Value, moto: &Moto, deployer: &Value) -> Vec<(String, String)> {
        [
            ("AWS_REGION", text(&facts["region"])),
            ("AWS_ACCESS_KEY_ID", text(&deployer["AccessKeyId"])),
            ("AWS_SECRET_ACCESS_KEY", text(&deployer["SecretAccessKey"])),
            ("AWS_ENDPOINT_URL", moto.url.clone()),
            ("AWS_ENDPOINT_URL_DYNAMODB", moto.url.clone()),
            ("AWS_ENDPOINT_URL_S3", moto.url.clone()),
        ]
        .map(|(k, v)| (k.to_string(), v))
        .to_vec()
    }

    /// The calls each function made, by logical id, with the stack's
    /// logical names for its resources (as infra/aws-calls.json writes them).
    pub fn recorded(&self) -> BTreeMap<String, BTreeSet<Call>> {
        let mut names: BTreeMap<String, String> = BTreeMap::new();
        names.insert(text(&self.facts["table"]), "Table".into());
        names.insert(text(&self.facts["bucket"]), "Bucket".into());
        for (lid, f) in self.facts["functions"].as_object().unwrap() {
            names.insert(text(&f["name"]), lid.clone());
            names.insert(text(&f["arn"]), lid.clone());
        }
        let auth = &self.facts["functions"]["AuthFunction"]["environment"];
        let secret_ref = text(&auth["TFREG_OIDC_CLIENT_SECRET"]);
        // The archive signing key (issue 37), when the stack signs with CloudFront.
        let key_ref = text(&self.facts["archives"]["signing"]["key_reference"]);
        let mut out: BTreeMap<String, BTreeSet<Call>> = BTreeMap::new();
        for lid in self.facts["functions"].as_object().unwrap().keys() {
            let file = self.calls.join(format!("{lid}.jsonl"));
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let set = out.entry(lid.clone()).or_default();
            for line in parse(&text).expect("recorded calls parse") {
                let mut call = line.call;
                let logical = |v: &mut Option<String>| {
                    if let Some(name) = v.as_ref().and_then(|n| names.get(n)) {
                        *v = Some(name.clone());
                    }
                };
                logical(&mut call.table);
                logical(&mut call.bucket);
                logical(&mut call.function);
                if call.secret.as_deref() == Some(secret_ref.as_str()) {
                    call.secret = Some("OidcClientSecretArn".into());
                }
                if call.parameter.as_deref() == Some(secret_ref.as_str()) {
                    call.parameter = Some("OidcClientSecretParameter".into());
                }
                if !key_ref.is_empty() {
                    if call.parameter.as_deref() == Some(key_ref.as_str()) {
                        call.parameter = Some(ARCHIVE_SIGNING_KEY.into());
                    }
                    if call.secret.as_deref() == Some(key_ref.as_str()) {
                        call.secret = Some(ARCHIVE_SIGNING_KEY.into());
                    }
                }
                set.insert(call);
            }
        }
        out
    }

    /// The parameters the stack was created with (facts.json's `given`;
    /// the rest are the template's defaults).
    pub fn role_parameters(&self) -> Vec<(String, String)> {
        self.facts["given"]
            .as_object()
            .map(|given| given.iter().map(|(k, v)| (k.clone(), text(v))).collect())
            .unwrap_or_default()
    }
}
