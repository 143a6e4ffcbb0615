//! Every AWS API call a process makes, recorded (issue 36): one JSON line
//! per attempt (presigned URLs included: they are signed with the caller's
//! credentials and so use its role), in the file that
//! [`RECORD_AWS_CALLS`] names, and nothing at all when it is unset.
//!
//! Recorded are the names a policy grants by, never a value: the service
//! and operation; the table and index, and of the item's partition key
//! only its class ([`partition_class`]: `TOKENS`, `CACHE#*`), the
//! attribute names a write touches and its `ReturnValues` (the condition
//! keys `dynamodb:LeadingKeys`, `dynamodb:Attributes`,
//! `dynamodb:ReturnValues`); the bucket and the key's first path segment
//! (`archives/`); the SSM parameter's name or the secret's id; the Lambda
//! function invoked. Items, keys past their class, object keys past their
//! first segment, parameter and secret values, credentials and signatures
//! never reach the file.
//!
//! The recorder is one interceptor of the SDK's orchestrator
//! ([`Intercept`]), added by every client tfreg builds
//! ([`recorder`]): the DynamoDB and S3 clients here, the SSM and Secrets
//! Manager clients and the fill function's `Invoke` in tfreg-lambda.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::{Intercept, SharedInterceptor};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::schema::SECRET_PK;

/// The environment variable naming the file calls are appended to.
pub const RECORD_AWS_CALLS: &str = "TFREG_RECORD_AWS_CALLS";

/// The partition key attribute (as [`crate::dynamodb::PK`], which needs
/// the `dynamodb` feature).
const PK: &str = "pk";

/// One AWS API call, as a policy sees it. Every field but `service` and
/// `operation` is left out when the call has none.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
pub struct Call {
    /// The IAM service prefix: `dynamodb`, `s3`, `ssm`, `secretsmanager`, `lambda`.
    pub service: String,
    /// The API operation (`GetItem`, `HeadObject`, `Invoke`), not the IAM action.
    pub operation: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<String>,
    /// The partition key's class ([`partition_class`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<String>,
    /// The attribute names a write names (its key's and those it sets), sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<String>,
    /// `ReturnValues` of a write, as sent (absent: not sent, DynamoDB's `NONE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub return_values: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket: Option<String>,
    /// The object key's first path segment and its slash (`archives/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// A copy's source, as `prefix`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_prefix: Option<String>,
    /// Signed into a URL for someone else to send.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub presigned: bool,
    /// The SSM parameter's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameter: Option<String>,
    /// The Secrets Manager secret's id (its ARN).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// The Lambda function invoked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
}

/// A line of the file: the call and who made it (`AWS_LAMBDA_FUNCTION_NAME`).
#[derive(Debug, Serialize, Deserialize)]
pub struct Line {
    #[serde(default)]
    pub caller: Option<String>,
    #[serde(flatten)]
    pub call: Call,
}

/// The class of a partition key, which is what a `dynamodb:LeadingKeys`
/// condition names: a constant partition whole (`TOKENS`,
/// `CONFIG#url-signing-secret`), one of a family as its prefix and `*`
/// (`CACHE#registry.example.com/…` is `CACHE#*`). The schema's constant
/// partitions have no `#` but the URL signing secret's.
pub fn partition_class(pk: &str) -> String {
    match pk.find('#') {
        Some(at) if pk != SECRET_PK => format!("{}*", &pk[..=at]),
        _ => pk.to_string(),
    }
}

/// The IAM service prefix of an SDK service name (`Metadata::service`).
fn service_prefix(service: &str) -> String {
    match service {
        "DynamoDB" => "dynamodb".into(),
        "S3" => "s3".into(),
        "SSM" => "ssm".into(),
        "Secrets Manager" => "secretsmanager".into(),
        "Lambda" => "lambda".into(),
        other => other.to_lowercase().replace(' ', ""),
    }
}

