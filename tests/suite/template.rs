//! The deployment never drifts from the code. `cargo lambda watch` (Cargo.toml)
//! routes every path to the binary of the package that serves it (its handler
//! group). `template.yaml`: every endpoint has exactly one function resource,
//! built from the package that serves it, and one route; every route reaches
//! the endpoint the model's router gives its paths; only `publish` and `admin` may
//! write (admin with exactly its rights), every other function that checks
//! tokens may only stamp a token's last use (`RecordTokenUse`); access is
//! private by default; the environment holds only settings the code reads; the
//! table and bucket match what the code reads and writes, and the CloudFront
//! Function answers discovery exactly as the discovery handler does (run in
//! Node.js, the closest runtime to CloudFront Functions' JavaScript).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::process::{Command, Stdio};

use http::Method;
use serde_norway::Value;
use tfreg_model::router::{Endpoint, Route, UiRoute};

#[path = "route_table.rs"]
mod route_table;

fn template() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml"))
        .expect("template.yaml at the repository root");
    serde_norway::from_str(&text).expect("template.yaml is YAML")
}

fn resources(t: &Value) -> &serde_norway::Mapping {
    t["Resources"].as_mapping().expect("Resources")
}

/// Resources of one type, by logical id.
fn of_type<'a>(t: &'a Value, ty: &str) -> BTreeMap<String, &'a Value> {
    resources(t)
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(ty))
        .map(|(id, r)| (id.as_str().unwrap().to_string(), r))
        .collect()
}

/// The argument of a short-form intrinsic (`!Ref X`, `!GetAtt X.Arn`, `!Sub "..."`).
fn tagged<'a>(v: &'a Value, tag: &str) -> Option<&'a Value> {
    match v {
        Value::Tagged(t) if t.tag == tag => Some(&t.value),
        _ => None,
    }
}

fn tagged_str<'a>(v: &'a Value, tag: &str) -> &'a str {
    tagged(v, tag)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("expected {tag} <string>, found {v:?}"))
}

/// The function packages (`functions/<name>`, binary `<name>`).
const PACKAGES: [&str; 7] = ["read", "blob", "publish", "admin", "ui", "auth", "fill"];
/// The packages of functions no route leads to: invoked by other functions.
const UNROUTED: [&str; 1] = ["fill"];

/// The package whose handler group serves `route`.
fn package_of(route: &Route) -> &'static str {
    match route {
        Route::Discovery | Route::Read(_) => "read",
        Route::Blob(_) => "blob",
        Route::Publish(_) => "publish",
        Route::Admin(_) => "admin",
        // The redirect to the home page needs no group (every process
        // answers it): it is the discovery endpoint's, API Gateway's
        // catch-all, which the read package serves.
        Route::Ui(UiRoute::Root) => "read",
        Route::Ui(_) => "ui",
        Route::Auth(_) => "auth",
    }
}

/// logical id → the binary it runs. Each function is built from its
/// package (`CodeUri: functions/<binary>`, `Binary: <binary>`) and nothing
/// else in its build metadata, so that `sam build` builds each package once.
fn function_binaries(t: &Value) -> BTreeMap<String, String> {
    let mut binaries = BTreeMap::new();
    for (id, f) in of_type(t, "AWS::Serverless::Function") {
        assert_eq!(
            f["Metadata"]["BuildMethod"].as_str(),
            Some("rust-cargolambda"),
            "{id}"
        );
        let binary = f["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{id}: Metadata.BuildProperties.Binary"))
            .to_string();
        assert!(
            PACKAGES.contains(&binary.as_str()),
            "{id}: no package {binary}"
        );
        assert_eq!(
            f["Properties"]["CodeUri"].as_str(),
            Some(format!("functions/{binary}").as_str()),
            "{id}: built from its own package"
        );
        assert_eq!(
            f["Metadata"].as_mapping().map(|m| m.len()),
            Some(2),
            "{id}: nothing else in Metadata, or SAM builds this function separately"
        );
        binaries.insert(id, binary);
    }
    binaries
}

/// endpoint name → logical id of its function resource: the endpoint the
/// router gives the function's routes (one, or for auth one per sign-in
/// step, all of the one endpoint).
fn functions(t: &Value) -> BTreeMap<String, String> {
    let binaries = function_binaries(t);
    let routes = routes(t);
    let mut by_endpoint = BTreeMap::new();
    for (id, binary) in &binaries {
        if UNROUTED.contains(&binary.as_str()) {
            assert!(!routes.contains_key(id), "{id}: no route leads to it");
            continue;
        }
        let keys = routes
            .get(id)
            .unwrap_or_else(|| panic!("{id} has no route"));
        let mut endpoints = BTreeSet::new();
        for key in keys {
            let (method, path) = sample(key);
            let route = tfreg_model::router::route(&method, &path)
                .unwrap_or_else(|e| panic!("{key}: {path}: {e}"));
            assert_eq!(
                package_of(&route),
                binary,
                "{id}: {key} is served by another package"
            );
            endpoints.insert(route.endpoint().name().to_string());
        }
        assert_eq!(
            endpoints.len(),
            1,
            "{id}: the routes of one function are one endpoint's: {keys:?}"
        );
        let endpoint = endpoints.pop_first().unwrap();
        // The OCI view has two: `/v2` (`oras login`'s `GET /v2/`) and
        // `/v2/{oci+}`, as a greedy variable matches no empty rest.
        assert!(
            keys.len() == 1 || binary == "auth" || endpoint == "oci",
            "{id} has exactly one route, found {keys:?}"
        );
        if let Some(previous) = by_endpoint.insert(endpoint.clone(), id.clone()) {
            panic!("endpoint {endpoint} has two functions: {previous} and {id}");
        }
    }
    by_endpoint
}

/// The route keys that lead to each function (by logical id).
fn routes(t: &Value) -> BTreeMap<String, Vec<String>> {
    let integrations = of_type(t, "AWS::ApiGatewayV2::Integration");
    let mut by_function: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (id, route) in of_type(t, "AWS::ApiGatewayV2::Route") {
        let p = &route["Properties"];
        assert_eq!(tagged_str(&p["ApiId"], "!Ref"), "RegistryApi", "{id}");
        let target = tagged_str(&p["Target"], "!Sub");
        let integration_id = target
            .strip_prefix("integrations/${")
            .and_then(|s| s.strip_suffix('}'))
            .unwrap_or_else(|| panic!("{id}: Target {target}"));
        let integration = integrations
            .get(integration_id)
            .unwrap_or_else(|| panic!("{id}: no integration {integration_id}"));
        let ip = &integration["Properties"];
        assert_eq!(ip["IntegrationType"].as_str(), Some("AWS_PROXY"));
        assert_eq!(ip["PayloadFormatVersion"].as_str(), Some("2.0"));
        let function = tagged_str(&ip["IntegrationUri"], "!GetAtt")
            .strip_suffix(".Arn")
            .expect("IntegrationUri: !GetAtt <Function>.Arn")
            .to_string();
        let key = p["RouteKey"].as_str().expect("RouteKey").to_string();
        by_function.entry(function).or_default().push(key);
    }
    by_function
}

/// A concrete path for an API Gateway route key (`ANY /v1/...`, `$default`).
fn sample(route_key: &str) -> (Method, String) {
    if route_key == "$default" {
        return (Method::GET, "/.well-known/terraform.json".into());
    }
    let (method, pattern) = route_key.split_once(' ').expect("METHOD /path");
    assert_eq!(
        method, "ANY",
        "{route_key}: the router answers wrong methods (405)"
    );
    sample_path(pattern)
}

/// A concrete request for a path pattern (API Gateway's `{key+}` or cargo lambda watch's `{*key}`).
fn sample_path(pattern: &str) -> (Method, String) {
    let operation = if pattern.starts_with(tfreg_model::protocol::ADMIN_V1) {
        "tokens"
    } else {
        "providers/acme/null/1.0.0/begin"
    };
    let path = pattern
        .replace("{*key}", "{key+}")
        .replace("{*operation}", "{operation+}")
        .replace("{*page}", "{page+}")
        .replace("{*oci}", "{oci+}")
        .replace("{oci+}", "providers/acme/null/tags/list")
        .replace("{page+}", "home")
        .replace("{namespace}", "acme")
        .replace("{type}", "null")
        .replace("{name}", "vpc")
        .replace("{system}", "aws")
        .replace("{version}/download", "1.0.0/download")
        .replace("{version}", "1.0.0.json")
        .replace("{os}", "linux")
        .replace("{arch}", "amd64")
        .replace("{hostname}", "registry.terraform.io")
        .replace("{key+}", "archives/abc/x.zip")
        .replace("{operation+}", operation);
    assert!(!path.contains('{'), "{pattern}: unknown parameter");
    let method = if path.starts_with("/v1/publish/")
        || path == tfreg_model::protocol::TOKEN_PATH
        || path == tfreg_model::router::EXCHANGE_PATH
    {
        Method::POST
    } else {
        Method::GET
    };
    (method, path)
}

fn endpoint_names() -> BTreeSet<String> {
    Endpoint::all()
        .iter()
        .map(|e| e.name().to_string())
        .collect()
}

