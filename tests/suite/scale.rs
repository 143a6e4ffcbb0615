//! Read cost at scale, on both backends: a provider of 5,000 versions × 12
//! platforms and a module of 5,000 versions (written in bulk through the
//! catalog), one more version published through the real handler, then
//! deprecated, yanked and deleted through the admin routes. Every read
//! endpoint costs exactly one storage request, counted; the lists show
//! what the lifecycle says; the versions index stays far under DynamoDB's
//! 400 KB item limit.

use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::{Value, json};
use tfreg_model::address::{Hostname, ModuleName, ProviderName};
use tfreg_model::router::PublishTarget;
use tfreg_model::token::Scope;
use tfreg_store::catalog::Origin;
use tfreg_store::catalog::schema::INDEX_SK;
use tfreg_testkit::counting::{CountingStore, Counts, item_size};
use tfreg_testkit::{
    TestRegistry, TestSigner, module_archive, provider_release, provider_request, scale,
};

const VERSIONS: usize = 5000;
const PLATFORMS: usize = 12;
const NS: &str = "big";
const MIRRORED: &str = "origin.example.com";

fn target(path: &str) -> PublishTarget {
    PublishTarget::try_from(path.to_string()).unwrap()
}

async fn admin(r: &TestRegistry, token: &str, method: Method, path: &str, body: Value) {
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    r.request(method, path, Some(token), &[], body)
        .await
        .expect(StatusCode::OK, path);
}

/// The requests one GET costs, and its answer.
async fn cost(r: &TestRegistry, counting: &CountingStore, path: &str) -> (Counts, Value) {
    let before = counting.counts();
    let resp = r.get(path).await;
    let counts = counting.counts() - before;
    let body = if resp.body.is_empty() {
        Value::Null
    } else {
        resp.json()
    };
    assert!(
        resp.status.is_success(),
        "{} {path}: {}",
        r.name,
        resp.text()
    );
    (counts, body)
}

fn versions_of(list: &[Value]) -> Vec<String> {
    list.iter()
        .map(|v| v["version"].as_str().unwrap().to_string())
        .collect()
}

