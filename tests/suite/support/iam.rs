//! Least privilege, decided statically (issue 36): the AWS calls a function
//! can make (infra/aws-calls.json, kept equal to what the role-scoped runs
//! record) against what its role grants in a template, SAM's
//! (template.yaml) or the transformed one. moto checks actions only; this
//! checks the rest: every call is allowed on exactly its resource (the
//! table, the bucket's prefix, the one parameter or secret, the fill
//! function) with conditions that admit it (`dynamodb:LeadingKeys`,
//! `dynamodb:Attributes`, `dynamodb:ReturnValues`), and nothing is granted
//! that no call uses: no `*` action or resource, no action, resource or
//! partition beyond the calls.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;
use tfreg_store::aws::record::Call;

use super::cfn::{Stack, text};

/// infra/aws-calls.json.
pub const CALLS_LIST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/infra/aws-calls.json");

/// infra/aws-calls.json's name for the signing slot's archive key.
pub const ARCHIVE_SIGNING_KEY: &str = "ArchiveSigningKey";

/// The managed policy SAM attaches to every role it makes: CloudWatch
/// Logs for Lambda itself (the runtime writes the function's output), no
/// call of tfreg's code.
pub const LAMBDA_LOGS: &str = "arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole";

#[derive(Debug, Deserialize)]
pub struct CallsList {
    #[allow(dead_code)]
    pub about: Vec<String>,
    /// By the function's logical id in template.yaml.
    pub functions: BTreeMap<String, Vec<Listed>>,
}

/// One call of the list: a [`Call`] with the stack's logical names (table
/// `Table`, bucket `Bucket`, function `FillFunction`, parameter
/// `OidcClientSecretParameter`, secret `OidcClientSecretArn`), and where
/// it is made.
#[derive(Debug, Clone, Deserialize)]
pub struct Listed {
    #[serde(flatten)]
    pub call: Call,
    /// Template conditions under which the code makes it (`!Name`: not).
    #[serde(default)]
    pub when: Vec<String>,
    /// The role-scoped runs that make it (`basic`, `full`).
    #[serde(default)]
    pub made_in: Vec<String>,
    /// Why no run makes it (an error path), when none does.
    #[serde(default)]
    pub unrecorded: Option<String>,
}

impl CallsList {
    pub fn read() -> CallsList {
        let text = std::fs::read_to_string(CALLS_LIST).expect("infra/aws-calls.json");
        serde_json::from_str(&text).expect("infra/aws-calls.json parses")
    }