/// Percent-decoded, as S3 and Lambda paths are sent.
fn decoded(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An object key's first segment and its slash; a key without one whole.
fn first_segment(key: &str) -> String {
    match key.find('/') {
        Some(at) => key[..=at].to_string(),
        None => key.to_string(),
    }
}

impl Call {
    /// The call an SDK request makes: `service` and `operation` from the
    /// operation's metadata, the rest from the request as it is sent.
    pub fn of_request(
        service: &str,
        operation: &str,
        uri: &str,
        header: impl Fn(&str) -> Option<String>,
        body: Option<&[u8]>,
    ) -> Call {
        let mut call = Call {
            service: service_prefix(service),
            operation: operation.to_string(),
            ..Call::default()
        };
        let (authority, path, query) = split_uri(uri);
        let json = || body.and_then(|b| serde_json::from_slice::<Value>(b).ok());
        match call.service.as_str() {
            "dynamodb" => {
                if let Some(body) = json() {
                    call.dynamodb(&body);
                }
            }
            "ssm" => call.parameter = json().and_then(|b| b["Name"].as_str().map(String::from)),
            "secretsmanager" => {
                call.secret = json().and_then(|b| b["SecretId"].as_str().map(String::from))
            }
            "lambda" => {
                call.function = path
                    .strip_prefix("/2015-03-31/functions/")
                    .and_then(|rest| rest.split('/').next())
                    .map(decoded);
            }
            "s3" => call.s3(authority, path, query, &header),
            _ => {}
        }
        call.presigned = query
            .split('&')
            .any(|p| p.split('=').next() == Some("X-Amz-Signature"));
        call
    }

    fn dynamodb(&mut self, body: &Value) {
        let text = |v: &Value| v.as_str().map(String::from);
        self.table = text(&body["TableName"]);
        self.index = text(&body["IndexName"]);
        self.return_values = text(&body["ReturnValues"]);
        let names = &body["ExpressionAttributeNames"];
        let name = |n: &str| names[n].as_str().map_or(n.to_string(), String::from);
        let pk = body["Key"][PK]["S"]
            .as_str()
            .or(body["Item"][PK]["S"].as_str())
            .map(String::from)
            .or_else(|| {
                // A query's partition: `pk = :v` in its key condition.
                let condition = body["KeyConditionExpression"].as_str()?;
                let mut words = condition.split_whitespace();
                while let Some(w) = words.next() {
                    if name(w) == PK && words.next() == Some("=") {
                        let value = words.next()?;
                        return body["ExpressionAttributeValues"][value]["S"]
                            .as_str()
                            .map(String::from);
                    }
                }
                None
            });
        self.partition = pk.as_deref().map(partition_class);
        let mut attributes: Vec<String> = Vec::new();
        for map in ["Key", "Item"] {
            if let Some(m) = body[map].as_object() {
                attributes.extend(m.keys().cloned());
            }
        }
        if let Some(update) = body["UpdateExpression"].as_str() {
            attributes.extend(updated_names(update).into_iter().map(|n| name(&n)));
        }
        attributes.sort();
        attributes.dedup();
        self.attributes = attributes;
    }

    fn s3(
        &mut self,
        authority: &str,
        path: &str,
        query: &str,
        header: &impl Fn(&str) -> Option<String>,
    ) {
        let path = path.trim_start_matches('/');
        // Virtual-hosted (BUCKET.s3.REGION.amazonaws.com/KEY) or path-style
        // (HOST/BUCKET/KEY: an endpoint of one's own, force_path_style).
        let host = authority.rsplit('@').next().unwrap_or(authority);
        let virtual_bucket = host
            .split_once(".s3.")
            .or_else(|| host.split_once(".s3-"))
            .map(|(bucket, _)| bucket.to_string());
        let (bucket, key) = match virtual_bucket {
            Some(b) => (Some(b), path),
            None => match path.split_once('/') {
                Some((b, k)) => (Some(b.to_string()), k),
                None if !path.is_empty() => (Some(path.to_string()), ""),
                None => (None, ""),
            },
        };
        self.bucket = bucket.map(|b| decoded(&b));
        let key = decoded(key);
        if !key.is_empty() {
            self.prefix = Some(first_segment(&key));
        } else if let Some(listed) = query
            .split('&')
            .find_map(|p| p.strip_prefix("prefix="))
            .map(decoded)
        {
            self.prefix = Some(first_segment(&listed));
        }
        if let Some(source) = header("x-amz-copy-source") {
            let source = decoded(source.trim_start_matches('/'));
            let key = source.split_once('/').map_or("", |(_, k)| k);
            self.source_prefix = Some(first_segment(key.split('?').next().unwrap_or(key)));
        }
    }
}

/// The names an update expression assigns: the first path of each action
/// of its clauses (`SET a = :v, #b = if_not_exists(#b, :w)`, `REMOVE c`,
/// `ADD d :x`, `DELETE e :y`, in any order), commas inside a function's
/// parentheses not splitting actions.
fn updated_names(update: &str) -> Vec<String> {
    const CLAUSES: [&str; 4] = ["SET", "REMOVE", "ADD", "DELETE"];
    let mut names = Vec::new();
    let mut depth = 0usize;
    // At the start of an action: its first word is the name.
    let mut expecting = false;
    let mut word = String::new();
    let mut flush = |word: &mut String, expecting: &mut bool, depth: usize| {
        if word.is_empty() {
            return;
        }
        if depth == 0 && CLAUSES.contains(&word.to_ascii_uppercase().as_str()) {
            *expecting = true;
        } else if *expecting {
            names.push(std::mem::take(word));
            *expecting = false;
        }
        word.clear();
    };
    for c in update.chars() {
        match c {
            '(' => {
                flush(&mut word, &mut expecting, depth);
                depth += 1;
            }
            ')' => {
                flush(&mut word, &mut expecting, depth);
                depth = depth.saturating_sub(1);
            }
            ',' if depth == 0 => {
                flush(&mut word, &mut expecting, depth);
                expecting = true;
            }
            c if c.is_whitespace() || c == '=' || c == '+' || c == '-' => {
                flush(&mut word, &mut expecting, depth)
            }
            c => word.push(c),
        }
    }
    flush(&mut word, &mut expecting, depth);
    names
}

/// `scheme://authority/path?query` as its authority, path and query.
fn split_uri(uri: &str) -> (&str, &str, &str) {
    let rest = uri.split_once("://").map_or(uri, |(_, r)| r);
    let (authority, path_query) = match rest.find('/') {
        Some(at) if uri.contains("://") => (&rest[..at], &rest[at..]),
        _ if uri.contains("://") => (rest, "/"),
        _ => ("", rest),
    };
    let (path, query) = path_query.split_once('?').unwrap_or((path_query, ""));
    (authority, path, query)
}

/// The interceptor: appends each attempt's [`Call`] to its file.
#[derive(Debug)]
pub struct Recorder {
    file: Mutex<std::fs::File>,
    caller: Option<String>,
}

impl Recorder {
    /// A recorder appending to `path`, the calls of `caller`.
    pub fn open(path: &str, caller: Option<String>) -> std::io::Result<Recorder> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Recorder {
            file: Mutex::new(file),
            caller,
        })
    }

    fn write(&self, call: Call) {
        let line = Line {
            caller: self.caller.clone(),
            call,
        };
        let Ok(mut text) = serde_json::to_string(&line) else {
            return;
        };
        text.push('\n');
        if let Ok(mut file) = self.file.lock() {
            // One write of the whole line: O_APPEND keeps lines of several
            // processes sharing the file whole.
            if let Err(e) = file.write_all(text.as_bytes()) {
                tracing::warn!(error = %e, "recording an AWS call failed");
            }
        }
    }
}

