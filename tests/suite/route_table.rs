//! One route table, three views: API Gateway's routes and integrations in
//! the template, the `cargo lambda watch` router (Cargo.toml) and `tfreg
//! serve`'s router (the model's [`route`], whose [`Route::endpoint`] the
//! pipeline logs and dispatches by) name the same function, and the same
//! package and binary, for an example path of every kind of route
//! ([`RouteKind::all`], derived from the router's enums: a new variant is
//! checked here the moment it exists). Pure: the template and Cargo.toml are
//! read, nothing runs.
//!
//! The template is read as CloudFormation is given it: transformed by
//! aws-sam-translator as `sam deploy` would (infra/rehearsal's translator,
//! the one the deploy rehearsal creates the stack from), with the resources
//! of the configuration's conditions only: with every optional feature on,
//! and as a first `sam deploy --guided` has it (no sign-in: its paths fall
//! to the catch-all). The one process these tests start is that transform
//! (about a second); the matcher and views are pure and also run on the
//! untransformed template. Intrinsics are read in either form, YAML's short
//! tags (`!GetAtt X.Arn`) or JSON's long (`Fn::GetAtt`).

use http::Method;
use serde_norway::Value;
use tfreg_model::router::{Route, RouteKind, route};

use super::{of_type, package_of, resources, template, watch_routes};

/// An intrinsic's argument in either form: `!Tag x` or `{"Fn::Tag": x}`.
fn intrinsic<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    match v {
        Value::Tagged(t) if t.tag == format!("!{name}").as_str() => Some(&t.value),
        Value::Mapping(m) if m.len() == 1 => m.get(format!("Fn::{name}").as_str()),
        _ => None,
    }
}

/// `!GetAtt X.Arn` (or `Fn::GetAtt: [X, Arn]`): `X`.
fn get_att_arn(v: &Value) -> Option<String> {
    match intrinsic(v, "GetAtt")? {
        Value::String(s) => s.strip_suffix(".Arn").map(str::to_string),
        Value::Sequence(s) if s.len() == 2 && s[1].as_str() == Some("Arn") => {
            s[0].as_str().map(str::to_string)
        }
        _ => None,
    }
}

/// `!Ref X` / `{"Ref": X}`.
fn reference(v: &Value) -> Option<&str> {
    match v {
        Value::Tagged(t) if t.tag == "!Ref" => t.value.as_str(),
        Value::Mapping(m) if m.len() == 1 => m.get("Ref")?.as_str(),
        _ => None,
    }
}

/// One segment of a route pattern.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Segment {
    /// `{key+}` (API Gateway) or `{*key}` (cargo lambda watch): the rest
    /// of the path, at least one character.
    Greedy,
    /// `{name}`: one non-empty segment.
    Param,
    Literal(String),
}

impl Segment {
    /// Most specific first, as both routers choose (literal over parameter
    /// over greedy).
    fn rank(&self) -> u8 {
        match self {
            Segment::Literal(_) => 2,
            Segment::Param => 1,
            Segment::Greedy => 0,
        }
    }
}

fn pattern(p: &str) -> Vec<Segment> {
    p.trim_start_matches('/')
        .split('/')
        .map(|s| {
            if s.starts_with('{') && (s.ends_with("+}") || s.starts_with("{*")) {
                Segment::Greedy
            } else if s.starts_with('{') && s.ends_with('}') {
                Segment::Param
            } else {
                Segment::Literal(s.to_string())
            }
        })
        .collect()
}

fn matches(pattern: &[Segment], path: &str) -> bool {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    for (i, p) in pattern.iter().enumerate() {
        match p {
            Segment::Greedy => return segs.len() > i && !segs[i..].join("/").is_empty(),
            Segment::Param if segs.get(i).is_some_and(|s| !s.is_empty()) => {}
            Segment::Literal(l) if segs.get(i) == Some(&l.as_str()) => {}
            _ => return false,
        }
    }
    segs.len() == pattern.len()
}

/// The most specific of `table`'s patterns that `path` matches, else the
/// catch-all (`None` when there is none).
fn pick<'a, T>(
    table: &'a [(Vec<Segment>, T)],
    catch_all: Option<&'a T>,
    path: &str,
) -> Option<&'a T> {
    table
        .iter()
        .filter(|(p, _)| matches(p, path))
        .max_by_key(|(p, _)| p.iter().map(Segment::rank).collect::<Vec<_>>())
        .map(|(_, t)| t)
        .or(catch_all)
}

/// What the API's routes name for a path: the function's logical id.
struct ApiTable {
    routes: Vec<(Vec<Segment>, String)>,
    default: Option<String>,
}

