//! The registries the pull-through cache reads from (issue 22), managed
//! through the admin API in-process on both backends (who may, what is
//! refused with which 4xx, one audit event per change), and through `tfreg
//! upstream` against a running `tfreg serve` and on its data directory.

use http::{Method, StatusCode};
use serde_json::{Value, json};
use tfreg_model::token::Scope;
use tfreg_model::upstream::OperatorPolicy;
use tfreg_testkit::TestRegistry;

use crate::access::send;
use crate::backend_contract::contract;
use crate::sso_admin::{audit, audited, errors};
use crate::support::command::{fails, ok, said};
use crate::support::server::Server;

const PATH: &str = "/v1/admin/upstreams/registry.example.test";

async fn upstreams_are_admin_data(r: TestRegistry) {
    // The operator lets upstreams name these addresses (`connect`).
    let r = r.reconfigure(|mut reg| {
        reg.config.upstream_policy.connect_allow =
            OperatorPolicy::parse_nets("127.0.0.0/24").unwrap();
        reg
    });
    let admin = r.token(Scope::Admin, None).await;
    let ns_admin = r.token(Scope::Admin, Some("hashicorp")).await;
    let reader = r.token(Scope::Read, None).await;
    let body = json!({"serves": {"providers": true, "modules": false}});
    // Who may not: a namespace's admin (upstreams serve every namespace), a
    // read token, nobody at all.
    for (token, who) in [(&ns_admin, "namespace admin"), (&reader, "read token")] {
        send(&r, Method::PUT, PATH, token, body.clone())
            .await
            .expect(StatusCode::FORBIDDEN, who);
        send(&r, Method::GET, "/v1/admin/upstreams", token, Value::Null)
            .await
            .expect(StatusCode::FORBIDDEN, who);
    }
    r.request(
        Method::PUT,
        PATH,
        None,
        &[],
        bytes::Bytes::from(body.to_string()),
    )
    .await
    .expect(StatusCode::UNAUTHORIZED, "anonymous sets");

    // Added with every default, then changed; a typed-in capital is the same host.
    let added = send(&r, Method::PUT, PATH, &admin, body.clone()).await;
    added.expect(StatusCode::CREATED, "add");
    let record = &added.json()["upstream"];
    assert_eq!(record["hostname"], "registry.example.test");
    assert_eq!(
        record["settings"],
        json!({
            "serves": {"providers": true, "modules": false},
            "mode": "online",
            "metadata_ttl_secs": 3600,
            "negative_ttl_secs": 60,
            "fill_by": "marked_tokens",
            "on_key_change": "audit",
            "unsigned": "refuse",
            "module_hosts": ["github.com"],
            "fill_timeout_secs": 600
        })
    );
    assert!(added.json().get("replaced").is_none());
    let sealed = json!({
        "serves": {"providers": true, "modules": true},
        "mode": "sealed",
        "credentials": {"env": "TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST"},
        "connect": {"to": {"registry.example.test": ["127.0.0.78:443"]}}
    });
    let changed = send(
        &r,
        Method::PUT,
        "/v1/admin/upstreams/Registry.Example.Test",
        &admin,
        sealed,
    )
    .await;
    changed.expect(StatusCode::OK, "change");
    assert_eq!(changed.json()["replaced"], record["settings"]);
    assert_eq!(changed.json()["upstream"]["settings"]["mode"], "sealed");
    let shown = send(&r, Method::GET, PATH, &admin, Value::Null).await;
    shown.expect(StatusCode::OK, "show");
    assert_eq!(shown.json(), changed.json()["upstream"]);
    let list = send(&r, Method::GET, "/v1/admin/upstreams", &admin, Value::Null).await;
    list.expect(StatusCode::OK, "list");
    assert_eq!(list.json()["upstreams"], json!([shown.json()]));

    // Its providers come through the cache: an import of its host is refused.
    let begin = send(
        &r,
        Method::POST,
        "/v1/publish/mirror/registry.example.test/hashicorp/null/1.0.0/begin",
        &admin,
        json!({"files": [{
            "name": "terraform-provider-null_1.0.0_linux_amd64.zip",
            "size": 10,
            "sha256": "0".repeat(64)
        }]}),
    )
    .await;
    begin.expect(StatusCode::CONFLICT, "mirror import of an upstream's host");
    assert!(
        errors(&begin).contains("tfreg upstream remove"),
        "{}",
        errors(&begin)
    );

    // Refused, each with its reason: nothing changes.
    for (path, bad, status, says) in [
        (PATH, json!({}), 400, "missing field `serves`"),
        (
            PATH,
            json!({"serves": {"providers": false, "modules": false}}),
            400,
            "serves neither",
        ),
        (
            PATH,
            json!({"serves": {"providers": true, "modules": false}, "ttl": 5}),
            400,
            "unknown field `ttl`",
        ),
        (
            PATH,
            json!({"serves": {"providers": true, "modules": false}, "metadata_ttl_secs": 5}),
            400,
            "metadata_ttl_secs",
        ),
        (
            PATH,
            json!({"serves": {"providers": true, "modules": false}, "credentials": "s3cret"}),
            400,
            "unknown variant",
        ),
        (
            PATH,
            json!({"serves": {"providers": true, "modules": false}, "connect": {"to": {"169.254.169.254": ["169.254.169.254:80"]}}}),
            400,
            "IP address",
        ),
        (
            PATH,
            json!({"serves": {"providers": true, "modules": false}, "connect": {"to": {"metadata.example.com": ["10.0.0.1:443"]}}}),
            400,
            "neither this upstream",
        ),
        (
            "/v1/admin/upstreams/127.0.0.1",
            json!({"serves": {"providers": true, "modules": false}}),
            400,
            "IP address",
        ),
        (
            "/v1/admin/upstreams/localhost",
            json!({"serves": {"providers": true, "modules": false}}),
            400,
            "names this machine",
        ),
    ] {
        let resp = send(&r, Method::PUT, path, &admin, bad.clone()).await;
        resp.expect(StatusCode::from_u16(status).unwrap(), &bad.to_string());
        assert!(errors(&resp).contains(says), "{bad}: {}", errors(&resp));
    }
    let after = send(&r, Method::GET, PATH, &admin, Value::Null).await;
    assert_eq!(after.json(), shown.json(), "nothing changed");
    send(&r, Method::POST, PATH, &admin, Value::Null)
        .await
        .expect(StatusCode::METHOD_NOT_ALLOWED, "POST");

    // Removed; then unknown.
    let gone = send(&r, Method::DELETE, PATH, &admin, Value::Null).await;
    gone.expect(StatusCode::OK, "remove");
    assert_eq!(gone.json()["removed"], shown.json());
    for method in [Method::GET, Method::DELETE] {
        let none = send(&r, method.clone(), PATH, &admin, Value::Null).await;
        none.expect(StatusCode::NOT_FOUND, &format!("{method} after removal"));
        assert!(errors(&none).contains("is not a configured upstream"));
    }

    let events = audit(&r, &admin).await;
    let of = |action: &str, outcome: &str| audited(&events, action, outcome);
    let sets = of("upstream.set", "ok");
    assert_eq!(sets.len(), 2, "{events:#?}");
    assert_eq!(sets[0]["target"], "upstream registry.example.test");
    assert_eq!(
        sets[0]["detail"],
        "registry.example.test changed: providers and modules, sealed, lists fresh for 3600 s, with connect settings (was providers, online, lists fresh for 3600 s)"
    );
    assert_eq!(
        sets[1]["detail"],
        "registry.example.test added: providers, online, lists fresh for 3600 s"
    );
    let removes = of("upstream.remove", "ok");
    assert_eq!(removes.len(), 1, "{events:#?}");
    assert!(
        removes[0]["detail"]
            .as_str()
            .unwrap()
            .ends_with("what was cached from it stays"),
        "{events:#?}"
    );
    // Refusals after authorisation are audited too; the forbidden ones as such.
    assert_eq!(of("upstream.set", "refused").len(), 9, "{events:#?}");
    assert_eq!(of("upstream.remove", "refused").len(), 1, "{events:#?}");
}

