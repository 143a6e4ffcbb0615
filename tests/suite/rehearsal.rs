//! The deploy rehearsal (`infra/rehearse`, issue 36): template.yaml transformed
//! as `sam deploy` would (aws-sam-translator) and created with CloudFormation
//! `CreateStack` on moto's server with IAM enforcement on, in the `guided`
//! (a first `sam deploy --guided`: the template's defaults) and `full` (sign-in,
//! CI exchange, cache allowance, custom domain) configurations; what moto's
//! CloudFormation skips made by its gap filler through the service APIs.
//!
//! Another test that needs the rehearsed stack (the functions under their own
//! roles) calls [`Rehearsal::up`]: moto is the test's (stopped on drop), so it
//! stays up while the real function binaries run against it with
//! `facts["functions"][id]["role_arn"]` assumed by `facts["credentials"]`.
//!
//! Independent read-backs here go through boto3 (the venv's), not the
//! rehearsal's own code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::cfn::Stack;
use crate::support::moto::Moto;
use crate::support::tools::tfreg_bin;
use crate::support::{Tools, fails, ok};

/// A stack created by `infra/rehearse up` on a moto of this test's.
pub struct Rehearsal {
    /// The stack's moto (`moto.url`), up until dropped.
    pub moto: Moto,
    /// `--out`: facts.json, transformed.json.
    pub dir: PathBuf,
    /// facts.json (`infra/rehearse --help` lists its members).
    pub facts: Value,
}

fn rehearse(args: &[&str]) -> Command {
    let tools = Tools::get();
    let mut cmd = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("infra/rehearse"));
    cmd.args(args)
        .env("TFREG_VENV_BIN", tools.path("TFREG_VENV_BIN"))
        .env("TFREG_MOTO_SERVER", tools.path("TFREG_MOTO_SERVER"));
    cmd
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

impl Rehearsal {
    /// moto started, the stack created in `config` ("guided" or "full"), its
    /// facts read; under `dir`.
    pub fn up(config: &str, dir: &Path) -> Rehearsal {
        std::fs::create_dir_all(dir).unwrap();
        let moto = Moto::start(&dir.join("moto.log"));
        let out = dir.join(config);
        let said = ok(
            rehearse(&[
                "up",
                "--config",
                config,
                "--out",
                out.to_str().unwrap(),
                "--moto-url",
                &moto.url,
            ])
            .output()
            .unwrap(),
            "infra/rehearse up",
        );
        eprintln!("{said}");
        let facts = read_json(&out.join("facts.json"));
        Rehearsal {
            moto,
            dir: out,
            facts,
        }
    }

    /// `infra/rehearse down`: the stack deleted, retention checked; down.json.
    pub fn down(&self) -> Value {
        ok(
            rehearse(&["down", "--out", self.dir.to_str().unwrap()])
                .output()
                .unwrap(),
            "infra/rehearse down",
        );
        read_json(&self.dir.join("down.json"))
    }

    pub fn transformed(&self) -> Value {
        read_json(&self.dir.join("transformed.json"))
    }

    /// A boto3 script against moto as the deployer (`c(service)` a client,
    /// `facts` the facts); what it prints, as JSON.
    pub fn boto(&self, script: &str) -> Value {
        let prelude = r#"
import json, os, boto3
facts = json.load(open(os.environ["FACTS"]))
def c(service, **kw):
    creds = kw.pop("creds", facts["credentials"])
    client = boto3.client(service, endpoint_url=facts["moto"]["url"], region_name=facts["region"],
        aws_access_key_id=creds["AccessKeyId"], aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds.get("SessionToken"))
    if service != "s3":
        # moto 5.2.5 checks a signed request without a body against the wrong
        # payload hash (infra/rehearsal/moto.py): the empty body's, signed.
        def empty(request, **_):
            if not request.body:
                request.headers["X-Amz-Content-SHA256"] = EMPTY
        client.meta.events.register("before-sign", empty)
    return client
EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
"#;
        let python = Tools::get().path("TFREG_VENV_BIN").join("python");
        let out = ok(
            Command::new(python)
                .args(["-c", &format!("{prelude}\n{script}")])
                .env("FACTS", self.dir.join("facts.json"))
                .output()
                .unwrap(),
            "boto3 check",
        );
        serde_json::from_str(out.lines().last().unwrap_or("null")).unwrap()
    }
}

/// The transformed template under the parameters the rehearsal passed
/// (its conditions decided by support::cfn, not by the rehearsal's code).
fn stack_of<'t>(transformed: &'t Value, facts: &Value) -> Stack<'t> {
    let given: Vec<(String, String)> = facts["given"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
        .collect();
    let given: Vec<(&str, &str)> = given
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    Stack::at(
        transformed,
        &given,
        facts["region"].as_str().unwrap(),
        facts["account"].as_str().unwrap(),
    )
}

