//! Sign-in data an admin manages (issue 21), in-process on both backends:
//! group mappings (`/v1/admin/sso`) and namespaces' CI trust policies
//! (`/v1/admin/trust`): who may manage them, what is refused (4xx with
//! `errors`), and one audit event per change.

use http::{Method, StatusCode};
use serde_json::{Value, json};
use tfreg_model::token::Scope;
use tfreg_testkit::TestRegistry;

use crate::access::send;
use crate::backend_contract::contract;

const GITHUB: &str = "https://token.actions.githubusercontent.com";

pub(crate) fn errors(resp: &tfreg_testkit::TestResponse) -> String {
    let body = resp.json();
    let errors = body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"));
    errors
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect::<Vec<_>>()
        .join("; ")
}

async fn group_mappings(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    let ns_admin = r.token(Scope::Admin, Some("acme")).await;
    let publisher = r.token(Scope::Publish, None).await;
    let map = json!({"group": "/acme/platform", "scope": "publish", "namespaces": ["Acme"]});
    let path = "/v1/admin/sso/map";
    // Who may not: a publish token, a namespace's admin, nobody at all.
    send(&r, Method::POST, path, &publisher, map.clone())
        .await
        .expect(StatusCode::FORBIDDEN, "publish token maps");
    send(&r, Method::POST, path, &ns_admin, map.clone())
        .await
        .expect(StatusCode::FORBIDDEN, "namespace admin maps");
    r.request(
        Method::POST,
        path,
        None,
        &[],
        bytes::Bytes::from(map.to_string()),
    )
    .await
    .expect(StatusCode::UNAUTHORIZED, "anonymous maps");
    r.request(Method::GET, "/v1/admin/sso", None, &[], bytes::Bytes::new())
        .await
        .expect(StatusCode::UNAUTHORIZED, "anonymous lists");

    let mapped = send(&r, Method::POST, path, &admin, map).await;
    mapped.expect(StatusCode::OK, "map");
    assert_eq!(
        mapped.json(),
        json!({"mapping": {"group": "/acme/platform", "scope": "publish", "namespaces": ["acme"]}})
    );
    let remap = json!({"group": "/acme/platform", "scope": "read", "namespaces": ["*"]});
    let again = send(&r, Method::POST, path, &admin, remap.clone()).await;
    again.expect(StatusCode::OK, "map again");
    assert_eq!(again.json()["replaced"]["scope"], "publish");
    let list = send(&r, Method::GET, "/v1/admin/sso", &admin, Value::Null).await;
    list.expect(StatusCode::OK, "list");
    assert_eq!(list.json(), json!({"mappings": [remap]}));

    for (bad, says) in [
        (
            json!({"group": "", "scope": "read", "namespaces": ["*"]}),
            "needs a group",
        ),
        (
            json!({"group": "g\u{1b}[31m", "scope": "read", "namespaces": ["*"]}),
            "invalid group",
        ),
        (
            json!({"group": "g", "scope": "owner", "namespaces": ["*"]}),
            "unknown variant",
        ),
        (
            json!({"group": "g", "scope": "read", "namespaces": []}),
            "needs namespaces",
        ),
        (
            json!({"group": "g", "scope": "read", "namespaces": ["*", "a"]}),
            "give it alone",
        ),
        (json!({"group": "g", "scope": "read"}), "missing field"),
    ] {
        let resp = send(&r, Method::POST, path, &admin, bad.clone()).await;
        resp.expect(StatusCode::BAD_REQUEST, &bad.to_string());
        assert!(errors(&resp).contains(says), "{bad}: {}", errors(&resp));
    }
    let unmap = "/v1/admin/sso/unmap";
    let none = send(&r, Method::POST, unmap, &admin, json!({"group": "/acme"})).await;
    none.expect(StatusCode::NOT_FOUND, "unmap an unmapped group");
    assert!(errors(&none).contains("has no mapping"));
    send(&r, Method::POST, unmap, &admin, json!({"group": ""}))
        .await
        .expect(StatusCode::BAD_REQUEST, "unmap no group");
    send(
        &r,
        Method::POST,
        unmap,
        &publisher,
        json!({"group": "/acme/platform"}),
    )
    .await
    .expect(StatusCode::FORBIDDEN, "publish token unmaps");
    let gone = send(
        &r,
        Method::POST,
        unmap,
        &admin,
        json!({"group": "/acme/platform"}),
    )
    .await;
    gone.expect(StatusCode::OK, "unmap");
    assert_eq!(gone.json()["removed"]["group"], "/acme/platform");
    let list = send(&r, Method::GET, "/v1/admin/sso", &admin, Value::Null).await;
    assert_eq!(list.json(), json!({"mappings": []}));

    let events = audit(&r, &admin).await;
    let of = |action: &str, outcome: &str| audited(&events, action, outcome);
    let maps = of("sso.map", "ok");
    assert_eq!(maps.len(), 2, "{events:#?}");
    assert_eq!(
        maps[0]["detail"],
        "group /acme/platform gives read on every namespace (was publish on namespaces acme)"
    );
    assert_eq!(maps[0]["target"], "group mappings");
    let unmaps = of("sso.unmap", "ok");
    assert_eq!(unmaps.len(), 1, "{events:#?}");
    assert_eq!(
        unmaps[0]["detail"],
        "group /acme/platform no longer gives read on every namespace"
    );
    assert_eq!(of("sso.map", "refused").len(), 2 + 6, "{events:#?}");
}

/// The events of `action` that ended `outcome`, newest first.
pub(crate) fn audited(events: &[Value], action: &str, outcome: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["action"] == action && e["outcome"] == outcome)
        .cloned()
        .collect()
}

