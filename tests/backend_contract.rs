//! One contract, two backends: every test here runs against the embedded store
//! (SQLite + a directory) and against DynamoDB + S3 (the dynalite and s3s-fs
//! emulators that `scripts/test` starts; their endpoints come in the standard
//! `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL_S3` variables).

mod common;

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use tfreg::address::ModuleName;
use tfreg::catalog;
use tfreg::registry::{Config, Registry, unix_now};
use tfreg::service::{self, Body, Request};
use tfreg::storage::{BlobStore, Condition, Item, ItemStore, StoreError, query_all};

const PUBLIC_URL: &str = "https://registry.test";

struct Backend {
    name: &'static str,
    items: Arc<dyn ItemStore>,
    blobs: Arc<dyn BlobStore>,
    _dir: tempfile::TempDir,
}

impl Backend {
    async fn embedded() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let items =
            Arc::new(tfreg::storage::sqlite::SqliteStore::open(&dir.path().join("db")).unwrap());
        let blobs =
            Arc::new(tfreg::storage::fs::FsBlobStore::open(&dir.path().join("blobs")).unwrap());
        Backend {
            name: "embedded",
            items,
            blobs,
            _dir: dir,
        }
    }

    async fn aws() -> Backend {
        common::require_emulators();
        let id = format!("{:016x}", rand::random::<u64>());
        let settings = tfreg::aws::config::Settings::from_lookup(|k| match k {
            "TFREG_TABLE" => Some(format!("tfreg-test-{id}")),
            "TFREG_BUCKET" => Some(format!("tfreg-test-{id}")),
            "TFREG_HOSTNAME" => Some("registry.test".into()),
            "TFREG_URL_TTL" => Some("60".into()),
            "TFREG_S3_FORCE_PATH_STYLE" => Some("true".into()),
            _ => None,
        })
        .unwrap();
        let (dynamodb, s3) = tfreg::aws::lambda::clients(settings.s3_force_path_style)
            .await
            .unwrap();
        let items = tfreg::aws::dynamodb::DynamoStore::new(dynamodb, &settings.table);
        items.create_table().await.unwrap();
        let blobs = tfreg::aws::s3::S3BlobStore::new(s3, &settings.bucket, settings.url_ttl);
        blobs.create_bucket().await.unwrap();
        Backend {
            name: "aws",
            items: Arc::new(items),
            blobs: Arc::new(blobs),
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    async fn registry(&self) -> Registry {
        let mut config = Config::new(tfreg::address::Hostname::parse("registry.test").unwrap());
        config.public_url = PUBLIC_URL.into();
        let signer = tfreg::signed_url::load_signer(self.items.as_ref())
            .await
            .unwrap();
        Registry::new(self.items.clone(), self.blobs.clone(), signer, config)
    }

    /// A registry as the read-only Lambda functions build it: the URL secret is
    /// read when first needed, never created.
    fn reader(&self) -> Registry {
        let mut config = Config::new(tfreg::address::Hostname::parse("registry.test").unwrap());
        config.public_url = PUBLIC_URL.into();
        Registry::with_stored_signer(self.items.clone(), self.blobs.clone(), config)
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Send a request to a URL: the registry's own URLs go through `service::handle`
/// (as every entry point does); others (presigned S3 URLs) over HTTP.
async fn send(
    registry: &Registry,
    method: Method,
    url: &str,
    token: Option<&str>,
    body: Bytes,
) -> (StatusCode, http::HeaderMap, Bytes) {
    if let Some(rest) = url.strip_prefix(PUBLIC_URL) {
        let (path, query) = match rest.split_once('?') {
            Some((p, q)) => (p.to_string(), Some(q.to_string())),
            None => (rest.to_string(), None),
        };
        let req = Request {
            method,
            path,
            query,
            authorization: token.map(|t| format!("Bearer {t}")),
            body: Body::Bytes(body),
        };
        let (parts, body) = service::handle(registry, req).await.into_parts();
        let bytes = body.collect(usize::MAX).await.unwrap();
        return (parts.status, parts.headers, bytes);
    }
    let resp = http().request(method, url).body(body).send().await.unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    (status, headers, resp.bytes().await.unwrap())
}

/// GET following redirects, as Terraform does.
async fn download(registry: &Registry, url: &str) -> (StatusCode, Bytes) {
    let (status, headers, body) = send(registry, Method::GET, url, None, Bytes::new()).await;
    if status == StatusCode::TEMPORARY_REDIRECT {
        let location = headers["location"].to_str().unwrap().to_string();
        let (status, _, body) = send(registry, Method::GET, &location, None, Bytes::new()).await;
        return (status, body);
    }
    (status, body)
}

fn module_archive(marker: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.tf"),
        format!("output \"marker\" {{ value = \"{marker}\" }}\n"),
    )
    .unwrap();
    tfreg::module_archive::pack_dir(dir.path(), Vec::new()).unwrap()
}

/// Publish a module through begin → PUT → complete; returns the complete status,
/// or begin's 409 when the version was already published with other content.
async fn publish_module(
    registry: &Registry,
    token: &str,
    module: &str,
    version: &str,
    archive: &[u8],
) -> (StatusCode, Bytes) {
    let base = format!("{PUBLIC_URL}/v1/publish/modules/{module}/{version}");
    let mut req = serde_json::json!({"files": [{"name": "m.tar.gz", "size": archive.len(), "sha256": tfreg::hashing::sha256_hex(archive)}]});
    let (status, _, body) = send(
        registry,
        Method::POST,
        &format!("{base}/begin"),
        Some(token),
        req.to_string().into(),
    )
    .await;
    if status == StatusCode::CONFLICT {
        // Someone else's publish of this version completed before ours began.
        return (status, body);
    }
    assert_eq!(
        status,
        StatusCode::OK,
        "begin: {}",
        String::from_utf8_lossy(&body)
    );
    let begin: serde_json::Value = serde_json::from_slice(&body).unwrap();
    if begin["status"] == "unchanged" {
        return (StatusCode::OK, body);
    }
    let url = begin["uploads"][0]["url"].as_str().unwrap();
    let (status, _, body) = send(
        registry,
        Method::PUT,
        url,
        None,
        Bytes::copy_from_slice(archive),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "upload: {}",
        String::from_utf8_lossy(&body)
    );
    req["upload_id"] = begin["upload_id"].clone();
    let (status, _, body) = send(
        registry,
        Method::POST,
        &format!("{base}/complete"),
        Some(token),
        req.to_string().into(),
    )
    .await;
    (status, body)
}

async fn publish_token(registry: &Registry) -> String {
    let record = tfreg::auth::TokenRecord {
        scope: tfreg::auth::Scope::Publish,
        namespace: None,
        created_at: 0,
        description: None,
    };
    tfreg::auth::create_token(registry.items.as_ref(), record)
        .await
        .unwrap()
}

fn item(pk: &str, sk: &str, data: &[u8]) -> Item {
    Item {
        pk: pk.into(),
        sk: sk.into(),
        data: data.to_vec(),
    }
}

async fn items_get_put_and_conditions(b: Backend) {
    let s = b.items.as_ref();
    assert!(s.get("P", "VERSION#1").await.unwrap().is_none());
    s.put(item("P", "VERSION#1", b"one"), Condition::IfAbsent)
        .await
        .unwrap();
    let again = s
        .put(item("P", "VERSION#1", b"two"), Condition::IfAbsent)
        .await;
    assert!(
        matches!(again, Err(StoreError::ConditionFailed)),
        "{}: {again:?}",
        b.name
    );
    assert_eq!(s.get("P", "VERSION#1").await.unwrap().unwrap().data, b"one");
    s.put(item("P", "VERSION#1", b"three"), Condition::Always)
        .await
        .unwrap();
    assert_eq!(
        s.get("P", "VERSION#1").await.unwrap().unwrap().data,
        b"three"
    );
    s.put(item("P", "OTHER#1", b"o"), Condition::IfAbsent)
        .await
        .unwrap();
    s.put(item("Q", "VERSION#1", b"q"), Condition::IfAbsent)
        .await
        .unwrap();
    let listed = query_all(s, "P", "VERSION#").await.unwrap();
    assert_eq!(
        listed.iter().map(|i| i.sk.as_str()).collect::<Vec<_>>(),
        ["VERSION#1"],
        "{}",
        b.name
    );
}

async fn queries_page_and_return_everything(b: Backend) {
    let s = b.items.as_ref();
    // 130 items of 10 KB: more than one page on both backends (100 items; 1 MB).
    let blob = vec![b'x'; 10 * 1024];
    for i in 0..130 {
        s.put(
            item("BIG", &format!("VERSION#{i:04}"), &blob),
            Condition::Always,
        )
        .await
        .unwrap();
    }
    let first = s.query_page("BIG", "VERSION#", None).await.unwrap();
    assert!(
        first.next.is_some() && first.items.len() < 130,
        "{}: one page must not hold 1.3 MB",
        b.name
    );
    let all = query_all(s, "BIG", "VERSION#").await.unwrap();
    let expected: Vec<String> = (0..130).map(|i| format!("VERSION#{i:04}")).collect();
    assert_eq!(
        all.iter().map(|i| i.sk.clone()).collect::<Vec<_>>(),
        expected,
        "{}",
        b.name
    );
}

async fn blobs_store_copy_delete_and_limit(b: Backend) {
    let s = b.blobs.as_ref();
    let body = |bytes: &'static [u8]| -> tfreg::storage::ByteStream {
        Box::pin(futures_util::stream::once(async move {
            Ok(Bytes::from_static(bytes))
        }))
    };
    assert_eq!(s.size("uploads/a/x.zip").await.unwrap(), None);
    assert!(
        matches!(
            s.fetch("uploads/a/x.zip", 10).await,
            Err(StoreError::NotFound(_))
        ),
        "{}",
        b.name
    );
    assert_eq!(
        s.write("uploads/a/x.zip", body(b"hello"), 100)
            .await
            .unwrap(),
        5
    );
    assert_eq!(s.size("uploads/a/x.zip").await.unwrap(), Some(5));
    s.copy("uploads/a/x.zip", "archives/abc/x.zip")
        .await
        .unwrap();
    let mut f = s.fetch("archives/abc/x.zip", 100).await.unwrap();
    let mut text = String::new();
    std::io::Read::read_to_string(&mut f, &mut text).unwrap();
    assert_eq!(text, "hello");
    assert!(
        matches!(
            s.fetch("archives/abc/x.zip", 2).await,
            Err(StoreError::TooLarge { .. })
        ),
        "{}",
        b.name
    );
    s.delete("uploads/a/x.zip").await.unwrap();
    s.delete("uploads/a/x.zip").await.unwrap(); // deleting twice is fine
    assert_eq!(s.size("uploads/a/x.zip").await.unwrap(), None);
    assert!(matches!(
        s.write("uploads/a/big.zip", body(b"too large"), 3).await,
        Err(StoreError::TooLarge { .. })
    ));
    assert_eq!(
        s.size("uploads/a/big.zip").await.unwrap(),
        None,
        "{}: a refused write leaves nothing",
        b.name
    );
}

async fn concurrent_publishes_have_one_winner(b: Backend) {
    let registry = Arc::new(b.registry().await);
    let token = publish_token(&registry).await;
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let (registry, token) = (registry.clone(), token.clone());
            tokio::spawn(async move {
                let archive = module_archive(&format!("contender-{i}"));
                let (status, _) =
                    publish_module(&registry, &token, "acme/race/aws", "1.0.0", &archive).await;
                (status, tfreg::hashing::sha256_hex(&archive))
            })
        })
        .collect();
    let mut winners = Vec::new();
    for t in tasks {
        let (status, sha) = t.await.unwrap();
        match status {
            StatusCode::CREATED => winners.push(sha),
            StatusCode::CONFLICT => {}
            other => panic!("{}: unexpected {other}", b.name),
        }
    }
    assert_eq!(winners.len(), 1, "{}: exactly one publish wins", b.name);
    let module = ModuleName::parse("acme", "race", "aws").unwrap();
    let releases = catalog::module_releases(registry.items.as_ref(), &module)
        .await
        .unwrap();
    assert_eq!(releases.len(), 1);
    assert_eq!(
        releases[0].file.sha256, winners[0],
        "{}: the stored version is the winner's, whole",
        b.name
    );
    let url = registry
        .blob_url(tfreg::signed_url::Access::Read, &releases[0].file.key)
        .await
        .unwrap();
    let (status, bytes) = download(&registry, &url).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(tfreg::hashing::sha256_hex(&bytes), winners[0]);
}