/// The logical ids of the transformed template whose conditions hold.
fn expected_resources(stack: &Stack) -> BTreeSet<String> {
    let resources = stack.template["Resources"].as_object().unwrap();
    resources
        .keys()
        .filter(|id| stack.exists(id))
        .cloned()
        .collect()
}

fn strings(list: &Value) -> BTreeSet<&str> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect()
}

fn route_keys(stack: &Stack) -> BTreeSet<String> {
    let resources = stack.template["Resources"].as_object().unwrap();
    resources
        .iter()
        .filter(|(id, r)| r["Type"] == "AWS::ApiGatewayV2::Route" && stack.exists(id))
        .map(|(_, r)| r["Properties"]["RouteKey"].as_str().unwrap().to_string())
        .collect()
}

fn rehearse_config(config: &str) {
    let started = std::time::Instant::now();
    // full and full-ssm: every optional feature on.
    let full = config.starts_with("full");
    let tmp = tempfile::tempdir().unwrap();
    let stack = Rehearsal::up(config, tmp.path());
    let facts = &stack.facts;
    let transformed = stack.transformed();
    let decided = stack_of(&transformed, facts);
    assert_eq!(facts["moto"]["url"], stack.moto.url.as_str());

    // The transform's size: over the inline --template-body limit, so the
    // rehearsal (like sam deploy) sends it through S3.
    let bytes = facts["transformed"]["bytes"].as_u64().unwrap();
    assert!(bytes > 51_200, "transformed template {bytes} bytes");

    // Every resource the configuration creates is there, each made by moto's
    // CloudFormation or by the gap filler, and the types are the two lists.
    let resources = facts["resources"].as_object().unwrap();
    let made: BTreeSet<String> = resources.keys().cloned().collect();
    assert_eq!(
        made,
        expected_resources(&decided),
        "{config}: resources made"
    );
    let by_cfn = strings(&facts["types"]["cloudformation"]);
    let by_gap = strings(&facts["types"]["gap_filler"]);
    assert!(by_cfn.is_disjoint(&by_gap), "{by_cfn:?} {by_gap:?}");
    for (id, r) in resources {
        let t = r["type"].as_str().unwrap();
        let list = if r["by"] == "cloudformation" {
            &by_cfn
        } else {
            &by_gap
        };
        assert!(list.contains(t), "{id} ({t}) by {}", r["by"]);
    }
    for skipped in [
        "AWS::ApiGatewayV2::Api",
        "AWS::ApiGatewayV2::Stage",
        "AWS::CloudFront::Distribution",
        "AWS::CloudFront::Function",
    ] {
        assert!(by_gap.contains(skipped), "{skipped} is the gap filler's");
    }

    // Every output concrete, and CloudFormation's own answer.
    let outputs = facts["outputs"].as_object().unwrap();
    for (k, v) in outputs {
        let v = v.as_str().unwrap();
        assert!(
            !v.is_empty() && !v.contains("${") && !v.contains("None"),
            "output {k}={v:?}"
        );
    }
    let from_cfn = stack.boto(
        "print(json.dumps({o['OutputKey']: o['OutputValue'] for o in \
         c('cloudformation').describe_stacks(StackName=facts['stack_name'])['Stacks'][0]['Outputs']}))",
    );
    assert_eq!(&from_cfn, &facts["outputs"]);
    let host = match full {
        true => "registry.example.com".to_string(),
        false => outputs["DistributionDomain"].as_str().unwrap().to_string(),
    };
    assert_eq!(outputs["RegistryUrl"], format!("https://{host}"));
    assert_eq!(outputs.contains_key("OidcRedirectUri"), full);
    assert_eq!(outputs["TableName"], facts["table"]);
    assert_eq!(outputs["BucketName"], facts["bucket"]);

    // The first admin token, as the TokenCommand output says to make it (the
    // deployer's credentials, AWS_ENDPOINT_URL pointing at moto).
    let command = outputs["TokenCommand"].as_str().unwrap();
    let mut words = command.split_whitespace();
    let region = words
        .next()
        .unwrap()
        .strip_prefix("AWS_REGION=")
        .expect("AWS_REGION=...");
    assert_eq!(words.next(), Some("tfreg"), "{command}");
    let creds = &facts["credentials"];
    let mut tfreg = Command::new(tfreg_bin());
    // Nothing of the suite's own AWS settings (the emulators' endpoints).
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
        tfreg.env_remove(k);
    }
    let token = ok(
        tfreg
            .args(words)
            .env("AWS_REGION", region)
            .env("AWS_ACCESS_KEY_ID", creds["AccessKeyId"].as_str().unwrap())
            .env(
                "AWS_SECRET_ACCESS_KEY",
                creds["SecretAccessKey"].as_str().unwrap(),
            )
            .env("AWS_ENDPOINT_URL", &stack.moto.url)
            .output()
            .unwrap(),
        "the TokenCommand output",
    );
    assert!(
        token.contains("tfreg_") && token.contains("admin:*"),
        "{token}"
    );

    // The table's TTL (moto's CloudFormation ignores it), read back.
    let ttl = stack.boto(
        "print(json.dumps(c('dynamodb').describe_time_to_live(TableName=facts['table'])['TimeToLiveDescription']))",
    );
    assert_eq!(ttl["TimeToLiveStatus"], "ENABLED", "{ttl}");
    assert_eq!(ttl["AttributeName"], "expires_at");

    alarms_and_dashboard(&stack, &decided, full);

    // The HTTP API's routes: one per Route, each to a function of the stack.
    let routes = facts["routes"].as_object().unwrap();
    let keys: BTreeSet<String> = routes.keys().cloned().collect();
    assert_eq!(keys, route_keys(&decided));
    for (key, function) in routes {
        let f = &facts["functions"][function.as_str().unwrap()];
        assert!(
            f["name"].is_string(),
            "{key} → {function}: no such function"
        );
    }
    assert_eq!(
        routes.get("ANY /v1/auth/exchange").and_then(|v| v.as_str()),
        full.then_some("AuthFunction")
    );

    // Each function: its binary, role and environment for the role-scoped runs.
    for (id, f) in facts["functions"].as_object().unwrap() {
        assert!(
            f["binary"].is_string() && f["role_name"].is_string(),
            "{id}: {f}"
        );
        let env = &f["environment"];
        assert_eq!(env["TFREG_TABLE"], facts["table"], "{id}");
        assert_eq!(env["TFREG_HOSTNAME"].as_str(), Some(host.as_str()), "{id}");
    }

    // A read function's role may read and may not write (IAM enforcement on).
    let role = stack.boto(
        "r = facts['functions']['ProviderVersionsFunction']['role_arn']\n\
         creds = c('sts').assume_role(RoleArn=r, RoleSessionName='rehearsal')['Credentials']\n\
         d = c('dynamodb', creds=creds)\n\
         key = {'pk': {'S': 'TOKENS'}, 'sk': {'S': 'none'}}\n\
         d.get_item(TableName=facts['table'], Key=key)\n\
         try:\n    d.put_item(TableName=facts['table'], Item=key); wrote = 'yes'\n\
         except d.exceptions.ClientError as e:\n    \
         wrote = [e.response['ResponseMetadata']['HTTPStatusCode'], 'AccessDenied' in str(e), \
         'dynamodb:PutItem' in str(e)]\n\
         print(json.dumps(wrote))",
    );
    assert_eq!(
        role,
        serde_json::json!([403, true, true]),
        "PutItem with a read role"
    );

    archives_from_the_edge(&stack, config);

    // Deleted: the retained table and bucket stay, the rest goes (but the
    // key group: moto 5.2.5 has no DeleteKeyGroup).
    let down = stack.down();
    assert_eq!(down["kept"], serde_json::json!(["Bucket", "Table"]));
    let deleted = down["deleted"].as_array().unwrap().len();
    let left = down["left_on_moto"].as_array().unwrap();
    let edge = config != "full-ssm";
    assert_eq!(
        left,
        &if edge {
            vec![serde_json::json!("ArchiveKeyGroup")]
        } else {
            vec![]
        }
    );
    assert_eq!(deleted + 2 + left.len(), made.len());
    let after = stack.boto(
        "d = c('dynamodb').describe_table(TableName=facts['table'])['Table']['TableStatus']\n\
         c('s3').head_bucket(Bucket=facts['bucket'])\n\
         role = facts['functions']['ProviderVersionsFunction']['role_name']\n\
         try:\n    c('iam').get_role(RoleName=role); r = 'kept'\n\
         except c('iam').exceptions.NoSuchEntityException:\n    r = 'deleted'\n\
         print(json.dumps([d, r]))",
    );
    assert_eq!(after, serde_json::json!(["ACTIVE", "deleted"]));
    eprintln!(
        "rehearsal {config}: {} resources, {} outputs, {} routes, {:.1} s",
        made.len(),
        outputs.len(),
        routes.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn the_guided_stack_creates_resolves_and_deletes_as_the_template_says() {
    rehearse_config("guided");
}

#[test]
fn the_full_stack_creates_resolves_and_deletes_as_the_template_says() {
    rehearse_config("full");
}

/// `full-ssm` is also the presigned configuration (ArchiveDelivery
/// presigned): one rehearsal for both, to keep CI's time.
#[test]
fn the_full_stack_with_the_secret_in_ssm_and_presigned_archives_creates_resolves_and_deletes() {
    rehearse_config("full-ssm");
}

/// The alarms, their topic and subscription and the dashboard, as moto's
/// CloudWatch and SNS hold them (boto3, not the rehearsal's own checks).
const METRICS_READ_BACK: &str = r#"
cw, sns = c('cloudwatch'), c('sns')
topic = facts['outputs']['AlarmTopicArn']
alarms = {}
for a in cw.describe_alarms(AlarmNamePrefix=facts['stack_name'] + '-')['MetricAlarms']:
    metrics = [a['MetricName']] if a.get('MetricName') else [
        m['MetricStat']['Metric']['MetricName'] for m in a.get('Metrics', []) if 'MetricStat' in m]
    namespaces = sorted({a['Namespace']} if a.get('Namespace') else {
        m['MetricStat']['Metric']['Namespace'] for m in a.get('Metrics', []) if 'MetricStat' in m})
    dims = {d['Name']: d['Value'] for d in a.get('Dimensions', [])}
    alarms[a['AlarmName']] = {'actions': a['AlarmActions'], 'missing': a.get('TreatMissingData'),
                              'metrics': metrics, 'namespaces': namespaces, 'dimensions': dims,
                              'threshold': a['Threshold']}
name = facts['outputs']['DashboardUrl'].rsplit('/', 1)[-1]
body = json.loads(cw.get_dashboard(DashboardName=name)['DashboardBody'])
print(json.dumps({
    'alarms': alarms,
    'dashboards': [d['DashboardName'] for d in cw.list_dashboards()['DashboardEntries']],
    'titles': [w['properties']['title'] for w in body['widgets'] if w['type'] == 'metric'],
    'body': json.dumps(body),
    'topics': [t['TopicArn'] for t in sns.list_topics()['Topics']],
    'subscriptions': [[s['Protocol'], s['Endpoint']] for s in sns.list_subscriptions_by_topic(TopicArn=topic)['Subscriptions']],
}))
"#;

/// Issue 38: every alarm the configuration has is on moto, each notifying
/// the topic and quiet when idle; each function has its errors and
/// throttles alarm on its own name; the dashboard is there with its
/// widgets; the email is subscribed only when given.
fn alarms_and_dashboard(stack: &Rehearsal, decided: &Stack, full: bool) {
    let facts = &stack.facts;
    let got = stack.boto(METRICS_READ_BACK);
    let name = facts["stack_name"].as_str().unwrap();
    let topic = facts["outputs"]["AlarmTopicArn"].as_str().unwrap();
    assert!(strings(&got["topics"]).contains(topic), "{got}");
    let alarms = got["alarms"].as_object().unwrap();
    let declared = decided.template["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(id, r)| r["Type"] == "AWS::CloudWatch::Alarm" && decided.exists(id))
        .count();
    assert_eq!(alarms.len(), declared, "{:?}", alarms.keys());
    let functions = facts["functions"].as_object().unwrap();
    // The functions (Auth only in full) and five of the stack's own.
    assert_eq!(declared, 2 * functions.len() + 5);
    assert_eq!(functions.contains_key("AuthFunction"), full);
    for (alarm, a) in alarms {
        assert_eq!(a["actions"], serde_json::json!([topic]), "{alarm}");
        assert_eq!(a["missing"], "notBreaching", "{alarm}");
    }
    for (lid, f) in functions {
        for (what, metric) in [("errors", "Errors"), ("throttles", "Throttles")] {
            let a = &alarms[&format!("{name}-{lid}-{what}")];
            assert_eq!(a["metrics"], serde_json::json!([metric]), "{lid}");
            assert_eq!(a["namespaces"], serde_json::json!(["AWS/Lambda"]));
            assert_eq!(a["dimensions"]["FunctionName"], f["name"], "{lid}");
        }
    }
    // The fill failures alarm reads the namespace the functions write to.
    let fill = &alarms[&format!("{name}-fill-failures")];
    assert_eq!(
        fill["metrics"],
        serde_json::json!(["FillFailures", "FillFailures"])
    );
    for f in functions.values() {
        assert_eq!(
            fill["namespaces"],
            serde_json::json!([f["environment"]["TFREG_METRICS_NAMESPACE"]])
        );
    }
    assert_eq!(
        fill["namespaces"],
        serde_json::json!([format!("tfreg/{name}")])
    );
    let api = &alarms[&format!("{name}-api-5xx-rate")];
    assert_eq!(api["metrics"], serde_json::json!(["5xx", "Count"]));
    assert_eq!(
        alarms[&format!("{name}-api-p99-latency")]["metrics"],
        serde_json::json!(["Latency"])
    );
    for table in ["throttles", "system-errors"] {
        assert_eq!(
            alarms[&format!("{name}-table-{table}")]["namespaces"],
            serde_json::json!(["AWS/DynamoDB"])
        );
    }
    // The dashboard, its widgets, and every function in them by its name.
    assert_eq!(
        got["dashboards"],
        serde_json::json!([format!("{name}-tfreg")])
    );
    let titles = strings(&got["titles"]);
    for title in [
        "Requests by endpoint",
        "Errors by endpoint (5xx, 4xx)",
        "Latency by endpoint, p99 (ms)",
        "Errors by function",
        "Throttles by function",
        "Duration by function, p99 (ms)",
        "Concurrent executions by function (max)",
        "Consumed capacity units",
        "Fills and failures by kind",
        "Publishes and failures by kind",
        "CloudFront requests",
        "CloudFront bytes downloaded",
    ] {
        assert!(titles.contains(title), "{title}: {titles:?}");
    }
    let body = got["body"].as_str().unwrap();
    for f in functions.values() {
        assert!(body.contains(f["name"].as_str().unwrap()), "{f}");
    }
    assert!(body.contains(facts["outputs"]["DistributionId"].as_str().unwrap()));
    assert!(!body.contains("${"), "unresolved: {body}");
    let subscribed = match full {
        true => serde_json::json!([["email", "registry-ops@example.com"]]),
        false => serde_json::json!([]),
    };
    assert_eq!(got["subscriptions"], subscribed);
}

/// `infra/rehearse up --config guided` of template.yaml changed by `edit`:
/// what it printed, which must be a failure.
fn rehearse_changed(edit: impl Fn(&str) -> String) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let moto = Moto::start(&tmp.path().join("moto.log"));
    let template = Path::new(env!("CARGO_MANIFEST_DIR")).join("template.yaml");
    let text = edit(&std::fs::read_to_string(template).unwrap());
    let changed = tmp.path().join("template.yaml");
    std::fs::write(&changed, text).unwrap();
    let out = tmp.path().join("out");
    let args = [
        "up",
        "--config",
        "guided",
        "--out",
        out.to_str().unwrap(),
        "--moto-url",
        &moto.url,
        "--template",
        changed.to_str().unwrap(),
    ];
    fails(
        rehearse(&args).output().unwrap(),
        "infra/rehearse up of a changed template",
    )
}

/// A type neither moto's CloudFormation nor the gap filler creates fails the
/// rehearsal before anything is created, naming it.
#[test]
fn a_resource_type_nothing_creates_fails_the_rehearsal() {
    // A composite alarm: the gap filler makes metric alarms (issue 38), not these.
    let alarm = "\n  AnyAlarm:\n    Type: AWS::CloudWatch::CompositeAlarm\n    Properties:\n      \
                 AlarmName: any\n      AlarmRule: ALARM(other)\n";
    let said =
        rehearse_changed(|t| t.replacen("\nResources:\n", &format!("\nResources:{alarm}"), 1));
    assert!(
        said.contains("AnyAlarm (AWS::CloudWatch::CompositeAlarm)"),
        "{said}"
    );
}

/// A policy naming an ARN that is no resource of the stack (here a function
/// ARN written with `function/`, not `function:`) fails the rehearsal: moto
/// itself would not notice (it authorizes Lambda calls against "*").
#[test]
fn a_policy_naming_a_wrong_arn_fails_the_rehearsal() {
    let right = "Resource: !GetAtt FillFunction.Arn";
    let wrong = "Resource: !Sub \"arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function/${FillFunction}\"";
    let said = rehearse_changed(|t| {
        assert!(t.contains(right));
        t.replacen(right, wrong, 1)
    });
    assert!(
        said.contains(":function/tfreg-FillFunction-")
            && said.contains("is no resource of the stack"),
        "{said}"
    );
}

/// What the rehearsed stack's CloudFront and bucket hold, read back with
/// boto3 (not the rehearsal's check_archives).
const EDGE_READ_BACK: &str = r#"
cf = c('cloudfront')
conf = cf.get_distribution_config(Id=facts['outputs']['DistributionId'])['DistributionConfig']
policy = json.loads(c('s3').get_bucket_policy(Bucket=facts['bucket'])['Policy'])
print(json.dumps({
    'keys': {k['Id']: k['EncodedKey']
             for k in cf.list_public_keys()['PublicKeyList'].get('Items') or []},
    'groups': [sorted(g['KeyGroup']['KeyGroupConfig']['Items'])
               for g in cf.list_key_groups()['KeyGroupList'].get('Items') or []],
    'oacs': [[o['OriginAccessControlOriginType'], o['SigningBehavior'], o['SigningProtocol']]
             for o in cf.list_origin_access_controls()['OriginAccessControlList'].get('Items') or []],
    'behaviours': {b['PathPattern']: [b['TargetOriginId'], (b.get('TrustedKeyGroups') or {}).get('Items'),
                                      sorted(b['AllowedMethods']['Items'])]
                   for b in (conf.get('CacheBehaviors') or {}).get('Items') or []},
    'origins': {o['Id']: o['DomainName'] for o in conf['Origins']['Items']},
    'allows': [s for s in policy['Statement'] if s['Effect'] == 'Allow'],
    'denies': [s['Sid'] for s in policy['Statement'] if s['Effect'] == 'Deny'],
}))
"#;

/// The bucket on moto with the template's policy but DenyInsecureTransport
/// (which moto applies to every request, its condition ignored): an object
/// under archives/ read anonymously, with a read function's role (no S3
/// right) and with blob's (s3:GetObject on archives/*); moto's policy status
/// of that policy, and of one that lets anyone read.
const BUCKET_PRIVACY: &str = r#"
import urllib.request, urllib.error
s3, b = c('s3'), facts['bucket']
policy = json.loads(s3.get_bucket_policy(Bucket=b)['Policy'])
s3.put_bucket_policy(Bucket=b, Policy=json.dumps(
    dict(policy, Statement=[s for s in policy['Statement'] if s.get('Sid') != 'DenyInsecureTransport'])))
key = 'archives/privacy-check/p_1.0.0_linux_amd64.zip'
s3.put_object(Bucket=b, Key=key, Body=b'PK')
def anonymous():
    try:
        urllib.request.urlopen(f"{facts['moto']['url']}/{b}/{key}"); return 200
    except urllib.error.HTTPError as e:
        return e.code
def as_role(lid):
    creds = c('sts').assume_role(RoleArn=facts['functions'][lid]['role_arn'], RoleSessionName='privacy')['Credentials']
    try:
        c('s3', creds=creds).get_object(Bucket=b, Key=key); return 200
    except Exception as e:
        return e.response['ResponseMetadata']['HTTPStatusCode']
out = {'anonymous': anonymous(), 'ProviderVersionsFunction': as_role('ProviderVersionsFunction'),
       'BlobFunction': as_role('BlobFunction'),
       'public': s3.get_bucket_policy_status(Bucket=b)['PolicyStatus']['IsPublic']}
s3.put_bucket_policy(Bucket=b, Policy=json.dumps({'Version': '2012-10-17', 'Statement': [
    {'Effect': 'Allow', 'Principal': '*', 'Action': 's3:GetObject', 'Resource': f'arn:aws:s3:::{b}/archives/*'}]}))
out['public_if_anyone_may'] = s3.get_bucket_policy_status(Bucket=b)['PolicyStatus']['IsPublic']
s3.delete_object(Bucket=b, Key=key)
s3.put_bucket_policy(Bucket=b, Policy=json.dumps(policy))
print(json.dumps(out))
"#;

/// Each function's role reading the signing key on moto (which checks the
/// action, not the resource: least_privilege checks the ARNs).
const KEY_READERS: &str = r#"
ref = facts['archives']['signing']['key_reference']
out = {}
for lid, f in facts['functions'].items():
    creds = c('sts').assume_role(RoleArn=f['role_arn'], RoleSessionName='key')['Credentials']
    try:
        if ref.startswith('arn:'):
            c('secretsmanager', creds=creds).get_secret_value(SecretId=ref)
        else:
            c('ssm', creds=creds).get_parameter(Name=ref, WithDecryption=True)
        out[lid] = 'read'
    except Exception as e:
        out[lid] = 'AccessDenied' if 'AccessDenied' in str(e) else str(e)
print(json.dumps(out))
"#;

/// The functions that sign archive URLs (issue 37).
const SIGNERS: [&str; 7] = [
    "BlobFunction",
    "CacheModuleDownloadFunction",
    "CacheProviderDownloadFunction",
    "MirrorVersionFunction",
    "ModuleDownloadFunction",
    "OciFunction",
    "ProviderDownloadFunction",
];

/// Archives from the edge as the configuration has them: guided (the key
/// `infra/archive-key` made, slot A, in SSM), full (a rotation's middle:
/// both slots in the key group, B signing, Secrets Manager), full-ssm
/// (presigned: none of it). The bucket stays private either way.
fn archives_from_the_edge(stack: &Rehearsal, config: &str) {
    let facts = &stack.facts;
    let got = stack.boto(EDGE_READ_BACK);
    let archives = &facts["archives"];
    assert_eq!(strings(&archives["signers"]), SIGNERS.into_iter().collect());
    let bucket_origin = format!(
        "{}.s3.{}.amazonaws.com",
        text(&facts["bucket"]),
        text(&facts["region"])
    );
    if config == "full-ssm" {
        assert_eq!(archives["delivery"], "presigned");
        assert_eq!(got["keys"], serde_json::json!({}), "{got}");
        assert_eq!(got["groups"], serde_json::json!([]));
        assert_eq!(got["oacs"], serde_json::json!([]));
        assert_eq!(got["allows"], serde_json::json!([]));
        assert!(
            !got["behaviours"]
                .as_object()
                .unwrap()
                .keys()
                .any(|p| p == "/archives/*")
        );
        for id in SIGNERS {
            let env = &facts["functions"][id]["environment"];
            assert_eq!(env["TFREG_ARCHIVE_DELIVERY"], "presigned", "{id}");
            assert!(
                env.get("TFREG_ARCHIVE_SIGNING_KEY").is_none(),
                "{id}: {env}"
            );
        }
        return;
    }
    assert_eq!(archives["delivery"], "cloudfront");
    let slots: &[&str] = if config == "full" {
        &["A", "B"]
    } else {
        &["A"]
    };
    let signing = if config == "full" { "B" } else { "A" };
    // The public keys: what infra/archive-key printed, one per slot given,
    // both in the one key group.
    let keys = got["keys"].as_object().unwrap();
    assert_eq!(keys.len(), slots.len(), "{got}");
    let mut ids = vec![];
    for slot in slots {
        let printed = text(&facts["archive_keys"][slot]["public"]);
        assert_eq!(
            facts["given"][format!("ArchiveSigningPublicKey{slot}")],
            printed.as_str()
        );
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            printed.replace('.', "\n")
        );
        let id = keys
            .iter()
            .find(|(_, k)| k.as_str() == Some(pem.as_str()))
            .unwrap_or_else(|| panic!("slot {slot}'s key is not in CloudFront: {got}"))
            .0;
        assert_eq!(
            archives["public_keys"][format!("ArchiveSigningKey{slot}")],
            id.as_str()
        );
        ids.push(id.clone());
    }
    ids.sort();
    assert_eq!(
        got["groups"],
        serde_json::json!([ids]),
        "one key group, every slot's key"
    );
    assert_eq!(got["oacs"], serde_json::json!([["s3", "always", "sigv4"]]));
    let group = archives["key_group"]["id"].clone();
    for path in ["/archives/*", "/cache/*"] {
        assert_eq!(
            got["behaviours"][path],
            serde_json::json!(["archives", [group], ["GET", "HEAD"]]),
            "{path}: {got}"
        );
    }
    assert_eq!(got["origins"]["archives"], bucket_origin.as_str());
    // The bucket policy: TLS only, and the distribution alone may read.
    let distribution = format!(
        "arn:aws:cloudfront::{}:distribution/{}",
        text(&facts["account"]),
        text(&facts["outputs"]["DistributionId"])
    );
    let bucket_arn = format!("arn:aws:s3:::{}", text(&facts["bucket"]));
    assert_eq!(got["denies"], serde_json::json!(["DenyInsecureTransport"]));
    assert_eq!(
        got["allows"],
        serde_json::json!([{
            "Sid": "ArchivesThroughTheDistribution",
            "Effect": "Allow",
            "Principal": {"Service": "cloudfront.amazonaws.com"},
            "Action": "s3:GetObject",
            "Resource": [format!("{bucket_arn}/archives/*"), format!("{bucket_arn}/cache/*")],
            "Condition": {"StringEquals": {"AWS:SourceArn": distribution}},
        }])
    );
    let mut privacy = stack.boto(BUCKET_PRIVACY);
    // Refused: S3 says 403; moto 5.2.5 with IAM enforcement on fails an
    // unsigned request 500 (it finds no access key).
    let anonymous = privacy["anonymous"].take();
    assert!(
        anonymous == 403 || anonymous == 500,
        "anonymous read: {anonymous}"
    );
    assert_eq!(
        privacy,
        serde_json::json!({"anonymous": null, "ProviderVersionsFunction": 403, "BlobFunction": 200,
                           "public": false, "public_if_anyone_may": true}),
        "the bucket's objects on moto"
    );
    // The signing functions: the signing slot's key id and key; the other
    // functions' roles may not read it (on moto: those without the action;
    // the auth function's GetSecretValue is for its client secret's ARN
    // alone, which least_privilege checks).
    let key_id = &archives["public_keys"][format!("ArchiveSigningKey{signing}")];
    let slot = signing.to_lowercase();
    let reference = if config == "full" {
        format!(
            "arn:aws:secretsmanager:{}:{}:secret:tfreg/archive-signing-key-{slot}",
            text(&facts["region"]),
            text(&facts["account"])
        )
    } else {
        format!("/tfreg/archive-signing-key-{slot}")
    };
    let host = text(&facts["outputs"]["RegistryUrl"]);
    for id in SIGNERS {
        let env = &facts["functions"][id]["environment"];
        assert_eq!(&env["TFREG_CLOUDFRONT_KEY_PAIR_ID"], key_id, "{id}");
        assert_eq!(env["TFREG_ARCHIVE_SIGNING_KEY"], reference.as_str(), "{id}");
        assert_eq!(env["TFREG_ARCHIVE_URL"], host.as_str(), "{id}");
    }
    let readers = stack.boto(KEY_READERS);
    for (id, said) in readers.as_object().unwrap() {
        let may = SIGNERS.contains(&id.as_str()) || (config == "full" && id == "AuthFunction");
        assert_eq!(
            said,
            if may { "read" } else { "AccessDenied" },
            "{id} reading {reference}"
        );
    }
}