impl Intercept for Recorder {
    fn name(&self) -> &'static str {
        "tfreg-record-aws-calls"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(metadata) = cfg.load::<Metadata>() else {
            return Ok(());
        };
        let request = context.request();
        let header = |name: &str| request.headers().get(name).map(String::from);
        let call = Call::of_request(
            metadata.service(),
            metadata.name(),
            request.uri(),
            header,
            request.body().bytes(),
        );
        self.write(call);
        Ok(())
    }
}

/// The recorder every SDK client of this process adds, when
/// [`RECORD_AWS_CALLS`] names a file (one file handle for all of them);
/// `None` otherwise, and when the file cannot be opened (said once in
/// the log).
pub fn recorder() -> Option<SharedInterceptor> {
    static RECORDER: OnceLock<Option<SharedInterceptor>> = OnceLock::new();
    RECORDER
        .get_or_init(|| {
            let path = std::env::var(RECORD_AWS_CALLS)
                .ok()
                .filter(|p| !p.is_empty())?;
            let caller = std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok();
            match Recorder::open(&path, caller) {
                Ok(r) => Some(SharedInterceptor::new(r)),
                Err(e) => {
                    tracing::warn!(error = %e, file = %path, "cannot record AWS calls");
                    None
                }
            }
        })
        .clone()
}