/// The HTTP API's route table: each route's key (method `ANY`) and the
/// function its integration invokes.
fn api_table(t: &Value) -> ApiTable {
    let integrations = of_type(t, "AWS::ApiGatewayV2::Integration");
    let mut table = ApiTable {
        routes: vec![],
        default: None,
    };
    for (id, r) in of_type(t, "AWS::ApiGatewayV2::Route") {
        let p = &r["Properties"];
        let target = intrinsic(&p["Target"], "Sub")
            .and_then(Value::as_str)
            .or_else(|| p["Target"].as_str())
            .unwrap_or_else(|| panic!("{id}: Target"));
        let integration = target
            .strip_prefix("integrations/${")
            .and_then(|s| s.strip_suffix('}'))
            .unwrap_or_else(|| panic!("{id}: Target {target}"));
        let uri = &integrations[integration]["Properties"]["IntegrationUri"];
        let function = get_att_arn(uri).unwrap_or_else(|| panic!("{id}: IntegrationUri {uri:?}"));
        match p["RouteKey"].as_str().expect("RouteKey") {
            "$default" => table.default = Some(function),
            key => {
                let path = key.strip_prefix("ANY ").unwrap_or_else(|| {
                    panic!("{key}: every route takes any method (the router answers 405)")
                });
                table.routes.push((pattern(path), function));
            }
        }
    }
    table
}

/// A function resource's name for itself: the last segment of its log
/// group's name (`/tfreg/${AWS::StackName}/provider-versions`), which is its
/// logical id's stem in kebab case (`ProviderVersionsFunction`).
fn function_name(t: &Value, id: &str) -> String {
    let f = &resources(t)[id];
    let group = reference(&f["Properties"]["LoggingConfig"]["LogGroup"])
        .unwrap_or_else(|| panic!("{id}: LoggingConfig.LogGroup"));
    let name = &resources(t)[group]["Properties"]["LogGroupName"];
    let name = intrinsic(name, "Sub")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{group}: LogGroupName {name:?}"));
    let name = name.rsplit('/').next().unwrap().to_string();
    let stem: String = name
        .split('-')
        .map(|w| w[..1].to_uppercase() + &w[1..])
        .collect();
    assert_eq!(id, format!("{stem}Function"), "{id} logs as {name}");
    name
}

/// The binary a function resource runs (SAM's build metadata).
fn function_binary(t: &Value, id: &str) -> String {
    resources(t)[id]["Metadata"]["BuildProperties"]["Binary"]
        .as_str()
        .unwrap_or_else(|| panic!("{id}: Metadata.BuildProperties.Binary"))
        .to_string()
}

/// Every kind of route's example, as a request: its first method, its path.
fn examples() -> Vec<(RouteKind, Method, String)> {
    RouteKind::all()
        .into_iter()
        .map(|kind| {
            let example = kind.example();
            (kind, example.methods()[0].clone(), example.path())
        })
        .collect()
}

/// What each view says serves a request: function name and package.
#[derive(Debug, PartialEq, Eq)]
struct Served {
    function: String,
    package: String,
}

/// `tfreg serve`'s view: the model's router, the endpoint the pipeline logs
/// and names in its "does not serve" answer, the handler group it
/// dispatches to.
fn serve_view(method: &Method, path: &str) -> (Route, Served) {
    let r = route(method, path).unwrap_or_else(|e| panic!("{method} {path}: {e}"));
    let served = Served {
        function: r.endpoint().name().to_string(),
        package: package_of(&r).to_string(),
    };
    (r, served)
}

/// The parameters of the configuration with every optional feature on
/// (sign-in, the CI exchange, a custom domain), as the rehearsal's `full`.
const FULL: &[(&str, &str)] = &[
    ("OidcIssuer", "https://login.example.com/realms/acme"),
    ("OidcClientId", "tfreg"),
    (
        "OidcClientSecretArn",
        "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tfreg/oidc-client-secret-AbCdEf",
    ),
    ("CiIssuers", "https://token.actions.githubusercontent.com"),
    ("CiAudience", "https://registry.example.com"),
    ("DomainName", "registry.example.com"),
    (
        "CertificateArn",
        "arn:aws:acm:us-east-1:123456789012:certificate/00000000-0000-0000-0000-000000000000",
    ),
    ("HostedZoneId", "Z0000000000000000000"),
];