/// Issue 35 (High): an admin token must not become the server's
/// principal. Credentials naming the server's own secrets (its AWS role's
/// keys, the sign-in's client secret, any file, an SSM parameter) and
/// `connect` addresses outside the operator's networks (an open port and a
/// closed one alike) are refused when saved: 400, one message whatever
/// was named, nothing stored. What the operator allows is saved.
async fn upstreams_name_only_what_the_operator_allows(r: TestRegistry) {
    let r = r.reconfigure(|mut reg| {
        reg.config.upstream_policy = OperatorPolicy {
            connect_allow: OperatorPolicy::parse_nets("127.0.0.64/26").unwrap(),
            credentials_dir: Some("/etc/tfreg/upstream-credentials".into()),
        };
        reg
    });
    let admin = r.token(Scope::Admin, None).await;
    let refused = json!({"errors": ["upstream registry.example.test: credentials and connect settings must be among those the operator allows (credentials: the variable TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST or the file registry.example.test in the server's credentials directory; connect: addresses in the networks the server allows)"]});
    let with = |extra: Value| {
        let mut body = json!({"serves": {"providers": true, "modules": false}});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let secret_file = std::env::temp_dir().join("tfreg-35-present");
    std::fs::write(&secret_file, "s3cret").unwrap();
    for attack in [
        json!({"credentials": {"env": "AWS_ACCESS_KEY_ID"}}),
        json!({"credentials": {"env": "AWS_SECRET_ACCESS_KEY"}}),
        json!({"credentials": {"env": "AWS_SESSION_TOKEN"}}),
        json!({"credentials": {"env": "TFREG_OIDC_CLIENT_SECRET"}}),
        json!({"credentials": {"env": "TFREG_UPSTREAM_CREDENTIAL_"}}),
        // Another upstream's credential (issue 35: not bound to its host).
        json!({"credentials": {"env": "TFREG_UPSTREAM_CREDENTIAL_APP_TERRAFORM_IO"}}),
        json!({"credentials": {"env": "TFREG_UPSTREAM_CREDENTIAL_TFC"}}),
        json!({"credentials": {"file": "app.terraform.io"}}),
        json!({"credentials": {"file": "tfc-token"}}),
        json!({"credentials": {"file": secret_file}}),
        json!({"credentials": {"file": "/no/such/file"}}),
        json!({"credentials": {"file": "../../../etc/shadow"}}),
        json!({"credentials": {"file": "/proc/self/environ"}}),
        json!({"credentials": {"ssm": "/tfreg/oidc-client-secret"}}),
        json!({"connect": {"to": {"registry.example.test": ["127.0.0.1:22"]}}}),
        json!({"connect": {"to": {"registry.example.test": ["127.0.0.1:1"]}}}),
        json!({"connect": {"to": {"registry.example.test": ["169.254.169.254:80"]}}}),
        json!({"connect": {"to": {"registry.example.test": ["127.0.0.100:443", "10.0.0.1:443"]}}}),
        json!({"connect": {"allow_nets": ["127.0.0.0/8"]}}),
        json!({"connect": {"allow_nets": ["0.0.0.0/0"]}}),
    ] {
        let resp = send(&r, Method::PUT, PATH, &admin, with(attack.clone())).await;
        resp.expect(StatusCode::BAD_REQUEST, &attack.to_string());
        assert_eq!(resp.json(), refused, "{attack}");
    }
    send(&r, Method::GET, PATH, &admin, Value::Null)
        .await
        .expect(StatusCode::NOT_FOUND, "nothing was stored");
    for allowed in [
        json!({"credentials": {"env": "TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST"}}),
        json!({"credentials": {"file": "registry.example.test"}}),
        json!({"connect": {"to": {"registry.example.test": ["127.0.0.100:443"]}, "allow_nets": ["127.0.0.96/28"]}}),
    ] {
        let resp = send(&r, Method::PUT, PATH, &admin, with(allowed.clone())).await;
        assert!(
            resp.status == StatusCode::CREATED || resp.status == StatusCode::OK,
            "{allowed}: {}",
            errors(&resp)
        );
    }
}

contract!(
    upstreams_are_admin_data,
    upstreams_name_only_what_the_operator_allows
);

/// `tfreg upstream` through a running registry's admin API and on its
/// data directory, as the operator: the same records.
#[test]
fn tfreg_upstream_sets_shows_lists_and_removes() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start(
        &tmp.path().join("data"),
        &["--private", "--upstream-connect-allow", "127.0.0.78/31"],
    );
    let admin = server.token("admin", None);
    let ca = tmp.path().join("ca.pem");
    std::fs::write(
        &ca,
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let out = server.tfreg(
        &admin,
        &[
            "upstream",
            "set",
            "registry.example.test",
            "--providers",
            "--modules",
            "--metadata-ttl",
            "10m",
            "--credentials-env",
            "TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST",
            "--module-host",
            "github.com",
            "--module-host",
            "git.example.test",
            "--connect-to",
            "registry.example.test=127.0.0.78:443",
            "--connect-to",
            "git.example.test=127.0.0.79:443",
            "--ca-file",
            ca.to_str().unwrap(),
            "--json",
        ],
    );
    assert!(out.status.success(), "upstream set: {}", said(&out));
    let set: Value = serde_json::from_slice(&out.stdout).unwrap();
    let settings = &set["upstream"]["settings"];
    assert_eq!(settings["metadata_ttl_secs"], 600);
    assert_eq!(
        settings["credentials"],
        json!({"env": "TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST"})
    );
    assert_eq!(
        settings["connect"]["to"],
        json!({"git.example.test": ["127.0.0.79:443"], "registry.example.test": ["127.0.0.78:443"]})
    );
    assert!(
        settings["connect"]["ca_pem"]
            .as_str()
            .unwrap()
            .contains("MIIB")
    );

    // On the data directory, as the operator: the same upstream.
    let listed = server.cli_on_store(&["upstream", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(listed["upstreams"][0], set["upstream"]);
    let shown = ok(
        server.tfreg(&admin, &["upstream", "show", "registry.example.test"]),
        "upstream show",
    );
    assert!(
        shown.contains("serves           providers,modules"),
        "{shown}"
    );
    assert!(
        shown.contains("credentials      env TFREG_UPSTREAM_CREDENTIAL_REGISTRY_EXAMPLE_TEST"),
        "{shown}"
    );
    assert!(!shown.contains("MIIB"), "{shown}");

    // Refused before anything is sent, saying why.
    let err = fails(
        server.tfreg(&admin, &["upstream", "set", "other.example.test"]),
        "a new upstream serving nothing",
    );
    assert!(
        err.contains("a new upstream (or --reset) needs --providers and/or --modules"),
        "{err}"
    );
    // An existing one given nothing keeps everything (issue 35: `set`
    // replaced every setting).
    let same = ok(
        server.tfreg(&admin, &["upstream", "set", "registry.example.test"]),
        "set nothing",
    );
    assert_eq!(same, "upstream registry.example.test: nothing changed\n");
    let err = fails(
        server.tfreg(
            &admin,
            &["upstream", "set", "169.254.169.254", "--providers"],
        ),
        "set an address",
    );
    assert!(err.contains("an IP address"), "{err}");
    let reader = server.token("read", None);
    let err = fails(
        server.tfreg(&reader, &["upstream", "list"]),
        "list with a read token",
    );
    assert!(err.contains("403"), "{err}");

    // A token whose requests may fill the cache: marked in lists.
    let out = ok(
        server.tfreg(
            &admin,
            &[
                "token", "create", "--name", "ci-fill", "--scope", "read", "--fill",
            ],
        ),
        "token create --fill",
    );
    assert!(out.contains("grants read:* +fill"), "{out}");
    let tokens = server.tfreg(&admin, &["token", "list", "--json"]);
    let tokens: Value = serde_json::from_slice(&tokens.stdout).unwrap();
    let fill: Vec<bool> = tokens["tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["fill"].as_bool().unwrap_or(false))
        .collect();
    assert_eq!(fill.iter().filter(|f| **f).count(), 1, "{tokens}");

    ok(
        server.tfreg(&admin, &["upstream", "remove", "registry.example.test"]),
        "upstream remove",
    );
    let err = fails(
        server.tfreg(&admin, &["upstream", "show", "registry.example.test"]),
        "show after remove",
    );
    assert!(err.contains("not a configured upstream"), "{err}");
}