async fn version_lists_are_complete_and_in_semver_order(b: Backend) {
    let registry = b.registry().await;
    let module = ModuleName::parse("acme", "many", "aws").unwrap();
    // Releases are padded to ~5 KB each (long keys are realistic: a filename per
    // platform, hashes, key armor) so 250 of them exceed one 1 MB DynamoDB page.
    let mut versions: Vec<String> = (0..250)
        .map(|i| format!("{}.{}.{}", i / 100, (i / 10) % 10, i % 10 * 3))
        .collect();
    versions.push("1.0.0-rc.1".into());
    let padding = "p".repeat(5000);
    for (n, v) in versions.iter().enumerate().rev() {
        let release = catalog::ModuleRelease {
            version: v.clone(),
            file: catalog::StoredFile {
                filename: padding.clone(),
                sha256: format!("{n:064}"),
                size: 1,
                key: "k".into(),
            },
            published_at: 0,
        };
        catalog::put_module_release(
            registry.items.as_ref(),
            &module,
            &tfreg::version::Version::parse(v).unwrap(),
            &release,
        )
        .await
        .unwrap();
    }
    let (status, _, body) = send(
        &registry,
        Method::GET,
        &format!("{PUBLIC_URL}/v1/modules/acme/many/aws/versions"),
        None,
        Bytes::new(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let listed: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let listed: Vec<String> = listed["modules"][0]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap().to_string())
        .collect();
    let mut expected = versions.clone();
    expected.sort_by(|a, b| {
        semver::Version::parse(a)
            .unwrap()
            .cmp_precedence(&semver::Version::parse(b).unwrap())
    });
    assert_eq!(
        listed.len(),
        versions.len(),
        "{}: every version, across pages",
        b.name
    );
    assert_eq!(listed, expected, "{}: in semver order", b.name);
    assert_eq!(
        listed.iter().position(|v| v == "1.0.0-rc.1").unwrap() + 1,
        listed.iter().position(|v| v == "1.0.0").unwrap()
    );
}

async fn download_urls_answer_head_and_get_and_refuse_tampering(b: Backend) {
    let registry = b.registry().await;
    let token = publish_token(&registry).await;
    let archive = module_archive("download");
    let (status, body) = publish_module(&registry, &token, "acme/dl/aws", "1.0.0", &archive).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}: {}",
        b.name,
        String::from_utf8_lossy(&body)
    );
    let (status, headers, _) = send(
        &registry,
        Method::GET,
        &format!("{PUBLIC_URL}/v1/modules/acme/dl/aws/1.0.0/download"),
        None,
        Bytes::new(),
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let url = headers["x-terraform-get"].to_str().unwrap().to_string();
    assert!(url.split('?').next().unwrap().ends_with(".tar.gz"));

    let (status, headers, body) = send(&registry, Method::HEAD, &url, None, Bytes::new()).await;
    assert_eq!(status, StatusCode::OK, "{}: HEAD", b.name);
    assert!(body.is_empty());
    assert_eq!(
        headers["content-length"].to_str().unwrap(),
        archive.len().to_string()
    );
    let (status, bytes) = download(&registry, &url).await;
    assert_eq!(status, StatusCode::OK, "{}: GET", b.name);
    assert_eq!(bytes.as_ref(), archive.as_slice());

    for bad in [
        url.replace("expires=", "expires=1"),
        url.replace(".tar.gz?", ".zip?"),
        format!("{url}x"),
    ] {
        for method in [Method::HEAD, Method::GET] {
            let (status, _, _) = send(&registry, method.clone(), &bad, None, Bytes::new()).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{}: {method} {bad}", b.name);
        }
    }
    // The same URL, checked an hour later, has expired.
    let later = b.registry().await.with_clock(|| unix_now() + 3600);
    for method in [Method::HEAD, Method::GET] {
        let (status, _, body) = send(&later, method, &url, None, Bytes::new()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}", b.name);
        assert!(body.is_empty() || String::from_utf8_lossy(&body).contains("expired"));
    }

    if b.name == "aws" {
        // Where GET is redirected to S3: the presigned URL works for GET only,
        // which is why the registry answers HEAD itself; tampering is refused by S3.
        let (status, headers, _) = send(&registry, Method::GET, &url, None, Bytes::new()).await;
        assert_eq!(status, StatusCode::TEMPORARY_REDIRECT);
        let presigned = headers["location"].to_str().unwrap().to_string();
        let resp = http().head(&presigned).send().await.unwrap();
        assert_eq!(
            resp.status(),
            StatusCode::FORBIDDEN,
            "S3 answers HEAD on a GET-presigned URL with 403"
        );
        // Change one hex digit of the signature.
        let at = presigned.find("X-Amz-Signature=").unwrap() + "X-Amz-Signature=".len();
        let digit = if &presigned[at..at + 1] == "0" {
            "1"
        } else {
            "0"
        };
        let tampered = format!("{}{digit}{}", &presigned[..at], &presigned[at + 1..]);
        assert_eq!(
            http().get(&tampered).send().await.unwrap().status(),
            StatusCode::FORBIDDEN
        );
    }
}