    /// The calls `function` makes in `stack` (its `when` conditions hold).
    pub fn of<'a>(&'a self, function: &str, stack: &Stack) -> Vec<&'a Listed> {
        self.functions
            .get(function)
            .map(|calls| {
                calls
                    .iter()
                    .filter(|l| {
                        l.when.iter().all(|c| match c.strip_prefix('!') {
                            Some(name) => !stack.conditions[name],
                            None => stack.conditions[c.as_str()],
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// One Allow statement, evaluated.
#[derive(Debug, Clone)]
pub struct Statement {
    pub sid: String,
    pub effect: String,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
    pub condition: Value,
}

/// What a function's role holds.
#[derive(Debug, Default)]
pub struct Role {
    pub statements: Vec<Statement>,
    /// Managed policies (ARNs) and SAM policy templates (their names).
    pub managed: Vec<String>,
}

fn strings(v: &Value) -> Vec<String> {
    match v {
        Value::Array(items) => items.iter().map(text).collect(),
        Value::Null => vec![],
        one => vec![text(one)],
    }
}

fn statements_of(document: &Value, into: &mut Role) {
    for s in document["Statement"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        into.statements.push(Statement {
            sid: text(&s["Sid"]),
            effect: text(&s["Effect"]),
            actions: strings(&s["Action"]),
            resources: strings(&s["Resource"]),
            condition: s["Condition"].clone(),
        });
    }
}

/// The roles of template.yaml's functions that exist in `stack`, by the
/// function's logical id: SAM's `Policies`, each an inline document, a
/// managed policy or a policy template.
pub fn sam_roles(stack: &Stack) -> BTreeMap<String, Role> {
    let mut out = BTreeMap::new();
    for (id, r) in stack.template["Resources"].as_object().unwrap() {
        if r["Type"] != "AWS::Serverless::Function" || !stack.exists(id) {
            continue;
        }
        let mut role = Role::default();
        let policies = stack.eval(&r["Properties"]["Policies"]).unwrap_or_default();
        for p in strings_or_items(&policies) {
            match &p {
                Value::String(managed) => role.managed.push(managed.clone()),
                Value::Object(m) if m.contains_key("Statement") => statements_of(&p, &mut role),
                Value::Object(m) => role.managed.extend(m.keys().cloned()),
                other => panic!("{id}: a policy {other}"),
            }
        }
        out.insert(id.clone(), role);
    }
    out
}

/// The roles of a transformed template's functions (`AWS::Lambda::Function`,
/// its `Role` an `AWS::IAM::Role` of the stack), by the function's logical id.
pub fn transformed_roles(stack: &Stack) -> BTreeMap<String, Role> {
    let resources = stack.template["Resources"].as_object().unwrap();
    let mut out = BTreeMap::new();
    for (id, r) in resources {
        if r["Type"] != "AWS::Lambda::Function" || !stack.exists(id) {
            continue;
        }
        let role_arn = text(&stack.eval(&r["Properties"]["Role"]).unwrap_or_default());
        let role_id = role_arn
            .strip_prefix("arn:")
            .unwrap_or_else(|| panic!("{id}: its role is not the stack's: {role_arn}"));
        let props = stack
            .eval(&resources[role_id]["Properties"])
            .unwrap_or_default();
        let mut role = Role::default();
        for p in props["Policies"].as_array().cloned().unwrap_or_default() {
            statements_of(&p["PolicyDocument"], &mut role);
        }
        role.managed = strings(&props["ManagedPolicyArns"]);
        out.insert(id.clone(), role);
    }
    out
}

fn strings_or_items(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(items) => items.clone(),
        Value::Null => vec![],
        one => vec![one.clone()],
    }
}

/// What one call needs granted: an IAM action on a resource, with the
/// condition keys of its request.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Need {
    pub action: String,
    pub resource: String,
    pub partition: Option<String>,
    pub attributes: Vec<String>,
    pub return_values: Option<String>,
    /// Asked of the action for another call's sake (S3's 404 for a missing key).
    pub implied: bool,
}

/// The IAM actions and resources a listed call needs (`Err`: a call this
/// check does not know).
pub fn needs(call: &Call, stack: &Stack) -> Result<Vec<Need>, String> {
    let need = |action: &str, resource: String| Need {
        action: action.to_string(),
        resource,
        partition: call.partition.clone(),
        attributes: call.attributes.clone(),
        return_values: call.return_values.clone(),
        implied: false,
    };
    let table = || {
        let t = call.table.as_deref().unwrap_or("?");
        match &call.index {
            Some(i) => format!("arn:{t}/index/{i}"),
            None => format!("arn:{t}"),
        }
    };
    let object = |prefix: &Option<String>| {
        let b = call.bucket.as_deref().unwrap_or("?");
        format!("arn:{b}/{}*", prefix.as_deref().unwrap_or(""))
    };
    let bucket = || format!("arn:{}", call.bucket.as_deref().unwrap_or("?"));
    // The archive signing key (issue 37): the signing slot's, by the
    // convention infra/archive-key writes (a secret's ARN ends in `-` and six
    // characters Secrets Manager adds: IAM's `-??????`).
    let slot = stack
        .params
        .get("ArchiveSigningKeySlot")
        .map_or("a".into(), |s| s.to_lowercase());
    let param = |name: &Option<String>| {
        let name = name.as_deref().unwrap_or("?");
        match name {
            ARCHIVE_SIGNING_KEY if call.service == "ssm" => {
                format!("/tfreg/archive-signing-key-{slot}")
            }
            ARCHIVE_SIGNING_KEY => format!(
                "arn:aws:secretsmanager:{}:{}:secret:tfreg/archive-signing-key-{slot}-??????",
                stack.region, stack.account
            ),
            _ => stack.params.get(name).cloned().unwrap_or(name.to_string()),
        }
    };
    let op = call.operation.as_str();
    Ok(match call.service.as_str() {
        "dynamodb" => vec![need(&format!("dynamodb:{op}"), table())],
        "s3" => match op {
            "GetObject" | "HeadObject" => {
                let mut v = vec![need("s3:GetObject", object(&call.prefix))];
                if !call.presigned {
                    // Without ListBucket, S3 answers a missing key 403, not 404.
                    let mut list = need("s3:ListBucket", bucket());
                    list.implied = true;
                    v.push(list);
                }
                v
            }
            "PutObject" | "CreateMultipartUpload" | "UploadPart" | "CompleteMultipartUpload" => {
                vec![need("s3:PutObject", object(&call.prefix))]
            }
            "CopyObject" => vec![
                need("s3:GetObject", object(&call.source_prefix)),
                need("s3:PutObject", object(&call.prefix)),
            ],
            "DeleteObject" => vec![need("s3:DeleteObject", object(&call.prefix))],
            "ListObjectsV2" => vec![need("s3:ListBucket", bucket())],
            "AbortMultipartUpload" => vec![need("s3:AbortMultipartUpload", object(&call.prefix))],
            other => return Err(format!("S3 {other}")),
        },
        "ssm" if op == "GetParameter" => vec![need(
            "ssm:GetParameter",
            format!(
                "arn:aws:ssm:{}:{}:parameter{}",
                stack.region,
                stack.account,
                param(&call.parameter)
            ),
        )],
        "secretsmanager" if op == "GetSecretValue" => {
            vec![need("secretsmanager:GetSecretValue", param(&call.secret))]
        }
        "lambda" if op == "Invoke" => vec![need(
            "lambda:InvokeFunction",
            format!("arn:{}", call.function.as_deref().unwrap_or("?")),
        )],
        other => return Err(format!("{other} {op}")),
    })
}

/// `*` in `pattern` matches any run of characters (IAM's globbing).
pub fn glob(pattern: &str, s: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == s,
        Some((head, tail)) => {
            s.starts_with(head)
                && (head.len()..=s.len())
                    .filter(|i| s.is_char_boundary(*i))
                    .any(|i| glob(tail, &s[i..]))
        }
    }
}

/// Whether a statement's condition admits `need`, or why not.
fn admits(condition: &Value, need: &Need) -> Result<(), String> {
    let Some(blocks) = condition.as_object() else {
        return Ok(());
    };
    for (op, keys) in blocks {
        for (key, values) in keys.as_object().into_iter().flatten() {
            let allowed = strings(values);
            let found: Vec<String> = match key.as_str() {
                "dynamodb:LeadingKeys" => need.partition.iter().cloned().collect(),
                "dynamodb:Attributes" => need.attributes.clone(),
                "dynamodb:ReturnValues" => need.return_values.iter().cloned().collect(),
                other => return Err(format!("condition key {other} is not checked here")),
            };
            let matches = |v: &String| match op.trim_start_matches("ForAllValues:") {
                "StringEquals" | "StringEqualsIfExists" => allowed.contains(v),
                "StringLike" | "StringLikeIfExists" => allowed.iter().any(|p| glob(p, v)),
                other => panic!("condition operator {other} is not checked here"),
            };
            let ok = if op.starts_with("ForAllValues:") {
                found.iter().all(matches)
            } else if found.is_empty() {
                op.ends_with("IfExists")
            } else {
                found.iter().all(matches)
            };
            if !ok {
                return Err(format!("{op} {key} {allowed:?} refuses {found:?}"));
            }
        }
    }
    Ok(())
}

/// Every finding for `function`'s role against the calls it makes; empty
/// when the role grants exactly those.
pub fn check(function: &str, role: &Role, calls: &[&Listed], stack: &Stack) -> Vec<String> {
    let mut findings = vec![];
    let mut needs_all: Vec<Need> = vec![];
    for l in calls {
        match needs(&l.call, stack) {
            Ok(n) => needs_all.extend(n),
            Err(e) => findings.push(format!("{function}: a call this check does not know: {e}")),
        }
    }
    for m in &role.managed {
        let logs = m.replace("${AWS::Partition}", "aws");
        if logs != LAMBDA_LOGS {
            findings.push(format!("{function}: managed policy or policy template {m}"));
        }
    }
    for s in &role.statements {
        if s.effect != "Allow" {
            findings.push(format!("{function} {}: {} statement", s.sid, s.effect));
        }
        for a in &s.actions {
            if a.contains('*') {
                findings.push(format!("{function} {}: wildcard action {a}", s.sid));
            }
        }
        for r in &s.resources {
            if r == "*" || !r.starts_with("arn:") {
                findings.push(format!("{function} {}: resource {r}", s.sid));
            }
        }
    }
    // Each need is granted by a statement on its resource, with a condition
    // that admits it.
    let mut used: BTreeSet<(usize, String, String)> = BTreeSet::new();
    let mut used_values: BTreeSet<(usize, String)> = BTreeSet::new();
    for n in &needs_all {
        let mut refusals = vec![];
        let mut granted = false;
        for (i, s) in role.statements.iter().enumerate() {
            if !s.actions.contains(&n.action) {
                continue;
            }
            let Some(r) = s.resources.iter().find(|r| **r == n.resource) else {
                continue;
            };
            match admits(&s.condition, n) {
                Ok(()) => {
                    granted = true;
                    used.insert((i, n.action.clone(), r.clone()));
                    if let Some(p) = &n.partition {
                        used_values.insert((i, p.clone()));
                    }
                    for a in n.attributes.iter().chain(&n.return_values) {
                        used_values.insert((i, a.clone()));
                    }
                }
                Err(why) => refusals.push(format!("{}: {why}", s.sid)),
            }
        }
        if !granted {
            findings.push(format!(
                "{function}: {} on {} ({}) is not granted{}",
                n.action,
                n.resource,
                n.partition.as_deref().unwrap_or("no partition"),
                if refusals.is_empty() {
                    String::new()
                } else {
                    format!(": {}", refusals.join("; "))
                }
            ));
        }
    }
    // Nothing granted that no call uses: each action on each resource, and
    // each value a condition lists.
    for (i, s) in role.statements.iter().enumerate() {
        for a in &s.actions {
            for r in &s.resources {
                if !used.contains(&(i, a.clone(), r.clone())) {
                    findings.push(format!(
                        "{function} {}: grants {a} on {r}, which no call uses",
                        s.sid
                    ));
                }
            }
        }
        for (_, keys) in s.condition.as_object().into_iter().flatten() {
            for (key, values) in keys.as_object().into_iter().flatten() {
                for v in strings(values) {
                    let any = used_values
                        .iter()
                        .any(|(j, u)| *j == i && (u == &v || glob(&v, u)));
                    if !any {
                        findings.push(format!(
                            "{function} {}: its condition allows {key} {v}, which no call uses",
                            s.sid
                        ));
                    }
                }
            }
        }
    }
    findings
}
