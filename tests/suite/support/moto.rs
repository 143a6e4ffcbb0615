//! moto's server (PyPI `moto[server]`, installed by `.ci/install-tools`):
//! SSM Parameter Store and Secrets Manager over their real wire protocols
//! (JSON 1.1), where the auth function reads its client secret. Each test
//! starts its own, in memory, stopped on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::server::free_port;
use super::tools::Tools;

pub struct Moto {
    child: Child,
    /// `http://127.0.0.1:PORT`, for `AWS_ENDPOINT_URL_SSM` and
    /// `AWS_ENDPOINT_URL_SECRETS_MANAGER`.
    pub url: String,
    http: reqwest::blocking::Client,
}

/// How a function finds its endpoints: the `AWS_ENDPOINT_URL_<SERVICE>`
/// variable of `name`, if any.
pub type Endpoints = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

impl Moto {
    /// What a function reading a secret at init is given: the SDK
    /// configuration of this process's environment, and its SSM and
    /// Secrets Manager endpoints at this server.
    pub fn function_view(&self) -> (tfreg_store::aws::SdkConfig, Endpoints) {
        let env = |name: &str| std::env::var(name).ok();
        let sdk =
            tfreg_store::aws::function_sdk_config(tfreg_store::aws::Roots::System, env).unwrap();
        let url = self.url.clone();
        let get = move |name: &str| {
            matches!(
                name,
                "AWS_ENDPOINT_URL_SSM" | "AWS_ENDPOINT_URL_SECRETS_MANAGER"
            )
            .then(|| url.clone())
        };
        (sdk, Box::new(get))
    }

    pub fn start(log: &std::path::Path) -> Moto {
        let port = free_port();
        let log = std::fs::File::create(log).unwrap();
        let child = Command::new(Tools::get().path("TFREG_MOTO_SERVER"))
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("moto_server runs");
        let mut moto = Moto {
            child,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::blocking::Client::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while moto
            .http
            .get(format!("{}/moto-api/", moto.url))
            .send()
            .is_err()
        {
            assert!(Instant::now() < deadline, "moto_server did not start");
            if let Some(status) = moto.child.try_wait().unwrap() {
                panic!("moto_server exited: {status}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    /// One call of `service`'s JSON 1.1 API (`AmazonSSM.PutParameter`, ...),
    /// credentials in the form the SDK sends (moto reads the region there).
    fn call(&self, service: &str, target: &str, body: Value) -> Value {
        let resp = self
            .http
            .post(&self.url)
            .header("Content-Type", "application/x-amz-json-1.1")
            .header("X-Amz-Target", target)
            .header(
                "Authorization",
                format!(
                    "AWS4-HMAC-SHA256 Credential=tfregtest/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=00"
                ),
            )
            .body(body.to_string())
            .send()
            .unwrap();
        let status = resp.status();
        let text = resp.text().unwrap();
        assert!(status.is_success(), "{target}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// A SecureString parameter; its ARN.
    pub fn put_parameter(&self, name: &str, value: &str) -> String {
        self.call(
            "ssm",
            "AmazonSSM.PutParameter",
            json!({"Name": name, "Value": value, "Type": "SecureString"}),
        );
        let got = self.call(
            "ssm",
            "AmazonSSM.GetParameter",
            json!({"Name": name, "WithDecryption": false}),
        );
        got["Parameter"]["ARN"].as_str().unwrap().to_string()
    }

    /// A secret whose SecretString is `value`; its ARN.
    pub fn create_secret(&self, name: &str, value: &str) -> String {
        let made = self.call(
            "secretsmanager",
            "secretsmanager.CreateSecret",
            json!({"Name": name, "SecretString": value}),
        );
        made["ARN"].as_str().unwrap().to_string()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