/// Read-only functions may not write the table: they never create the URL
/// secret, refuse every archive URL until a writer made it, then use it.
async fn readers_never_make_the_url_secret(b: Backend) {
    let reader = b.reader();
    let forged =
        format!("{PUBLIC_URL}/v1/blobs/archives/abc/m.tar.gz?expires=99999999999&signature=AAAA");
    for method in [Method::HEAD, Method::GET] {
        let (status, _, body) = send(&reader, method, &forged, None, Bytes::new()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{}", b.name);
        if !body.is_empty() {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert!(
                v["errors"][0].as_str().unwrap().contains("no archive URLs"),
                "{v}"
            );
        }
    }
    let module_download = format!("{PUBLIC_URL}/v1/modules/acme/ro/aws/1.0.0/download");
    let get = |registry: &Registry| {
        let registry = registry.clone();
        let url = module_download.clone();
        async move { send(&registry, Method::GET, &url, None, Bytes::new()).await }
    };
    let (status, _, _) = get(&reader).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{}", b.name);
    assert!(
        tfreg::signed_url::read_signer(b.items.as_ref())
            .await
            .unwrap()
            .is_none(),
        "{}: a reader created the secret",
        b.name
    );

    let writer = b.registry().await;
    let token = publish_token(&writer).await;
    let archive = module_archive("read-only");
    let (status, _) = publish_module(&writer, &token, "acme/ro/aws", "1.0.0", &archive).await;
    assert_eq!(status, StatusCode::CREATED, "{}", b.name);
    // The same reader (its missing secret was not cached) now issues URLs the
    // writer's secret signs, and serves them.
    let (status, headers, _) = get(&reader).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{}", b.name);
    let url = headers["x-terraform-get"].to_str().unwrap().to_string();
    let (status, bytes) = download(&reader, &url).await;
    assert_eq!(status, StatusCode::OK, "{}", b.name);
    assert_eq!(bytes.as_ref(), archive.as_slice());
    let (status, bytes) = download(&writer, &url).await;
    assert_eq!(status, StatusCode::OK, "{}: one secret for all", b.name);
    assert_eq!(bytes.as_ref(), archive.as_slice());
}

macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Backend::embedded().await).await }) *
        }
        mod aws {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(super::Backend::aws().await).await }) *
        }
    };
}

contract!(
    items_get_put_and_conditions,
    queries_page_and_return_everything,
    blobs_store_copy_delete_and_limit,
    concurrent_publishes_have_one_winner,
    version_lists_are_complete_and_in_semver_order,
    download_urls_answer_head_and_get_and_refuse_tampering,
    readers_never_make_the_url_secret,
);