fn text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), String::from)
}

/// A stack rule (checked as CreateStack checks them): CloudFront delivery
/// signing with a slot that holds no key is refused, naming the command
/// that makes one.
#[test]
fn cloudfront_delivery_without_the_signing_slots_key_fails_the_rehearsal() {
    let slot_default = "    Default: A\n    AllowedValues: [A, B]";
    let said = rehearse_changed(|t| {
        assert!(t.contains(slot_default));
        t.replacen(slot_default, "    Default: B\n    AllowedValues: [A, B]", 1)
    });
    assert!(
        said.contains("rule EdgeArchivesNeedTheSigningKey")
            && said.contains("infra/archive-key new --stack STACK --slot A"),
        "{said}"
    );
}

/// `infra/archive-key` on moto's SSM and Secrets Manager (the AWS CLI, as
/// the README runs it): `new` stores a slot's private key and prints its
/// public key, refuses to replace it, `public` prints the same key again
/// from the store, `remove` deletes it.
#[test]
fn the_archive_key_command_makes_keeps_prints_and_removes_a_slots_key() {
    let tmp = tempfile::tempdir().unwrap();
    let moto = Moto::start(&tmp.path().join("moto.log"));
    let run = |args: &[&str]| {
        let mut cmd = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("infra/archive-key"));
        for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
            cmd.env_remove(k);
        }
        cmd.args(args)
            .env("TFREG_AWS", Tools::get().path("TFREG_AWS"))
            .env("AWS_ENDPOINT_URL", &moto.url)
            .env("AWS_ACCESS_KEY_ID", "rehearsal")
            .env("AWS_SECRET_ACCESS_KEY", "rehearsal")
            .env("AWS_REGION", "eu-west-1")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .unwrap()
    };
    // What it prints on stdout (its notes go to stderr), once it succeeded.
    let printed = |out: std::process::Output, what: &str| {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        ok(out, what);
        stdout
    };
    let pattern = |k: &str| {
        let lines: Vec<&str> = k.trim().split('.').collect();
        lines.len() == 7
            && lines[0].starts_with("MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA")
            && lines[..6].iter().all(|l| l.len() == 64)
            && lines[6].len() == 8
            && lines[6].ends_with("IDAQAB")
    };
    for store in [&[][..], &["--secrets-manager"][..]] {
        let with = |args: &[&'static str]| -> Vec<&'static str> { [args, store].concat() };
        let made = printed(
            run(&with(&["new", "--stack", "tfreg", "--slot", "B"])),
            "archive-key new",
        );
        assert!(pattern(&made), "{made}");
        let again = fails(
            run(&with(&["new", "--stack", "tfreg", "--slot", "B"])),
            "archive-key new twice",
        );
        assert!(again.contains("is a key there already"), "{again}");
        let public = printed(
            run(&with(&["public", "--stack", "tfreg", "--slot", "B"])),
            "archive-key public",
        );
        assert_eq!(public.trim(), made.trim(), "{store:?}");
        ok(
            run(&with(&["remove", "--stack", "tfreg", "--slot", "B"])),
            "archive-key remove",
        );
        fails(
            run(&with(&["public", "--stack", "tfreg", "--slot", "B"])),
            "archive-key public of a removed key",
        );
    }
    let wrong = fails(
        run(&["new", "--stack", "tfreg", "--slot", "C"]),
        "archive-key --slot C",
    );
    assert!(wrong.contains("--slot A or B"), "{wrong}");
}