pub(crate) async fn audit(r: &TestRegistry, admin: &str) -> Vec<Value> {
    let listed = send(
        r,
        Method::GET,
        "/v1/admin/audit?limit=500",
        admin,
        Value::Null,
    )
    .await;
    listed.expect(StatusCode::OK, "audit");
    listed.json()["events"].as_array().unwrap().clone()
}

async fn trust_policies(r: TestRegistry) {
    let admin = r.token(Scope::Admin, None).await;
    let acme_admin = r.token(Scope::Admin, Some("acme")).await;
    let publisher = r.token(Scope::Publish, Some("acme")).await;
    let policy =
        json!({"issuer": GITHUB, "claims": {"repository_id": "123", "ref": "refs/tags/v*"}});
    let acme = "/v1/admin/trust/acme";
    send(&r, Method::POST, acme, &publisher, policy.clone())
        .await
        .expect(StatusCode::FORBIDDEN, "publish token adds");
    r.request(
        Method::POST,
        acme,
        None,
        &[],
        bytes::Bytes::from(policy.to_string()),
    )
    .await
    .expect(StatusCode::UNAUTHORIZED, "anonymous adds");
    send(
        &r,
        Method::POST,
        "/v1/admin/trust/other",
        &acme_admin,
        policy.clone(),
    )
    .await
    .expect(
        StatusCode::FORBIDDEN,
        "acme's admin adds to another namespace",
    );
    send(&r, Method::GET, "/v1/admin/trust", &acme_admin, Value::Null)
        .await
        .expect(
            StatusCode::FORBIDDEN,
            "acme's admin lists every namespace's",
        );

    let added = send(&r, Method::POST, acme, &acme_admin, policy.clone()).await;
    added.expect(StatusCode::CREATED, "add");
    let record = added.json()["policy"].clone();
    assert_eq!(added.json()["added"], true);
    let id = record["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 12);
    assert_eq!(record["namespace"], "acme");
    assert_eq!(record["policy"]["kind"], "github");
    let same = send(&r, Method::POST, acme, &admin, policy.clone()).await;
    same.expect(StatusCode::OK, "add the same policy");
    assert_eq!(same.json(), json!({"policy": record, "added": false}));
    let other = json!({"issuer": GITHUB, "claims": {"repository_id": "456"}});
    send(&r, Method::POST, "/v1/admin/trust/beta", &admin, other)
        .await
        .expect(StatusCode::CREATED, "add to beta");
    let of_acme = send(&r, Method::GET, acme, &acme_admin, Value::Null).await;
    of_acme.expect(StatusCode::OK, "list acme");
    assert_eq!(of_acme.json(), json!({"policies": [record]}));
    let all = send(&r, Method::GET, "/v1/admin/trust", &admin, Value::Null).await;
    assert_eq!(all.json()["policies"].as_array().unwrap().len(), 2);

    for (bad, says) in [
        (
            json!({"issuer": GITHUB, "claims": {"repository": "acme/app"}}),
            "must pin",
        ),
        (
            json!({"issuer": GITHUB, "claims": {"repository_id": "12*"}}),
            "repository_id",
        ),
        (
            json!({"issuer": "http://ci.example.com", "kind": "other", "claims": {"sub": "x"}}),
            "issuer",
        ),
        (
            json!({"issuer": GITHUB, "claims": {"repository_id": "1", "iss": "x"}}),
            "iss",
        ),
        (json!({"issuer": GITHUB}), "needs required claims"),
        (json!([]), "invalid"),
    ] {
        let resp = send(&r, Method::POST, acme, &admin, bad.clone()).await;
        resp.expect(StatusCode::BAD_REQUEST, &bad.to_string());
        assert!(errors(&resp).contains(says), "{bad}: {}", errors(&resp));
    }
    send(
        &r,
        Method::DELETE,
        &format!("{acme}/{id}"),
        &publisher,
        Value::Null,
    )
    .await
    .expect(StatusCode::FORBIDDEN, "publish token removes");
    send(
        &r,
        Method::DELETE,
        &format!("/v1/admin/trust/beta/{id}"),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::NOT_FOUND, "remove from the wrong namespace");
    let removed = send(
        &r,
        Method::DELETE,
        &format!("{acme}/{id}"),
        &acme_admin,
        Value::Null,
    )
    .await;
    removed.expect(StatusCode::OK, "remove");
    assert_eq!(removed.json()["removed"]["id"], id.as_str());
    send(
        &r,
        Method::DELETE,
        &format!("{acme}/{id}"),
        &admin,
        Value::Null,
    )
    .await
    .expect(StatusCode::NOT_FOUND, "remove again");
    let of_acme = send(&r, Method::GET, acme, &admin, Value::Null).await;
    assert_eq!(of_acme.json(), json!({"policies": []}));

    let events = audit(&r, &admin).await;
    let ok = |action: &str| {
        events
            .iter()
            .filter(|e| e["action"] == action && e["outcome"] == "ok")
            .cloned()
            .collect::<Vec<_>>()
    };
    let adds = ok("trust.add");
    assert_eq!(adds.len(), 3, "{events:#?}");
    let first = adds.last().unwrap();
    assert_eq!(first["target"], "trust policies of acme");
    assert_eq!(
        first["detail"],
        format!("acme trusts policy {id}: {GITHUB} with ref=refs/tags/v* repository_id=123")
    );
    assert_eq!(
        adds[1]["detail"],
        format!("already trusted: {id}: nothing changed")
    );
    let removes = ok("trust.remove");
    assert_eq!(removes.len(), 1, "{events:#?}");
    assert_eq!(removes[0]["target"], format!("trust policy {id} of acme"));
}

contract!(group_mappings, trust_policies);