async fn every_read_is_one_request_at_5000_versions(r: TestRegistry) {
    let items = r.registry.items.clone();
    let provider = ProviderName::parse(NS, "null").unwrap();
    let module = ModuleName::parse(NS, "m", "aws").unwrap();
    let mirrored = ProviderName::parse(NS, "mirrored").unwrap();
    let origin = Origin::Mirror(Hostname::parse(MIRRORED).unwrap());
    let signer = TestSigner::rsa();
    let versions = scale::versions(VERSIONS);
    let platforms = scale::platforms(PLATFORMS);
    let started = std::time::Instant::now();
    let (p, m, x) = tokio::join!(
        scale::seed_provider(
            items.as_ref(),
            &Origin::Registry,
            &provider,
            &versions,
            &platforms,
            signer.public_armor,
        ),
        scale::seed_module(items.as_ref(), &module, &versions),
        scale::seed_provider(
            items.as_ref(),
            &origin,
            &mirrored,
            &versions[..100],
            &platforms,
            signer.public_armor,
        ),
    );
    p.unwrap();
    m.unwrap();
    x.unwrap();
    eprintln!("FIGURE scale {}: seeded in {:?}", r.name, started.elapsed());

    // One more of each through the real publish handler, then the lifecycle
    // through the admin routes.
    let token = r.token(Scope::Admin, None).await;
    let files = provider_release("null", "2.0.0", &["linux_amd64"], &signer);
    r.publish(
        &target(&format!("providers/{NS}/null/2.0.0")),
        &token,
        &files,
        provider_request(&signer),
    )
    .await
    .expect(StatusCode::CREATED, "publish provider 2.0.0");
    let archive = module_archive(&[("main.tf", "# 2.0.0\n")]);
    r.publish(
        &target(&format!("modules/{NS}/m/aws/2.0.0")),
        &token,
        &[("m.tar.gz".to_string(), archive)],
        Default::default(),
    )
    .await
    .expect(StatusCode::CREATED, "publish module 2.0.0");
    let deprecate = json!({"message": "use 2.x"});
    for kind in [
        format!("providers/{NS}/null"),
        format!("modules/{NS}/m/aws"),
    ] {
        let base = format!("/v1/admin/{kind}");
        admin(
            &r,
            &token,
            Method::POST,
            &format!("{base}/1.0.0/deprecate"),
            deprecate.clone(),
        )
        .await;
        admin(
            &r,
            &token,
            Method::POST,
            &format!("{base}/1.0.1/yank"),
            json!({}),
        )
        .await;
        // A delete takes the release (and a module's docs) and updates the index: no read of the
        // partition's 5,000 releases (the archive keys are the release's own). Its one query is
        // the delete guard's, of this version's consumers in the usage partition (bounded by who
        // downloaded 1.0.2, here nobody).
        let (counting, view) = r.counted();
        let started = std::time::Instant::now();
        admin(
            &view,
            &token,
            Method::DELETE,
            &format!("{base}/1.0.2"),
            Value::Null,
        )
        .await;
        let counts = counting.counts();
        eprintln!(
            "FIGURE scale {}: delete of {kind} 1.0.2 at {VERSIONS} versions: {counts:?} in {:?}",
            r.name,
            started.elapsed()
        );
        // It takes the release, and a module's docs item too.
        let takes = if kind.starts_with("modules/") { 2 } else { 1 };
        assert_eq!(
            (counts.queries, counts.takes),
            (1, takes),
            "{}: a delete queries only the version's consumers: {counts:?}",
            r.name
        );
    }

    let (counting, view) = r.counted();
    let one_get = Counts {
        gets: 1,
        ..Counts::default()
    };
    let provider_versions = format!("/v1/providers/{NS}/null/versions");
    let module_versions = format!("/v1/modules/{NS}/m/aws/versions");
    let own_mirror = format!(
        "/v1/mirror/{}/{NS}/null/index.json",
        r.registry.config.hostname
    );
    let other_mirror = format!("/v1/mirror/{MIRRORED}/{NS}/mirrored/index.json");
    let reads = [
        provider_versions.clone(),
        module_versions.clone(),
        own_mirror.clone(),
        other_mirror.clone(),
        format!("/v1/providers/{NS}/null/1.0.0/download/linux/amd64"),
        format!("/v1/providers/{NS}/null/2.0.0/download/linux/amd64"),
        format!("/v1/modules/{NS}/m/aws/1.0.1/download"),
        format!(
            "/v1/mirror/{}/{NS}/null/1.0.3.json",
            r.registry.config.hostname
        ),
    ];
    let mut answers = Vec::new();
    for path in &reads {
        let (counts, body) = cost(&view, &counting, path).await;
        assert_eq!(counts, one_get, "{} {path}: one GetItem", r.name);
        answers.push(body);
    }
    eprintln!(
        "FIGURE scale {}: {} read endpoints at {VERSIONS} versions x {PLATFORMS} platforms, one GetItem each",
        r.name,
        reads.len()
    );

    // What the lists show.
    let listed = versions_of(answers[0]["versions"].as_array().unwrap());
    assert_eq!(
        listed.len(),
        VERSIONS + 1 - 2,
        "{}: less yanked and deleted",
        r.name
    );
    assert_eq!(listed.first().map(String::as_str), Some("1.0.0"));
    assert_eq!(listed.last().map(String::as_str), Some("2.0.0"));
    assert!(!listed.iter().any(|v| v == "1.0.1" || v == "1.0.2"));
    assert_eq!(
        answers[0]["versions"][0]["platforms"]
            .as_array()
            .unwrap()
            .len(),
        PLATFORMS
    );
    assert_eq!(
        answers[0]["warnings"],
        json!(["version 1.0.0 is deprecated: use 2.x"])
    );
    let modules = answers[1]["modules"][0]["versions"].as_array().unwrap();
    assert_eq!(versions_of(modules), listed, "{}", r.name);
    assert_eq!(modules[0]["deprecation"]["reason"], "use 2.x");
    let mirror: Vec<&String> = answers[2]["versions"].as_object().unwrap().keys().collect();
    assert_eq!(mirror.len(), listed.len());
    assert_eq!(answers[3]["versions"].as_object().unwrap().len(), 100);

    // Undone: unyanked and undeprecated versions are back as they were.
    let base = format!("/v1/admin/providers/{NS}/null");
    admin(
        &r,
        &token,
        Method::POST,
        &format!("{base}/1.0.1/unyank"),
        json!({}),
    )
    .await;
    admin(
        &r,
        &token,
        Method::POST,
        &format!("{base}/1.0.0/undeprecate"),
        json!({}),
    )
    .await;
    let (counts, body) = cost(&view, &counting, &provider_versions).await;
    assert_eq!(counts, one_get);
    assert!(body.get("warnings").is_none(), "{}", body["warnings"]);
    assert_eq!(body["versions"].as_array().unwrap().len(), VERSIONS);

    // The index item, at 5,000 × 12.
    for pk in [format!("PROVIDER#{provider}"), format!("MODULE#{module}")] {
        let index = items.get(&pk, INDEX_SK).await.unwrap().expect("an index");
        let size = item_size(&index);
        eprintln!("FIGURE scale {}: index of {pk}: {size} bytes", r.name);
        assert!(size < 400 * 1024, "{pk}: {size} bytes");
    }
}

/// A store from before the index: lists query the releases (every page),
/// and the next write builds the index, after which a list is one GetItem.
async fn a_store_without_index_is_read_by_query_then_indexed_by_its_next_write(r: TestRegistry) {
    let items = r.registry.items.clone();
    let module = ModuleName::parse(NS, "old", "aws").unwrap();
    scale::seed_module(items.as_ref(), &module, &scale::versions(250))
        .await
        .unwrap();
    items
        .take(&format!("MODULE#{module}"), INDEX_SK)
        .await
        .unwrap()
        .expect("the seed wrote an index");
    let (counting, view) = r.counted();
    let path = format!("/v1/modules/{NS}/old/aws/versions");
    let (before, body) = cost(&view, &counting, &path).await;
    assert_eq!(before.gets, 1, "{}: looked for the index", r.name);
    assert!(before.queries >= 1, "{}: {before:?}", r.name);
    let listed = body["modules"][0]["versions"].as_array().unwrap().len();
    assert_eq!(listed, 250);
    let token = r.token(Scope::Admin, None).await;
    admin(
        &r,
        &token,
        Method::POST,
        &format!("/v1/admin/modules/{NS}/old/aws/1.0.0/yank"),
        json!({}),
    )
    .await;
    let (after, body) = cost(&view, &counting, &path).await;
    assert_eq!(
        after,
        Counts {
            gets: 1,
            ..Counts::default()
        },
        "{}",
        r.name
    );
    assert_eq!(
        body["modules"][0]["versions"].as_array().unwrap().len(),
        249
    );
}

crate::backend_contract::contract!(
    every_read_is_one_request_at_5000_versions,
    a_store_without_index_is_read_by_query_then_indexed_by_its_next_write,
);