/// The calls recorded in `text` (a file's lines), with their callers.
pub fn parse(text: &str) -> Result<Vec<Line>, serde_json::Error> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(serde_json::from_str)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn a_partition_is_recorded_by_its_class_only() {
        assert_eq!(partition_class("TOKENS"), "TOKENS");
        assert_eq!(partition_class(SECRET_PK), SECRET_PK);
        assert_eq!(partition_class("CACHE#registry.example.com/a/b"), "CACHE#*");
        assert_eq!(partition_class("PUBLISHING#token/abc"), "PUBLISHING#*");
    }

    #[test]
    fn dynamodb_calls_name_table_partition_attributes_and_return_values() {
        let body: &[u8] =
            br##"{"TableName":"t","Key":{"pk":{"S":"TOKENS"},"sk":{"S":"secret-hash"}},
            "UpdateExpression":"SET #t = :at","ExpressionAttributeNames":{"#t":"touched_at"},
            "ExpressionAttributeValues":{":at":{"N":"5"}},"ReturnValues":"NONE"}"##;
        let call = Call::of_request("DynamoDB", "UpdateItem", "http://h/", none, Some(body));
        assert_eq!(call.table.as_deref(), Some("t"));
        assert_eq!(call.partition.as_deref(), Some("TOKENS"));
        assert_eq!(call.attributes, ["pk", "sk", "touched_at"]);
        assert_eq!(call.return_values.as_deref(), Some("NONE"));
        let text = serde_json::to_string(&call).unwrap();
        assert!(
            !text.contains("secret-hash") && !text.contains(":at"),
            "{text}"
        );

        let query: &[u8] =
            br#"{"TableName":"t","KeyConditionExpression":"pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues":{":pk":{"S":"CACHE#h/ns/ty"},":prefix":{"S":"VERSION#"}}}"#;
        let call = Call::of_request("DynamoDB", "Query", "http://h/", none, Some(query));
        assert_eq!(call.partition.as_deref(), Some("CACHE#*"));
        assert!(call.attributes.is_empty());
        let put: &[u8] =
            br#"{"TableName":"t","Item":{"pk":{"S":"AUDIT"},"sk":{"S":"1"},"data":{"B":"AA=="}}}"#;
        let call = Call::of_request("DynamoDB", "PutItem", "http://h/", none, Some(put));
        assert_eq!(call.attributes, ["data", "pk", "sk"]);
    }

    #[test]
    fn an_update_names_every_attribute_it_assigns_whatever_its_clauses() {
        assert_eq!(updated_names("SET #t = :at"), ["#t"]);
        assert_eq!(
            updated_names(
                "ADD #n :by SET #first = if_not_exists(#first, :at), #last = :at, #data = :data"
            ),
            ["#n", "#first", "#last", "#data"]
        );
        assert_eq!(
            updated_names("SET a=:v,b = b + :w REMOVE c, d ADD e :x DELETE f :y"),
            ["a", "b", "c", "d", "e", "f"]
        );
        let body: &[u8] = br##"{"TableName":"t","Key":{"pk":{"S":"USAGE#h/acme/null"},"sk":{"S":"DAY#1"}},
            "UpdateExpression":"ADD #n :by SET #first = if_not_exists(#first, :at), #last = :at, #data = :data, #expires = :e",
            "ExpressionAttributeNames":{"#n":"n","#first":"first_at","#last":"last_at","#data":"data","#expires":"expires_at"},
            "ReturnValues":"NONE"}"##;
        let call = Call::of_request("DynamoDB", "UpdateItem", "http://h/", none, Some(body));
        assert_eq!(call.partition.as_deref(), Some("USAGE#*"));
        assert_eq!(
            call.attributes,
            ["data", "expires_at", "first_at", "last_at", "n", "pk", "sk"]
        );
    }

    #[test]
    fn s3_calls_name_bucket_and_first_segment_both_styles() {
        let call = Call::of_request(
            "S3",
            "GetObject",
            "https://b.s3.eu-west-1.amazonaws.com/archives/ns/x.zip?x-id=GetObject&X-Amz-Signature=ab",
            none,
            None,
        );
        assert_eq!(call.bucket.as_deref(), Some("b"));
        assert_eq!(call.prefix.as_deref(), Some("archives/"));
        assert!(call.presigned);
        let copy = |name: &str| (name == "x-amz-copy-source").then(|| "b/uploads/u1/f".to_string());
        let call = Call::of_request(
            "S3",
            "CopyObject",
            "http://127.0.0.1:5000/b/archives%2Fns/x.zip",
            copy,
            None,
        );
        assert_eq!(call.bucket.as_deref(), Some("b"));
        assert_eq!(call.prefix.as_deref(), Some("archives/"));
        assert_eq!(call.source_prefix.as_deref(), Some("uploads/"));
        assert!(!call.presigned);
        let call = Call::of_request(
            "S3",
            "ListObjectsV2",
            "http://127.0.0.1:5000/b?list-type=2&prefix=cache%2Fh",
            none,
            None,
        );
        assert_eq!(call.prefix.as_deref(), Some("cache/"));
    }

    #[test]
    fn parameters_secrets_and_functions_by_name_never_a_value() {
        let call = Call::of_request(
            "SSM",
            "GetParameter",
            "http://h/",
            none,
            Some(&br#"{"Name":"/tfreg/secret","WithDecryption":true}"#[..]),
        );
        assert_eq!(call.parameter.as_deref(), Some("/tfreg/secret"));
        let call = Call::of_request(
            "Secrets Manager",
            "GetSecretValue",
            "http://h/",
            none,
            Some(&br#"{"SecretId":"arn:aws:secretsmanager:r:1:secret:s"}"#[..]),
        );
        assert_eq!(call.service, "secretsmanager");
        assert_eq!(
            call.secret.as_deref(),
            Some("arn:aws:secretsmanager:r:1:secret:s")
        );
        let call = Call::of_request(
            "Lambda",
            "Invoke",
            "https://lambda.eu-west-1.amazonaws.com/2015-03-31/functions/stack-Fill-1/invocations",
            none,
            Some(&b"{\"host\":\"x\"}"[..]),
        );
        assert_eq!(call.function.as_deref(), Some("stack-Fill-1"));
    }

    #[test]
    fn lines_append_and_parse_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("calls.jsonl");
        let recorder = Recorder::open(path.to_str().unwrap(), Some("f".into())).unwrap();
        recorder.write(Call {
            service: "s3".into(),
            operation: "HeadObject".into(),
            ..Call::default()
        });
        recorder.write(Call {
            service: "dynamodb".into(),
            operation: "GetItem".into(),
            ..Call::default()
        });
        let lines = parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].caller.as_deref(), Some("f"));
        assert_eq!(lines[1].call.operation, "GetItem");
    }
}