/// template.yaml transformed under `parameters` by infra/rehearsal (as the
/// rehearsal does before CreateStack), keeping the resources its
/// conditions create.
fn transformed(parameters: &[(&str, &str)]) -> Value {
    const SCRIPT: &str = r#"
import json, sys
from rehearsal import template as t
from rehearsal.intrinsics import Resolver
from rehearsal.checks import parameter_values
from rehearsal.rehearse import PSEUDO_STATIC
raw = t.load(sys.argv[1])
given = json.loads(sys.argv[2])
keys = {lid: binary + ".zip" for lid, (_, binary) in t.packages(raw).items()}
out = t.translate(t.package(raw, "deploy-bucket", keys), given, "eu-west-1")
pseudo = dict(PSEUDO_STATIC, **{"AWS::Region": "eu-west-1", "AWS::AccountId": "123456789012",
    "AWS::StackName": "tfreg", "AWS::StackId": "arn:aws:cloudformation:eu-west-1:123456789012:stack/tfreg/x"})
resolver = Resolver(out, parameter_values(out, given), pseudo)
out["Resources"] = {k: r for k, r in out["Resources"].items() if resolver.active(r)}
json.dump(out, sys.stdout)
"#;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = crate::support::tools::Tools::get()
        .path("TFREG_VENV_BIN")
        .join("python");
    let given: serde_json::Map<String, serde_json::Value> = parameters
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
        .collect();
    let out = std::process::Command::new(python)
        .env("PYTHONPATH", root.join("infra"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["-c", SCRIPT])
        .arg(root.join("template.yaml"))
        .arg(serde_json::Value::Object(given).to_string())
        .output()
        .expect("the venv's python");
    assert!(
        out.status.success(),
        "the SAM transform: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the transformed template as JSON")
}

#[test]
fn every_kind_of_route_is_served_by_one_function_in_the_api_cargo_lambda_watch_and_tfreg_serve() {
    let full = transformed(FULL);
    three_views(&full, |_| true);
    // The raw template names the same (its routes are the transform's).
    three_views(&template(), |_| true);
    // A first guided deploy has no sign-in: its paths reach the catch-all,
    // the discovery function, which does not serve them (a JSON 404);
    // every other path is routed as with every feature on.
    let guided = transformed(&[]);
    assert!(!resources(&guided).contains_key("AuthFunction"));
    three_views(&guided, |kind| !matches!(kind, RouteKind::Auth(_)));
    let api = api_table(&guided);
    for kind in RouteKind::all() {
        if let RouteKind::Auth(_) = kind {
            let path = kind.example().path();
            let id = pick(&api.routes, api.default.as_ref(), &path).unwrap();
            assert_eq!(id, "DiscoveryFunction", "{path}");
        }
    }
}

/// The three views agree on every kind of route that `routed` says the
/// template `t` routes.
fn three_views(t: &Value, routed: impl Fn(RouteKind) -> bool) {
    let api = api_table(t);
    let watch = watch_routes();
    let watch_catch_all = watch.get(super::CATCH_ALL);
    let watch_table: Vec<(Vec<Segment>, String)> = watch
        .iter()
        .filter(|(p, _)| p.as_str() != super::CATCH_ALL)
        .map(|(p, f)| (pattern(p), f.clone()))
        .collect();
    let mut failures = vec![];
    let examples = examples();
    for (kind, method, path) in &examples {
        let (r, serve) = serve_view(method, path);
        assert_eq!(r.kind(), *kind);
        let id = pick(&api.routes, api.default.as_ref(), path)
            .unwrap_or_else(|| panic!("{path}: no API route and no $default"));
        let api_view = Served {
            function: function_name(t, id),
            package: function_binary(t, id),
        };
        if !routed(*kind) {
            continue;
        }
        let watch_package = pick(&watch_table, watch_catch_all, path).cloned();
        if api_view != serve {
            failures.push(format!(
                "{} {method} {path}: the API invokes {api_view:?} ({id}), tfreg serve {serve:?}",
                kind.name()
            ));
        }
        if watch_package.as_deref() != Some(serve.package.as_str()) {
            failures.push(format!(
                "{} {method} {path}: cargo lambda watch runs {watch_package:?}, tfreg serve's group is {}",
                kind.name(),
                serve.package
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Every function a route reaches is reached by some example: no route
    // of the template leads where no kind of route goes.
    let reached: std::collections::BTreeSet<String> = examples
        .iter()
        .filter(|(kind, _, _)| routed(*kind))
        .filter_map(|(_, _, path)| pick(&api.routes, api.default.as_ref(), path).cloned())
        .collect();
    let routed: std::collections::BTreeSet<String> = api
        .routes
        .iter()
        .map(|(_, f)| f.clone())
        .chain(api.default.clone())
        .collect();
    assert_eq!(reached, routed, "functions no kind of route reaches");
}

/// The matcher itself: most specific pattern first, greedy needs a rest.
#[test]
fn the_route_matcher_prefers_literals_and_greedy_needs_a_rest() {
    let table = vec![
        (pattern("/v1/mirror/{h}/{n}/{t}/index.json"), "index"),
        (pattern("/v1/mirror/{h}/{n}/{t}/{version}"), "version"),
        (pattern("/ui/{page+}"), "ui"),
        (pattern("/v1/blobs/{*key}"), "blob"),
    ];
    let at = |p| pick(&table, Some(&"default"), p).copied();
    assert_eq!(at("/v1/mirror/h/n/t/index.json"), Some("index"));
    assert_eq!(at("/v1/mirror/h/n/t/1.0.0.json"), Some("version"));
    assert_eq!(at("/v1/mirror/h/n/t"), Some("default"));
    assert_eq!(at("/ui/modules/a/b/c"), Some("ui"));
    assert_eq!(at("/ui/"), Some("default"));
    assert_eq!(at("/ui"), Some("default"));
    assert_eq!(at("/v1/blobs/archives/ab/x.zip"), Some("blob"));
    assert_eq!(pick(&table, None, "/"), None);
}