/// The function packages in the workspace: exactly [`PACKAGES`], each with
/// one binary of its name.
#[test]
fn one_package_and_binary_per_handler_group() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found: Vec<String> = std::fs::read_dir(root.join("functions"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            path.join("Cargo.toml")
                .exists()
                .then(|| path.file_name().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    found.sort();
    let mut expected: Vec<String> = PACKAGES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(found, expected);
    for name in PACKAGES {
        let manifest =
            std::fs::read_to_string(root.join(format!("functions/{name}/Cargo.toml"))).unwrap();
        assert!(
            manifest.contains(&format!("[[bin]]\nname = \"{name}\"")),
            "functions/{name} builds the binary {name}"
        );
    }
}

#[test]
fn every_watch_route_leads_to_a_function_and_every_function_has_a_route() {
    let routes = watch_routes();
    let routed: BTreeSet<&str> = routes.values().map(String::as_str).collect();
    assert_eq!(
        routed,
        PACKAGES
            .into_iter()
            .filter(|p| !UNROUTED.contains(p))
            .collect(),
        "every function package but the invoked ones has a route and every route a package"
    );
    // And the shared router agrees: a sample path of each watch route is routed
    // to the endpoint of the function it names.
    for (pattern, function) in &routes {
        if pattern == CATCH_ALL {
            assert_eq!(
                function, "read",
                "the catch-all goes where API Gateway's $default does: the discovery function"
            );
            let err = tfreg_model::router::route(&Method::GET, "/no/such/path").unwrap_err();
            assert!(matches!(err, tfreg_model::RouteError::NotFound(_)), "{err}");
            continue;
        }
        let (method, path) = sample_path(pattern);
        let route =
            tfreg_model::router::route(&method, &path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(package_of(&route), function, "{pattern}");
    }
}

/// cargo lambda watch's pattern for API Gateway's `$default` route.
const CATCH_ALL: &str = "/{*path}";

/// The `[workspace.metadata.lambda.watch.router]` table of Cargo.toml: path → function.
fn watch_routes() -> BTreeMap<String, String> {
    let manifest =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")).unwrap();
    manifest
        .split("[workspace.metadata.lambda.watch.router]")
        .nth(1)
        .expect("the workspace Cargo.toml routes functions for cargo lambda watch")
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter_map(|l| l.split_once(" = "))
        .map(|(p, f)| {
            (
                p.trim_matches('"').to_string(),
                f.trim().trim_matches('"').to_string(),
            )
        })
        .collect()
}

#[test]
fn every_function_has_one_resource_and_one_route_and_every_endpoint_a_function() {
    let t = template();
    let functions = functions(&t);
    let endpoints: BTreeSet<String> = functions.keys().cloned().collect();
    assert_eq!(
        endpoints,
        endpoint_names(),
        "template functions vs router endpoints"
    );

    let routes = routes(&t);
    let routed: BTreeSet<&String> = routes.keys().collect();
    let function_ids: BTreeSet<&String> = functions.values().collect();
    assert_eq!(
        routed, function_ids,
        "every function has a route, every route a function"
    );
    // The discovery function is the API's catch-all: there is no path API
    // Gateway would answer with its own (non-JSON-errors) 404.
    assert_eq!(
        routes[&functions["discovery"]],
        vec!["$default".to_string()]
    );
}

#[test]
fn api_routes_are_the_routes_cargo_lambda_watch_serves() {
    let t = template();
    let binaries = function_binaries(&t);
    let routes = routes(&t);
    let watch = watch_routes();
    for (id, binary) in &binaries {
        for key in routes.get(id).into_iter().flatten() {
            let api_path = match key.as_str() {
                "$default" => CATCH_ALL.to_string(),
                k => k
                    .trim_start_matches("ANY ")
                    .replace("{key+}", "{*key}")
                    .replace("{operation+}", "{*operation}")
                    .replace("{page+}", "{*page}")
                    .replace("{oci+}", "{*oci}"),
            };
            assert_eq!(
                watch.get(&api_path).map(String::as_str),
                Some(binary.as_str()),
                "{key}: cargo lambda watch routes {api_path} elsewhere"
            );
        }
    }
}

#[test]
fn every_function_is_built_for_lambda_and_logs_json_to_a_retained_group() {
    let t = template();
    let g = &t["Globals"]["Function"];
    assert_eq!(g["Runtime"].as_str(), Some("provided.al2023"));
    assert_eq!(g["Handler"].as_str(), Some("bootstrap"));
    let arch = &g["Architectures"][0];
    assert_eq!(tagged_str(arch, "!Ref"), "Architecture");
    assert_eq!(
        t["Parameters"]["Architecture"]["Default"].as_str(),
        Some("arm64")
    );

    // The environment is exactly what the functions read, and covers the required settings.
    let env: BTreeSet<&str> = g["Environment"]["Variables"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap())
        .collect();
    for name in &env {
        assert!(
            tfreg_lambda::config::ALL.contains(name),
            "{name} is not a setting the code reads"
        );
    }
    for required in [
        tfreg_lambda::config::TABLE,
        tfreg_lambda::config::BUCKET,
        tfreg_lambda::config::HOSTNAME,
    ] {
        assert!(env.contains(required), "{required} missing");
    }

    let groups = of_type(&t, "AWS::Logs::LogGroup");
    let permissions = of_type(&t, "AWS::Lambda::Permission");
    for (id, f) in of_type(&t, "AWS::Serverless::Function") {
        let logging = &f["Properties"]["LoggingConfig"];
        assert_eq!(logging["LogFormat"].as_str(), Some("JSON"), "{id}");
        let group = tagged_str(&logging["LogGroup"], "!Ref");
        let group = groups
            .get(group)
            .unwrap_or_else(|| panic!("{id}: no log group {group}"));
        assert_eq!(
            tagged_str(&group["Properties"]["RetentionInDays"], "!Ref"),
            "LogRetentionDays",
            "{id}"
        );
        let own: Vec<_> = permissions
            .values()
            .filter(|p| {
                tagged(&p["Properties"]["FunctionName"], "!Ref").and_then(Value::as_str)
                    == Some(&id)
            })
            .collect();
        let binary = f["Metadata"]["BuildProperties"]["Binary"].as_str();
        if UNROUTED.iter().any(|u| Some(*u) == binary) {
            assert!(own.is_empty(), "{id}: API Gateway may not invoke it");
            continue;
        }
        assert_eq!(own.len(), 1, "{id}: one invoke permission for API Gateway");
        assert_eq!(
            own[0]["Properties"]["Principal"].as_str(),
            Some("apigateway.amazonaws.com")
        );
    }
}

const WRITE_ACTIONS: [&str; 5] = [
    "dynamodb:PutItem",
    "dynamodb:DeleteItem",
    "dynamodb:UpdateItem",
    "s3:PutObject",
    "s3:DeleteObject",
];
const READ_ACTIONS: [&str; 4] = [
    "dynamodb:GetItem",
    "dynamodb:Query",
    "s3:GetObject",
    "s3:ListBucket",
];

/// The inline policy statements of a function's role.
fn statements(function: &Value) -> Vec<&Value> {
    let Some(policies) = function["Properties"]["Policies"].as_sequence() else {
        return vec![];
    };
    let mut out = vec![];
    for policy in policies {
        let statements = policy["Statement"]
            .as_sequence()
            .expect("inline Statement list");
        for s in statements {
            // `!If [Condition, statement, !Ref AWS::NoValue]`: the statement
            // (the archive signing key's read, with ArchiveDelivery cloudfront).
            let s = match s {
                Value::Tagged(t) if t.tag == "If" => {
                    &t.value.as_sequence().expect("!If [c, a, b]")[1]
                }
                s => s,
            };
            assert_eq!(s["Effect"].as_str(), Some("Allow"));
            assert!(
                !format!("{:?}", s["Resource"]).contains("\"*\""),
                "no wildcard resources"
            );
            out.push(s);
        }
    }
    out
}

fn statement_actions(s: &Value) -> Vec<String> {
    match &s["Action"] {
        Value::String(a) => vec![a.clone()],
        // `!If [Condition, a, b]`: either.
        Value::Tagged(t) if t.tag == "If" => t.value.as_sequence().unwrap()[1..]
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect(),
        Value::Sequence(list) => list
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect(),
        other => panic!("Action {other:?}"),
    }
}

/// A statement's resources, spelled as in the template: `!GetAtt Table.Arn`,
/// `!Sub ${Bucket.Arn}/archives/*`.
fn statement_resources(s: &Value) -> Vec<String> {
    fn one(r: &Value) -> Vec<String> {
        match r {
            // `!If [Condition, a, b]`: either; `!Sub [text, variables]`: its text.
            Value::Tagged(t) if t.tag == "If" => t.value.as_sequence().unwrap()[1..]
                .iter()
                .flat_map(one)
                .collect(),
            Value::Tagged(t) if t.value.is_sequence() => {
                vec![format!(
                    "{} {}",
                    t.tag,
                    t.value[0].as_str().expect("a string")
                )]
            }
            Value::Tagged(t) => vec![format!("{} {}", t.tag, t.value.as_str().expect("a string"))],
            other => panic!("Resource {other:?}: an intrinsic of the stack's own resources"),
        }
    }
    match &s["Resource"] {
        Value::Sequence(list) => list.iter().flat_map(one).collect(),
        r => one(r),
    }
}

fn actions(function: &Value) -> Vec<String> {
    statements(function)
        .into_iter()
        .flat_map(statement_actions)
        .collect()
}

/// Every (action, resource) a function's role allows.
fn grants(function: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for s in statements(function) {
        for a in statement_actions(s) {
            for r in statement_resources(s) {
                out.insert((a.clone(), r));
            }
        }
    }
    out
}

const TABLE_ARN: &str = "!GetAtt Table.Arn";

/// The one statement that lets a function which checks tokens record a
/// token's last use (`tfreg_http::auth`, `DynamoStore::touch`): `UpdateItem` of
/// `touched_at` on items of the `TOKENS` partition, returning nothing.
/// The download functions' counting (issue 38): an add to a usage
/// counter, its attributes alone, nothing returned.
fn record_usage() -> Value {
    let yaml = format!(
        r#"
Sid: RecordUsage
Effect: Allow
Action: dynamodb:UpdateItem
Resource: !GetAtt Table.Arn
Condition:
  ForAllValues:StringLike:
    dynamodb:LeadingKeys: ["{usage}*"]
  ForAllValues:StringEquals:
    dynamodb:Attributes: [{attributes}]
  StringEqualsIfExists:
    dynamodb:ReturnValues: NONE
"#,
        usage = tfreg_store::catalog::schema::USAGE_PREFIX,
        attributes = tfreg_store::dynamodb::ADD_ATTRIBUTES.join(", "),
    );
    serde_norway::from_str(&yaml).unwrap()
}

fn record_token_use() -> Value {
    let yaml = format!(
        r#"
Sid: RecordTokenUse
Effect: Allow
Action: dynamodb:UpdateItem
Resource: !GetAtt Table.Arn
Condition:
  ForAllValues:StringEquals:
    dynamodb:LeadingKeys: [{tokens}]
    dynamodb:Attributes: [{pk}, {sk}, {touched}]
  StringEqualsIfExists:
    dynamodb:ReturnValues: NONE
"#,
        tokens = tfreg_store::catalog::schema::TOKENS_PK,
        pk = tfreg_store::dynamodb::PK,
        sk = tfreg_store::dynamodb::SK,
        touched = tfreg_store::dynamodb::TOUCHED_AT,
    );
    serde_norway::from_str(&yaml).unwrap()
}

/// The one statement that lets the `ui` function end a session at sign-out
/// (`catalog::sessions::end`) and keep its audit event: `PutItem` of items of
/// the `SIGNEDOUT` and `AUDIT` partitions, never a token's.
fn end_sessions() -> Value {
    let yaml = format!(
        r#"
Sid: EndSessions
Effect: Allow
Action: dynamodb:PutItem
Resource: !GetAtt Table.Arn
Condition:
  ForAllValues:StringEquals:
    dynamodb:LeadingKeys: [{signed_out}, {audit}]
"#,
        signed_out = tfreg_store::catalog::schema::SIGNED_OUT_PK,
        audit = tfreg_store::catalog::schema::AUDIT_PK,
    );
    serde_norway::from_str(&yaml).unwrap()
}

/// Whether the router asks a token for the routes of a function (its sample
/// request, as [`sample`] builds it from its route key).
fn needs_token(route_key: &str) -> bool {
    let (method, path) = sample(route_key);
    let route = tfreg_model::router::route(&method, &path).unwrap();
    let host = tfreg_model::address::Hostname::parse("registry.example.com").unwrap();
    matches!(
        route.access(&host),
        tfreg_model::token::Access::Token { .. }
    )
}

#[test]
fn only_publish_and_admin_write_and_reads_are_read_only() {
    let t = template();
    let functions = functions(&t);
    let routes = routes(&t);
    let mut token_checkers = BTreeSet::new();
    for (binary, id) in &functions {
        let function = &resources(&t)[id.as_str()];
        if binary == "auth" {
            // Its own rules: the_auth_function_writes_only_sign_in_items.
            assert!(!needs_token(&routes[id][0]), "sign-in needs no token");
            continue;
        }
        let actions = actions(function);
        for a in &actions {
            // Starting a fill: the_fill_function_is_invoked_by_the_functions_that_miss.
            // The archive signing key's read (issue 37): which functions and
            // which one parameter or secret, least_privilege.
            assert!(
                READ_ACTIONS.contains(&a.as_str())
                    || WRITE_ACTIONS.contains(&a.as_str())
                    || a == "lambda:InvokeFunction"
                    || ["ssm:GetParameter", "secretsmanager:GetSecretValue"].contains(&a.as_str()),
                "{binary}: unexpected action {a}"
            );
        }
        let statements = statements(function);
        let token_use: Vec<&&Value> = statements
            .iter()
            .filter(|s| s["Sid"].as_str() == Some("RecordTokenUse"))
            .collect();
        // The ui's sign-out: exactly this statement, and only the ui's.
        let end: Vec<&&Value> = statements
            .iter()
            .filter(|s| s["Sid"].as_str() == Some("EndSessions"))
            .collect();
        if binary == "ui" {
            assert_eq!(end.len(), 1, "ui ends sessions: one EndSessions statement");
            assert_eq!(
                *end[0],
                &end_sessions(),
                "ui: EndSessions may put SIGNEDOUT and AUDIT items, nothing else"
            );
        } else {
            assert!(end.is_empty(), "{binary} ends no session");
        }
        let conditioned = |s: &&&Value| {
            matches!(
                s["Sid"].as_str(),
                Some("RecordTokenUse")
                    | Some("EndSessions")
                    | Some("FindCachedReleases")
                    | Some("RecordUsage")
            )
        };
        // Counting downloads: exactly the download functions, exactly this.
        let usage: Vec<&&Value> = statements
            .iter()
            .filter(|s| s["Sid"].as_str() == Some("RecordUsage"))
            .collect();
        let downloads = [
            "ProviderDownloadFunction",
            "ModuleDownloadFunction",
            "MirrorVersionFunction",
            "CacheProviderDownloadFunction",
            "CacheModuleDownloadFunction",
            // An OCI blob is a download (issue 40).
            "OciFunction",
        ];
        if downloads.contains(&id.as_str()) {
            assert_eq!(usage.len(), 1, "{id} counts downloads");
            assert_eq!(*usage[0], &record_usage(), "{id}: RecordUsage");
        } else {
            assert!(usage.is_empty(), "{id} counts nothing");
        }
        // Writes other than the last-use stamp and the ui's sign-out.
        let writes: Vec<String> = statements
            .iter()
            .filter(|s| !conditioned(s))
            .flat_map(|s| statement_actions(s))
            .filter(|a| WRITE_ACTIONS.contains(&a.as_str()))
            .collect();
        for s in &statements {
            if !conditioned(&s) {
                assert!(
                    s["Condition"].is_null(),
                    "{binary}: only RecordTokenUse, EndSessions, FindCachedReleases and RecordUsage have conditions: {s:?}"
                );
            }
        }
        let protected = needs_token(&routes[id][0]);
        if protected {
            token_checkers.insert(binary.clone());
        }
        match binary.as_str() {
            "publish" => {
                assert_eq!(token_use.len(), 1, "publish records its tokens' last use");
                assert_eq!(
                    *token_use[0],
                    &record_token_use(),
                    "publish: RecordTokenUse"
                );
                let mut expected: Vec<&str> = WRITE_ACTIONS.to_vec();
                expected.retain(|a| *a != "dynamodb:UpdateItem");
                let mut found: Vec<&str> = writes.iter().map(String::as_str).collect();
                found.sort();
                expected.sort();
                assert_eq!(
                    found, expected,
                    "publish writes the table (PutItem, DeleteItem) and the bucket, and updates only a token's last use"
                );
            }
            "admin" => {
                assert!(protected, "the admin API needs a token");
                assert!(token_use.is_empty(), "admin may update any item already");
                let expected: BTreeSet<(String, String)> = [
                    ("dynamodb:GetItem", TABLE_ARN.to_string()),
                    ("dynamodb:Query", TABLE_ARN.to_string()),
                    ("dynamodb:PutItem", TABLE_ARN.to_string()),
                    ("dynamodb:DeleteItem", TABLE_ARN.to_string()),
                    ("dynamodb:UpdateItem", TABLE_ARN.to_string()),
                    (
                        "s3:DeleteObject",
                        format!("!Sub ${{Bucket.Arn}}/{}*", tfreg_model::blob_key::ARCHIVES),
                    ),
                ]
                .into_iter()
                .map(|(a, r)| (a.to_string(), r))
                .collect();
                assert_eq!(
                    grants(function),
                    expected,
                    "admin: its catalog and deleting a release's archives (a delete needs no ListBucket); nothing else"
                );
            }
            _ => {
                assert!(writes.is_empty(), "{binary} may not write: {writes:?}");
                for forbidden in ["dynamodb:PutItem", "dynamodb:DeleteItem"] {
                    let allowed = binary == "ui" && forbidden == "dynamodb:PutItem";
                    assert!(
                        allowed || !actions.iter().any(|a| a == forbidden),
                        "{binary} may not {forbidden}"
                    );
                }
                if protected {
                    assert_eq!(
                        token_use.len(),
                        1,
                        "{binary} checks tokens: one RecordTokenUse statement"
                    );
                    assert_eq!(
                        *token_use[0],
                        &record_token_use(),
                        "{binary}: RecordTokenUse may update touched_at of a token, nothing else"
                    );
                } else {
                    assert!(
                        !actions.iter().any(|a| a == "dynamodb:UpdateItem"),
                        "{binary} checks no token and may update nothing: {actions:?}"
                    );
                }
            }
        }
        if binary == "discovery" {
            assert!(actions.is_empty(), "discovery reads nothing: {actions:?}");
        }
        let s3: Vec<_> = actions.iter().filter(|a| a.starts_with("s3:")).collect();
        if !["blob", "publish", "admin"].contains(&binary.as_str()) {
            assert!(s3.is_empty(), "{binary} needs no bucket access: {s3:?}");
        }
    }
    // The router's own view: every endpoint but discovery, blob and
    // sign-in needs a token.
    let expected: BTreeSet<String> = Endpoint::all()
        .iter()
        .filter(|e| !matches!(e, Endpoint::Discovery | Endpoint::Blob | Endpoint::Auth))
        .map(|e| e.name().to_string())
        .collect();
    assert_eq!(token_checkers, expected, "functions that check tokens");
}

/// The pull-through cache's fill function (plan §5): no route; started
/// only by the functions that can miss (the mirror's, the cache's and
/// blob), each naming it in TFREG_FILL_FUNCTION and allowed to invoke it
/// and nothing else; Lambda retries a failed event once (the fill is
/// idempotent); it writes only the cache's partitions and `cache/` objects.
#[test]
fn the_fill_function_is_invoked_by_the_functions_that_miss_and_writes_only_the_cache() {
    use tfreg_store::catalog::schema;
    let t = template();
    let binaries = function_binaries(&t);
    let fill_ids: Vec<&String> = binaries
        .iter()
        .filter(|(_, b)| b.as_str() == "fill")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(fill_ids, ["FillFunction"], "one fill function");
    let fill = &resources(&t)["FillFunction"];
    assert!(
        !routes(&t).contains_key("FillFunction"),
        "no route leads to the fill function"
    );
    for (id, permission) in of_type(&t, "AWS::Lambda::Permission") {
        assert_ne!(
            tagged_str(&permission["Properties"]["FunctionName"], "!Ref"),
            "FillFunction",
            "{id}: nothing outside the stack may invoke the fill function"
        );
    }
    // Those that wait for a fill stop waiting before Lambda stops them:
    // the client gets our 503 or redirect, not API Gateway's error.
    let timeout = |f: &Value| {
        f["Properties"]["Timeout"]
            .as_u64()
            .or_else(|| t["Globals"]["Function"]["Timeout"].as_u64())
            .unwrap()
    };
    for (endpoint, id) in functions(&t) {
        let wait = match endpoint.as_str() {
            "blob" => tfreg_read::ARCHIVE_WAIT,
            e if e.starts_with("mirror-") || e.starts_with("cache-") => tfreg_read::METADATA_WAIT,
            _ => continue,
        };
        let secs = timeout(&resources(&t)[id.as_str()]);
        assert!(
            wait.as_secs() + 2 <= secs && secs < 30,
            "{id}: waits {wait:?} for a fill, runs at most {secs} s (API Gateway: 30 s)"
        );
    }
    let retry = &fill["Properties"]["EventInvokeConfig"];
    assert_eq!(retry["MaximumRetryAttempts"].as_u64(), Some(1), "{retry:?}");
    assert_eq!(fill["Properties"]["Timeout"].as_u64(), Some(900));

    // Who starts fills: exactly the functions of the routes that fill.
    let may_miss: BTreeSet<&str> = [
        "mirror-index",
        "mirror-version",
        "cache-provider-versions",
        "cache-provider-download",
        "cache-module-versions",
        "cache-module-download",
        "blob",
        // A cached provider's OCI view fills like its other views.
        "oci",
    ]
    .into();
    let by_endpoint = functions(&t);
    let invoke = (
        "lambda:InvokeFunction".to_string(),
        "!GetAtt FillFunction.Arn".to_string(),
    );
    for (endpoint, id) in &by_endpoint {
        let function = &resources(&t)[id.as_str()];
        let env = &function["Properties"]["Environment"]["Variables"]["TFREG_FILL_FUNCTION"];
        // (auth's policies include SAM policy templates: read as text.)
        let invokes = format!("{:?}", function["Properties"]["Policies"]).contains("lambda:");
        if may_miss.contains(endpoint.as_str()) {
            assert_eq!(tagged_str(env, "!Ref"), "FillFunction", "{id}");
            assert!(grants(function).contains(&invoke), "{id} may start fills");
        } else {
            assert!(env.is_null(), "{id} starts no fill");
            assert!(!invokes, "{id} invokes nothing");
        }
    }
    for e in &may_miss {
        assert!(by_endpoint.contains_key(*e), "{e} is an endpoint's name");
    }

    // What the fill function may do: read the table, put items of the
    // cache's partitions only, and keep objects under cache/.
    let statements = statements(fill);
    let writes: Vec<&&Value> = statements
        .iter()
        .filter(|s| {
            statement_actions(s)
                .iter()
                .any(|a| WRITE_ACTIONS.contains(&a.as_str()))
        })
        .collect();
    let item_writes: Vec<&&Value> = writes
        .iter()
        .copied()
        .filter(|s| {
            statement_actions(s)
                .iter()
                .any(|a| a.starts_with("dynamodb:"))
        })
        .collect();
    assert_eq!(item_writes.len(), 1, "{item_writes:?}");
    assert_eq!(statement_actions(item_writes[0]), ["dynamodb:PutItem"]);
    let leading: BTreeSet<&str> =
        item_writes[0]["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"]
            .as_sequence()
            .expect("PutItem is limited to the cache's partitions")
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
    let cache = format!("{}*", schema::CACHE_PREFIX);
    let cache_modules = format!("{}*", schema::CACHE_MODULE_PREFIX);
    let expected: BTreeSet<&str> = [
        cache.as_str(),
        cache_modules.as_str(),
        schema::FILLING_PK,
        schema::CACHED_PK,
        schema::AUDIT_PK,
        schema::SECRET_PK,
    ]
    .into();
    assert_eq!(leading, expected);
    let objects: BTreeSet<String> = grants(fill)
        .into_iter()
        .filter(|(a, _)| a.starts_with("s3:") && a != "s3:ListBucket")
        .map(|(_, r)| r)
        .collect();
    assert_eq!(
        objects,
        BTreeSet::from([format!(
            "!Sub ${{Bucket.Arn}}/{}*",
            tfreg_model::blob_key::CACHE
        )]),
        "the fill function keeps objects under cache/ only"
    );
    assert!(
        !actions(fill)
            .iter()
            .any(|a| a == "s3:DeleteObject" || a == "dynamodb:DeleteItem"),
        "the fill function deletes nothing"
    );
    // The tests' loopback exception is never deployed.
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml")).unwrap();
    assert!(!text.contains(tfreg_lambda::config::ORIGIN_ALLOW_LOOPBACK));
}

/// Private by default: reads need a token unless the operator says otherwise.
#[test]
fn access_parameters_reach_the_functions_and_reads_are_private_by_default() {
    let t = template();
    let params = &t["Parameters"];
    let env = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert!(
        params["RequireReadToken"].is_null(),
        "RequireReadToken is gone (TFREG_ANONYMOUS_READS replaced it)"
    );
    for (param, var) in [
        ("AnonymousReads", tfreg_lambda::config::ANONYMOUS_READS),
        (
            "RequireNamespaceKeys",
            tfreg_lambda::config::REQUIRE_NAMESPACE_KEYS,
        ),
    ] {
        let p = &params[param];
        assert_eq!(p["Type"].as_str(), Some("String"), "{param}");
        assert_eq!(
            p["Default"].as_str(),
            Some("false"),
            "{param} is off by default"
        );
        let allowed: Vec<_> = p["AllowedValues"]
            .as_sequence()
            .unwrap_or_else(|| panic!("{param}: AllowedValues"))
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(allowed, ["false", "true"], "{param}");
        assert_eq!(tagged_str(&env[var], "!Ref"), param, "{var}");
    }
    let cache = &params["TokenCacheSeconds"];
    assert_eq!(cache["Type"].as_str(), Some("Number"));
    assert_eq!(
        cache["Default"].as_u64(),
        Some(tfreg_http::auth::DEFAULT_TOKEN_CACHE_SECS)
    );
    assert_eq!(cache["MinValue"].as_u64(), Some(0));
    assert_eq!(
        cache["MaxValue"].as_u64(),
        Some(tfreg_http::auth::MAX_TOKEN_CACHE_SECS)
    );
    assert_eq!(
        tagged_str(&env[tfreg_lambda::config::TOKEN_CACHE_SECS], "!Ref"),
        "TokenCacheSeconds"
    );
    // No function turns a default back on its own.
    for (id, f) in of_type(&t, "AWS::Serverless::Function") {
        let own = &f["Properties"]["Environment"]["Variables"];
        for var in [
            tfreg_lambda::config::ANONYMOUS_READS,
            tfreg_lambda::config::REQUIRE_NAMESPACE_KEYS,
            tfreg_lambda::config::TOKEN_CACHE_SECS,
        ] {
            assert!(own[var].is_null(), "{id} overrides {var}");
        }
    }
    // And the code agrees that nothing set means private.
    let settings = tfreg_lambda::config::Settings::from_lookup(|name| match name {
        "TFREG_TABLE" | "TFREG_BUCKET" => Some("x".into()),
        "TFREG_HOSTNAME" => Some("registry.example.com".into()),
        _ => None,
    })
    .unwrap();
    assert!(
        !settings.anonymous_reads,
        "the code's default is private too"
    );
}

/// Every `TFREG_*` name anywhere in the template (environments, comments,
/// outputs) is a setting the code reads.
#[test]
fn every_tfreg_variable_in_the_template_is_a_setting() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml")).unwrap();
    let mut found = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("TFREG_") {
        let tail = &rest[at..];
        let len = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        found.insert(tail[..len].to_string());
        rest = &tail[len..];
    }
    assert!(found.contains(tfreg_lambda::config::TABLE), "{found:?}");
    for name in &found {
        assert!(
            tfreg_lambda::config::ALL.contains(&name.as_str()),
            "{name} (template.yaml) is not a setting the code reads"
        );
    }
    // Function-level variables too, not only Globals (most functions have none).
    for (id, f) in of_type(&template(), "AWS::Serverless::Function") {
        let Some(variables) = f["Properties"]["Environment"]["Variables"].as_mapping() else {
            continue;
        };
        for name in variables.keys() {
            let name = name.as_str().unwrap();
            assert!(tfreg_lambda::config::ALL.contains(&name), "{id}: {name}");
        }
    }
}

#[test]
fn the_admin_function_and_outputs() {
    let t = template();
    let functions = functions(&t);
    let admin = &resources(&t)[functions["admin"].as_str()]["Properties"];
    assert_eq!(tagged_str(&admin["MemorySize"], "!Ref"), "ReadMemorySize");
    assert_eq!(admin["Timeout"].as_u64(), Some(30));
    let outputs = &t["Outputs"];
    let command = tagged_str(&outputs["TokenCommand"]["Value"], "!Sub");
    for part in ["tfreg token create", "--table ${Table}", "--scope admin"] {
        assert!(
            command.contains(part),
            "TokenCommand {command:?} lacks {part}"
        );
    }
    let admin_url = &outputs["AdminApiUrl"]["Value"];
    let admin_url = tagged(admin_url, "!Sub").expect("AdminApiUrl: !Sub");
    assert_eq!(
        admin_url[0].as_str(),
        Some(format!("https://${{Host}}{}", tfreg_model::protocol::ADMIN_V1).as_str())
    );
    let cli = tagged(&outputs["CliConfiguration"]["Value"], "!Sub").unwrap()[0]
        .as_str()
        .unwrap();
    assert!(cli.contains("credentials \"${Host}\""), "{cli}");
}

#[test]
fn table_and_bucket_match_what_the_code_uses() {
    let t = template();
    let table = &resources(&t)["Table"]["Properties"];
    assert_eq!(table["BillingMode"].as_str(), Some("PAY_PER_REQUEST"));
    let keys: Vec<(&str, &str)> = table["KeySchema"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|k| {
            (
                k["AttributeName"].as_str().unwrap(),
                k["KeyType"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        keys,
        [
            (tfreg_store::dynamodb::PK, "HASH"),
            (tfreg_store::dynamodb::SK, "RANGE")
        ]
    );
    for a in table["AttributeDefinitions"].as_sequence().unwrap() {
        assert_eq!(a["AttributeType"].as_str(), Some("S"));
    }
    let pitr = &table["PointInTimeRecoverySpecification"]["PointInTimeRecoveryEnabled"];
    assert!(
        tagged(pitr, "!If").is_some(),
        "point-in-time recovery is a parameter"
    );
    assert!(
        tagged(&table["DeletionProtectionEnabled"], "!If").is_some(),
        "deletion protection is a parameter"
    );
    let ttl = &table["TimeToLiveSpecification"];
    assert_eq!(
        (ttl["AttributeName"].as_str(), ttl["Enabled"].as_bool()),
        (Some(tfreg_store::dynamodb::EXPIRES_AT), Some(true)),
        "unfinished publishes expire"
    );

    let bucket = &resources(&t)["Bucket"]["Properties"];
    let block = &bucket["PublicAccessBlockConfiguration"];
    for k in [
        "BlockPublicAcls",
        "BlockPublicPolicy",
        "IgnorePublicAcls",
        "RestrictPublicBuckets",
    ] {
        assert_eq!(block[k].as_bool(), Some(true), "{k}");
    }
    assert_eq!(
        bucket["VersioningConfiguration"]["Status"].as_str(),
        Some("Enabled")
    );
    let rules = bucket["LifecycleConfiguration"]["Rules"]
        .as_sequence()
        .unwrap();
    assert!(
        rules
            .iter()
            .any(|r| !r["AbortIncompleteMultipartUpload"].is_null())
    );
    let staging = tfreg_model::blob_key::UPLOADS;
    assert!(
        rules
            .iter()
            .any(|r| r["Prefix"].as_str() == Some(staging) && !r["ExpirationInDays"].is_null()),
        "unfinished uploads under {staging} expire"
    );
    let policy = &resources(&t)["BucketPolicy"]["Properties"]["PolicyDocument"]["Statement"][0];
    assert_eq!(policy["Effect"].as_str(), Some("Deny"));
    assert_eq!(
        policy["Condition"]["Bool"]["aws:SecureTransport"].as_str(),
        Some("false")
    );
}

/// What one CloudFront Function invocation returned, as Node.js ran it.
#[derive(serde::Deserialize, Debug)]
struct EdgeResponse {
    #[serde(rename = "statusCode")]
    status: u16,
    headers: BTreeMap<String, BTreeMap<String, String>>,
    body: EdgeBody,
}

#[derive(serde::Deserialize, Debug)]
struct EdgeBody {
    encoding: String,
    data: String,
}

fn run_edge_function(code: &str, methods: &[&str]) -> Vec<EdgeResponse> {
    let events: Vec<String> = methods
        .iter()
        .map(|m| format!(r#"{{"request":{{"method":"{m}","uri":"/.well-known/terraform.json","headers":{{}},"querystring":{{}}}}}}"#))
        .collect();
    let script = format!(
        "const handler = new Function({code})();\n\
         process.stdout.write(JSON.stringify([{events}].map(handler)));\n",
        code = serde_json::to_string(&format!("{code}\nreturn handler;\n")).unwrap(),
        events = events.join(",")
    );
    let mut node = Command::new("node")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node (Node.js, which .ci/install-tools requires) on PATH");
    node.stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = node.wait_with_output().unwrap();
    assert!(out.status.success(), "node failed on:\n{script}");
    serde_json::from_slice(&out.stdout).expect("the function's responses")
}

async fn rust_answer(
    method: Method,
    login_v1: Option<tfreg_model::protocol::LoginV1>,
) -> (u16, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = tfreg_store::sqlite::SqliteStore::in_memory().unwrap();
    let blobs = tfreg_store::fs::FsBlobStore::open(dir.path()).unwrap();
    let mut config = tfreg_http::Config::new(
        tfreg_model::address::Hostname::parse("registry.example.com").unwrap(),
    );
    config.login_v1 = login_v1;
    let registry = tfreg_http::Registry::with_stored_signer(
        std::sync::Arc::new(store),
        std::sync::Arc::new(blobs),
        config,
    );
    let req = http::Request::builder()
        .method(method)
        .uri("/.well-known/terraform.json")
        .body(tfreg_http::body::Body::empty())
        .unwrap();
    let resp = tfreg_http::App::new(std::sync::Arc::new(registry), tfreg_http::Served::new())
        .handle(req)
        .await;
    let status = resp.status().as_u16();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    let (parts, body) = resp.into_parts();
    let body = tfreg_http::body::read_body(&parts.headers, body, usize::MAX)
        .await
        .unwrap();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

#[tokio::test]
async fn the_edge_answers_discovery_exactly_as_the_discovery_handler() {
    let t = template();
    let edge = &resources(&t)["EdgeDiscovery"]["Properties"];
    assert_eq!(
        edge["FunctionConfig"]["Runtime"].as_str(),
        Some("cloudfront-js-2.0")
    );
    // Without an identity provider, and with one (login.v1 over LoginPorts).
    for (sign_in, login_v1) in [
        (false, None),
        (
            true,
            Some(tfreg_model::protocol::LoginV1::new(
                tfreg_model::login::CLI_CLIENT_ID,
                tfreg_model::login::PortRange::new(10000, 10010).unwrap(),
            )),
        ),
    ] {
        let params = parameter_defaults(&t);
        let conditions = BTreeMap::from([("HasSignIn".to_string(), sign_in)]);
        let code = evaluate(&edge["FunctionCode"], &params, &conditions);
        edge_answers_as_the_handler(&code, login_v1).await;
    }

    // CloudFront runs it for that one path, on the viewer request; every other
    // path goes to the API uncached, with Authorization but without Host.
    edge_is_on_the_discovery_path(&t);
}

async fn edge_answers_as_the_handler(code: &str, login_v1: Option<tfreg_model::protocol::LoginV1>) {
    let answers = run_edge_function(code, &["GET", "HEAD", "POST"]);
    let (status, content_type, body) = rust_answer(Method::GET, login_v1.clone()).await;
    assert_eq!(body.contains("login.v1"), login_v1.is_some(), "{body}");
    for (edge, method) in answers[..2].iter().zip(["GET", "HEAD"]) {
        assert_eq!(edge.status, status, "{method}");
        assert_eq!(
            edge.headers["content-type"]["value"], content_type,
            "{method}"
        );
        assert_eq!(edge.body.encoding, "text");
        assert_eq!(
            edge.body.data, body,
            "{method}: the edge document is the handler's, byte for byte"
        );
    }
    let (status, _, body) = rust_answer(Method::POST, login_v1).await;
    assert_eq!(answers[2].status, status);
    assert_eq!(status, 405);
    let edge_json: serde_json::Value = serde_json::from_str(&answers[2].body.data).unwrap();
    let rust_json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(edge_json, rust_json, "405 body");
}

fn edge_is_on_the_discovery_path(t: &Value) {
    let dist = &resources(t)["Distribution"]["Properties"]["DistributionConfig"];
    let behaviours = dist["CacheBehaviors"].as_sequence().unwrap();
    let discovery: Vec<_> = behaviours
        .iter()
        .filter(|b| b["PathPattern"].as_str() == Some("/.well-known/terraform.json"))
        .collect();
    assert_eq!(discovery.len(), 1);
    let assoc = &discovery[0]["FunctionAssociations"][0];
    assert_eq!(assoc["EventType"].as_str(), Some("viewer-request"));
    assert_eq!(
        tagged_str(&assoc["FunctionARN"], "!GetAtt"),
        "EdgeDiscovery.FunctionMetadata.FunctionARN"
    );
    let default = &dist["DefaultCacheBehavior"];
    const CACHING_DISABLED: &str = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad";
    const ALL_VIEWER_EXCEPT_HOST_HEADER: &str = "b689b0a8-53d0-40ab-baf2-68738e2966ac";
    assert_eq!(default["CachePolicyId"].as_str(), Some(CACHING_DISABLED));
    assert_eq!(
        default["OriginRequestPolicyId"].as_str(),
        Some(ALL_VIEWER_EXCEPT_HOST_HEADER)
    );
    assert_eq!(default["ViewerProtocolPolicy"].as_str(), Some("https-only"));
    let methods = default["AllowedMethods"].as_sequence().unwrap();
    assert!(
        methods.iter().any(|m| m.as_str() == Some("POST")),
        "publish needs POST"
    );
}

/// Each parameter's default, as text.
fn parameter_defaults(t: &Value) -> BTreeMap<String, String> {
    t["Parameters"]
        .as_mapping()
        .unwrap()
        .iter()
        .filter_map(|(name, p)| {
            let default = match &p["Default"] {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            Some((name.as_str().unwrap().to_string(), default))
        })
        .collect()
}

/// What CloudFormation makes of a string-valued expression of `!Sub`
/// (both forms), `!If`, `!Select`, `!Split` and `!Ref` of a parameter, for
/// the given parameters and conditions: enough for the edge function's code.
fn evaluate(
    v: &Value,
    params: &BTreeMap<String, String>,
    conditions: &BTreeMap<String, bool>,
) -> String {
    fn list(
        v: &Value,
        params: &BTreeMap<String, String>,
        conditions: &BTreeMap<String, bool>,
    ) -> Vec<String> {
        let (delimiter, text) = match tagged(v, "!Split").and_then(Value::as_sequence) {
            Some(args) => (
                args[0].as_str().unwrap().to_string(),
                evaluate(&args[1], params, conditions),
            ),
            None => panic!("a list expression: {v:?}"),
        };
        text.split(&delimiter).map(str::to_string).collect()
    }
    match v {
        Value::String(s) => s.clone(),
        Value::Tagged(t) => match (t.tag.to_string().as_str(), &t.value) {
            ("!Ref", Value::String(name)) => params
                .get(name)
                .unwrap_or_else(|| panic!("no parameter {name}"))
                .clone(),
            ("!If", Value::Sequence(args)) => {
                let name = args[0].as_str().unwrap();
                let chosen = *conditions
                    .get(name)
                    .unwrap_or_else(|| panic!("condition {name} not given"));
                evaluate(&args[if chosen { 1 } else { 2 }], params, conditions)
            }
            ("!Select", Value::Sequence(args)) => {
                let at = args[0].as_u64().unwrap() as usize;
                list(&args[1], params, conditions)[at].clone()
            }
            ("!Sub", Value::String(text)) => substitute(text, &BTreeMap::new(), params),
            ("!Sub", Value::Sequence(args)) => {
                let vars: BTreeMap<String, String> = args[1]
                    .as_mapping()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.as_str().unwrap().to_string(),
                            evaluate(v, params, conditions),
                        )
                    })
                    .collect();
                substitute(args[0].as_str().unwrap(), &vars, params)
            }
            (tag, _) => panic!("cannot evaluate {tag}"),
        },
        other => panic!("not a string expression: {other:?}"),
    }
}

/// `${Name}` replaced by a variable or parameter (`${!Literal}` is not used here).
fn substitute(
    text: &str,
    vars: &BTreeMap<String, String>,
    params: &BTreeMap<String, String>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let end = rest[at..].find('}').expect("closing brace") + at;
        let name = &rest[at + 2..end];
        assert!(!name.starts_with('!'), "literal ${{!...}} in {text}");
        let value = vars
            .get(name)
            .or_else(|| params.get(name))
            .unwrap_or_else(|| panic!("${{{name}}} is neither a variable nor a parameter"));
        out.push_str(value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// A condition of the template, for the given parameters: `!Not`,
/// `!Equals` (of `!Ref`s and strings), `!And`, `!Or`, `!Condition`.
fn condition(t: &Value, name: &str, params: &BTreeMap<String, String>) -> bool {
    fn eval(t: &Value, v: &Value, params: &BTreeMap<String, String>) -> bool {
        let Value::Tagged(expr) = v else {
            panic!("not a condition: {v:?}")
        };
        let args = || expr.value.as_sequence().unwrap();
        let text = |v: &Value| match tagged(v, "!Ref") {
            Some(name) => params[name.as_str().unwrap()].clone(),
            None => v.as_str().unwrap().to_string(),
        };
        match expr.tag.to_string().as_str() {
            "!Not" => !eval(t, &args()[0], params),
            "!And" => args().iter().all(|c| eval(t, c, params)),
            "!Or" => args().iter().any(|c| eval(t, c, params)),
            "!Equals" => text(&args()[0]) == text(&args()[1]),
            "!Condition" => condition(t, expr.value.as_str().unwrap(), params),
            other => panic!("cannot evaluate {other}"),
        }
    }
    eval(t, &t["Conditions"][name], params)
}

/// The auth function exists with an identity provider (`OidcIssuer`: the
/// login.v1 and single sign-on routes), with CI issuers (`CiIssuers`: the
/// exchange route), or both; without either, nothing of it exists. Each
/// route exists only where its part is configured, and everything that
/// reaches the function (log group, integration, API Gateway's permission)
/// only with the function.
#[test]
fn the_auth_function_exists_only_with_sign_in_or_ci_publishing() {
    use tfreg_model::router::{AuthRoute, VariantArray as _};
    let t = template();
    let functions = functions(&t);
    let id = &functions["auth"];
    assert_eq!(id, "AuthFunction");
    let auth_ids: Vec<String> = resources(&t)
        .keys()
        .map(|k| k.as_str().unwrap().to_string())
        .filter(|k| k.starts_with("Auth"))
        .collect();
    assert_eq!(
        auth_ids,
        [
            "AuthFunction",
            "AuthLogGroup",
            "AuthIntegration",
            "AuthAuthorizeRoute",
            "AuthCallbackRoute",
            "AuthTokenRoute",
            "AuthSsoRoute",
            "AuthExchangeRoute",
            "AuthPermission",
            // Its alarms (issue 38).
            "AuthErrorsAlarm",
            "AuthThrottlesAlarm"
        ]
    );
    let mut keys = routes(&t)[id].clone();
    keys.sort();
    let mut expected: Vec<String> = AuthRoute::VARIANTS
        .iter()
        .map(|r| format!("ANY {}", r.path()))
        .collect();
    expected.sort();
    assert_eq!(keys, expected, "one route per sign-in step, nothing more");
    let route_of = |resource: &Value| {
        let key = resource["Properties"]["RouteKey"].as_str()?;
        AuthRoute::VARIANTS
            .iter()
            .copied()
            .find(|r| key == format!("ANY {}", r.path()))
    };

    for (issuer, ci) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut params = parameter_defaults(&t);
        if issuer {
            params.insert("OidcIssuer".into(), "https://login.example.com".into());
        }
        if ci {
            params.insert(
                "CiIssuers".into(),
                "https://token.actions.githubusercontent.com".into(),
            );
        }
        let exists = |name: &str, r: &Value| match r["Condition"].as_str() {
            None => true,
            Some(c) => {
                assert!(
                    matches!(t["Conditions"][c], Value::Tagged(_)),
                    "{name}: no condition {c}"
                );
                condition(&t, c, &params)
            }
        };
        for (name, r) in resources(&t) {
            let name = name.as_str().unwrap();
            // A reference made only under `!If [HasAuth, ...]` needs no auth
            // function (the dashboard's, issue 38).
            let text = format!("{:?}", without_if(r, "HasAuth"));
            let reaches = auth_ids
                .iter()
                .any(|a| a != name && text.contains(a.as_str()));
            if !(auth_ids.iter().any(|a| a == name) || reaches) {
                continue;
            }
            let wanted = match route_of(r) {
                Some(AuthRoute::Exchange) => ci,
                Some(_) => issuer,
                None => issuer || ci,
            };
            assert_eq!(
                exists(name, r),
                wanted,
                "{name} with an issuer: {issuer}, CI issuers: {ci}"
            );
        }
    }
    let log = tagged_str(
        &resources(&t)[id.as_str()]["Properties"]["LoggingConfig"]["LogGroup"],
        "!Ref",
    );
    assert_eq!(resources(&t)[log]["Condition"].as_str(), Some("HasAuth"));
}

/// `v` with every `!If [condition, then, else]` replaced by its `else`.
fn without_if(v: &Value, condition: &str) -> Value {
    match v {
        Value::Tagged(t) if t.tag == "!If" => match t.value.as_sequence().map(Vec::as_slice) {
            Some([c, _, otherwise]) if c.as_str() == Some(condition) => {
                without_if(otherwise, condition)
            }
            _ => v.clone(),
        },
        Value::Tagged(t) => Value::Tagged(Box::new(serde_norway::value::TaggedValue {
            tag: t.tag.clone(),
            value: without_if(&t.value, condition),
        })),
        Value::Sequence(items) => {
            Value::Sequence(items.iter().map(|i| without_if(i, condition)).collect())
        }
        Value::Mapping(m) => Value::Mapping(
            m.iter()
                .map(|(k, v)| (k.clone(), without_if(v, condition)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Least privilege, from the items the sign-in steps use
/// (`tfreg_store::catalog::{login, tokens, audit, sso}`): put and take
/// (DeleteItem) its own state, put a token and its audit event, record a CI
/// token's jti, hold a CI identity's place among its live tokens, query the group mappings and trust policies, read the URL
/// signing secret (a UI session's MAC key), and read that one client
/// secret (only with an identity provider: a CI-only registry has none);
/// nothing else.
#[test]
fn the_auth_function_writes_only_sign_in_items_and_reads_one_secret() {
    use tfreg_store::catalog::schema::{
        AUDIT_PK, CI_TOKENS_PK, JTI_PK, LOGINCODE_PK, NONCE_PK, SECRET_PK, SSOMAP_PK, TOKENS_PK,
        TRUST_PK,
    };
    let t = template();
    let functions = functions(&t);
    let auth = &resources(&t)[functions["auth"].as_str()]["Properties"];
    let yaml = format!(
        r#"
- Version: "2012-10-17"
  Statement:
    - Sid: SignInState
      Effect: Allow
      Action: [dynamodb:PutItem, dynamodb:DeleteItem]
      Resource: !GetAtt Table.Arn
      Condition:
        ForAllValues:StringEquals:
          dynamodb:LeadingKeys: [{LOGINCODE_PK}, {NONCE_PK}]
    - Sid: IssueTokens
      Effect: Allow
      Action: dynamodb:PutItem
      Resource: !GetAtt Table.Arn
      Condition:
        ForAllValues:StringEquals:
          dynamodb:LeadingKeys: [{TOKENS_PK}, {AUDIT_PK}]
    - Sid: UseCiTokens
      Effect: Allow
      Action: dynamodb:PutItem
      Resource: !GetAtt Table.Arn
      Condition:
        ForAllValues:StringEquals:
          dynamodb:LeadingKeys: [{JTI_PK}]
    - Sid: BoundCiTokens
      Effect: Allow
      Action: [dynamodb:Query, dynamodb:PutItem]
      Resource: !GetAtt Table.Arn
      Condition:
        ForAllValues:StringEquals:
          dynamodb:LeadingKeys: [{CI_TOKENS_PK}]
    - Sid: ReadGroupMappings
      Effect: Allow
      Action: dynamodb:Query
      Resource: !GetAtt Table.Arn
      Condition:
        ForAllValues:StringEquals:
          dynamodb:LeadingKeys: [{SSOMAP_PK}, {TRUST_PK}]
    - Sid: OpenSessions
      Effect: Allow
      Action: dynamodb:GetItem
      Resource: !GetAtt Table.Arn
      Condition:
        ForAllValues:StringEquals:
          dynamodb:LeadingKeys: ["{SECRET_PK}"]
    - !If
      - HasSignIn
      - Sid: ReadClientSecret
        Effect: Allow
        Action: !If [SecretInSecretsManager, secretsmanager:GetSecretValue, ssm:GetParameter]
        Resource: !If
          - SecretInSecretsManager
          - !Ref OidcClientSecretArn
          - !Sub "arn:${{AWS::Partition}}:ssm:${{AWS::Region}}:${{AWS::AccountId}}:parameter${{OidcClientSecretParameter}}"
      - !Ref AWS::NoValue
"#
    );
    let expected: Value = serde_norway::from_str(&yaml).unwrap();
    assert_eq!(auth["Policies"], expected);
    // The secret's reference: the parameter or the secret, whichever is set.
    let env = &auth["Environment"]["Variables"];
    assert_eq!(
        tagged_str(&env[tfreg_lambda::config::OIDC_CLIENT_ID], "!Ref"),
        "OidcClientId"
    );
    let secret = tagged(&env[tfreg_lambda::config::OIDC_CLIENT_SECRET], "!If").unwrap();
    assert_eq!(secret[0].as_str(), Some("SecretInSecretsManager"));
    assert_eq!(tagged_str(&secret[1], "!Ref"), "OidcClientSecretArn");
    assert_eq!(tagged_str(&secret[2], "!Ref"), "OidcClientSecretParameter");
    assert_eq!(
        tagged_str(&env[tfreg_lambda::config::LOGIN_TOKEN_TTL], "!Ref"),
        "LoginTokenTtlSeconds"
    );
    // The CI exchange's settings, each from its parameter.
    use tfreg_lambda::signin::{CI_AUDIENCE, CI_ISSUERS, CI_MAX_TOKEN_LIFETIME, CI_TOKEN_TTL};
    for (name, param) in [
        (CI_ISSUERS, "CiIssuers"),
        (CI_AUDIENCE, "CiAudience"),
        (CI_TOKEN_TTL, "CiTokenTtl"),
        (CI_MAX_TOKEN_LIFETIME, "CiMaxTokenLifetime"),
    ] {
        assert_eq!(tagged_str(&env[name], "!Ref"), param, "{name}");
    }
    // Either form of the reference is one the function reads.
    let params = &t["Parameters"];
    for (param, example) in [
        ("OidcClientSecretParameter", "/tfreg/oidc-client-secret"),
        (
            "OidcClientSecretArn",
            "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tfreg-oidc-AbCdEf",
        ),
    ] {
        assert_eq!(params[param]["Default"].as_str(), Some(""));
        tfreg_lambda::signin::SecretRef::parse(example)
            .unwrap_or_else(|e| panic!("{param} {example}: {e}"));
    }
}

/// The sign-in parameters reach discovery in every function and their
/// defaults are the code's.
#[test]
fn sign_in_parameters_reach_the_functions_with_the_code_s_defaults() {
    let t = template();
    let env = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(
        tagged_str(&env[tfreg_lambda::config::OIDC_ISSUER], "!Ref"),
        "OidcIssuer"
    );
    assert_eq!(
        tagged_str(&env[tfreg_lambda::config::LOGIN_PORTS], "!Ref"),
        "LoginPorts"
    );
    assert!(
        env[tfreg_lambda::config::OIDC_ALLOW_LOOPBACK].is_null(),
        "the tests' loopback setting is never deployed"
    );
    assert!(
        !std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/template.yaml"))
            .unwrap()
            .contains(tfreg_lambda::config::OIDC_ALLOW_LOOPBACK)
    );
    let p = &t["Parameters"];
    assert_eq!(p["OidcIssuer"]["Default"].as_str(), Some(""));
    assert_eq!(
        p["LoginPorts"]["Default"].as_str(),
        Some(tfreg_lambda::signin::DEFAULT_LOGIN_PORTS)
    );
    let ttl = &p["LoginTokenTtlSeconds"];
    assert_eq!(
        ttl["Default"].as_u64(),
        Some(tfreg_model::signin::DEFAULT_LOGIN_TOKEN_TTL_SECS)
    );
    assert_eq!(
        ttl["MinValue"].as_u64(),
        Some(tfreg_lambda::signin::MIN_LOGIN_TOKEN_TTL_SECS)
    );
    assert_eq!(
        ttl["MaxValue"].as_u64(),
        Some(tfreg_lambda::signin::MAX_LOGIN_TOKEN_TTL_SECS)
    );
    // With the defaults and an issuer, the code reads what the template sets.
    let settings = tfreg_lambda::config::Settings::from_lookup(|name| match name {
        "TFREG_TABLE" | "TFREG_BUCKET" => Some("x".into()),
        "TFREG_HOSTNAME" => Some("registry.example.com".into()),
        "TFREG_OIDC_ISSUER" => Some("https://login.example.com/realms/acme".into()),
        "TFREG_LOGIN_PORTS" => Some(tfreg_lambda::signin::DEFAULT_LOGIN_PORTS.into()),
        _ => None,
    })
    .unwrap();
    assert_eq!(
        settings.registry_config().login_v1.unwrap().ports,
        [10000, 10010]
    );

    // The CI exchange: off by default (every parameter empty, as the
    // function reads them), and values of the documented forms read as meant.
    let lookup = |values: BTreeMap<&'static str, String>| {
        tfreg_auth::CiSettings::from_lookup(move |name| {
            let param = match name {
                "TFREG_CI_ISSUERS" => "CiIssuers",
                "TFREG_CI_AUDIENCE" => "CiAudience",
                "TFREG_CI_TOKEN_TTL" => "CiTokenTtl",
                "TFREG_CI_MAX_TOKEN_LIFETIME" => "CiMaxTokenLifetime",
                _ => return None,
            };
            values.get(param).cloned()
        })
    };
    let defaults: BTreeMap<&'static str, String> = [
        "CiIssuers",
        "CiAudience",
        "CiTokenTtl",
        "CiMaxTokenLifetime",
    ]
    .into_iter()
    .map(|name| (name, p[name]["Default"].as_str().unwrap().to_string()))
    .collect();
    assert!(lookup(defaults.clone()).unwrap().is_none(), "no exchange");
    let mut set = defaults;
    set.insert(
        "CiIssuers",
        "https://token.actions.githubusercontent.com,https://gitlab.com".into(),
    );
    set.insert("CiTokenTtl", "30m".into());
    set.insert("CiMaxTokenLifetime", "10800".into());
    let ci = lookup(set).unwrap().unwrap();
    assert_eq!(
        ci.issuers,
        [
            "https://token.actions.githubusercontent.com",
            "https://gitlab.com"
        ]
    );
    assert_eq!(
        (ci.token_ttl_secs, ci.max_token_lifetime_secs),
        (1800, 10800)
    );
    assert_eq!(ci.audience, None, "the registry's URL");
}

/// Issue 38: every metric of the functions' namespace that an alarm or the
/// dashboard reads is one the functions' EMF lines write, with that
/// dimension (`tfreg_lambda::emf`'s own encoders), and the namespace is
/// the one the functions are given.
#[test]
fn the_alarms_and_dashboard_read_the_metrics_the_functions_write() {
    use std::time::Duration;
    use tfreg_http::metrics::*;
    let t = template();
    let namespace = "tfreg/${AWS::StackName}";
    let env = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(
        tagged_str(&env["TFREG_METRICS_NAMESPACE"], "!Sub"),
        namespace
    );

    // What the functions write: metric name -> its dimension set.
    let props = serde_json::Map::new;
    let lines = [
        tfreg_lambda::emf::request_line(
            "ns",
            0,
            &RequestRecord {
                endpoint: "discovery",
                status: 200,
                latency: Duration::ZERO,
                cold_start: false,
            },
            props(),
        ),
        tfreg_lambda::emf::fill_line(
            "ns",
            0,
            &FillRecord {
                kind: PackageKind::Provider,
                outcome: FillOutcome::Filled,
                duration: Duration::ZERO,
            },
            props(),
        ),
        tfreg_lambda::emf::publish_line(
            "ns",
            0,
            &PublishRecord {
                kind: PackageKind::Module,
                outcome: PublishOutcome::Published,
            },
            props(),
        ),
    ];
    let mut written: BTreeMap<String, String> = BTreeMap::new();
    for line in &lines {
        let d = &line["_aws"]["CloudWatchMetrics"][0];
        let dimension = d["Dimensions"][0][0].as_str().unwrap().to_string();
        for m in d["Metrics"].as_array().unwrap() {
            written.insert(m["Name"].as_str().unwrap().to_string(), dimension.clone());
        }
    }

    // What the alarms read from the namespace.
    let mut read: BTreeSet<(String, String)> = BTreeSet::new();
    for (id, alarm) in of_type(&t, "AWS::CloudWatch::Alarm") {
        let p = &alarm["Properties"];
        assert_eq!(p["TreatMissingData"].as_str(), Some("notBreaching"), "{id}");
        assert!(
            p["AlarmActions"]
                .as_sequence()
                .is_some_and(|a| !a.is_empty()),
            "{id}"
        );
        let metrics: Vec<&Value> = match p["Metrics"].as_sequence() {
            Some(queries) => queries
                .iter()
                .filter_map(|q| q.get("MetricStat").map(|s| &s["Metric"]))
                .collect(),
            None => vec![p],
        };
        for m in metrics {
            if tagged(&m["Namespace"], "!Sub").and_then(Value::as_str) != Some(namespace) {
                continue;
            }
            for d in m["Dimensions"].as_sequence().unwrap() {
                read.insert((
                    m["MetricName"].as_str().unwrap().to_string(),
                    d["Name"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    assert!(
        read.contains(&("FillFailures".into(), "Kind".into())),
        "{read:?}"
    );
    // And the dashboard's searches of it: {"NS",DIMENSION} MetricName="NAME".
    let body =
        &of_type(&t, "AWS::CloudWatch::Dashboard")["Dashboard"]["Properties"]["DashboardBody"];
    let body = tagged(body, "!Sub").unwrap().as_sequence().unwrap()[0]
        .as_str()
        .unwrap();
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    let marker = format!("{{\"{namespace}\",");
    let mut searched = 0;
    for w in body["widgets"].as_array().unwrap() {
        for m in w["properties"]["metrics"].as_array().into_iter().flatten() {
            let Some(e) = m[0]["expression"].as_str() else {
                continue;
            };
            let Some(rest) = e.split_once(&marker).map(|(_, r)| r) else {
                continue;
            };
            let (dimension, rest) = rest.split_once('}').unwrap();
            let name = rest.split('"').nth(1).unwrap();
            read.insert((name.to_string(), dimension.to_string()));
            searched += 1;
        }
    }
    assert!(searched >= 8, "{searched} searches of the namespace");
    for (name, dimension) in &read {
        assert_eq!(
            written.get(name),
            Some(dimension),
            "{name} by {dimension} is read but not written: {written:?}"
        );
    }
    // Every metric the functions write is on the dashboard.
    let shown: BTreeSet<&String> = read.iter().map(|(n, _)| n).collect();
    assert_eq!(shown, written.keys().collect());
}

/// `Monitoring=false`: no alarm, topic, subscription or dashboard (they
/// cost money idle), nor the outputs naming them; by default all of them,
/// the auth function's alarms only with the auth function, the email
/// subscription only with an address.
#[test]
fn monitoring_false_creates_no_alarm_topic_or_dashboard() {
    use crate::support::cfn::{Stack, template_yaml};
    let t = template_yaml();
    const MONITORING: [&str; 4] = [
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::Dashboard",
        "AWS::SNS::Topic",
        "AWS::SNS::Subscription",
    ];
    let ids: Vec<(&String, &str)> = t["Resources"]
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(id, r)| {
            let ty = r["Type"].as_str()?;
            MONITORING.contains(&ty).then_some((id, ty))
        })
        .collect();
    assert!(ids.len() >= 42, "{ids:?}");
    let existing = |given: &[(&str, &str)]| -> Vec<&str> {
        let stack = Stack::new(&t, given);
        ids.iter()
            .filter(|(id, _)| stack.exists(id))
            .map(|(id, _)| id.as_str())
            .collect()
    };
    let email = ("AlarmEmail", "ops@example.com");
    let sign_in = ("CiIssuers", "https://token.actions.githubusercontent.com");
    assert_eq!(
        existing(&[email, sign_in]).len(),
        ids.len(),
        "every one by default, with an email and the auth function"
    );
    let without_auth = existing(&[]);
    assert!(!without_auth.contains(&"AlarmEmailSubscription"));
    assert!(!without_auth.iter().any(|id| id.starts_with("Auth")));
    assert!(without_auth.contains(&"Dashboard") && without_auth.contains(&"AlarmTopic"));
    assert_eq!(
        existing(&[email, sign_in, ("Monitoring", "false")]),
        Vec::<&str>::new(),
        "Monitoring=false"
    );
    for output in ["AlarmTopicArn", "DashboardUrl"] {
        assert_eq!(t["Outputs"][output]["Condition"], "Monitored", "{output}");
    }
}
