//! One contract, two backends: every test here runs in-process against the
//! embedded store (SQLite + a directory) and against DynamoDB + S3 (the dynalite
//! and s3s-fs emulators that `scripts/test` starts; their endpoints come in the
//! standard `AWS_ENDPOINT_URL_DYNAMODB` / `AWS_ENDPOINT_URL_S3` variables).

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, StatusCode};
use tfreg_http::registry::{Registry, unix_now};
use tfreg_model::address::ModuleName;
use tfreg_model::blob_key::{BlobKey, FileName, UploadId};
use tfreg_model::hashing::sha256_hex;
use tfreg_model::router::PublishTarget;
use tfreg_model::token::Scope;
use tfreg_store::catalog;
use tfreg_store::{ByteStream, Condition, Digest, Item, StoreError, query_all};
use tfreg_testkit::{PUBLIC_URL, TestRegistry, module_archive};

fn item(pk: &str, sk: &str, data: &[u8]) -> Item {
    Item::new(pk, sk, data.to_vec())
}

pub fn module(address: &str, version: &str) -> PublishTarget {
    PublishTarget::try_from(format!("modules/{address}/{version}")).unwrap()
}

/// Publish a module archive named `m.tar.gz`.
pub async fn publish_module(
    r: &TestRegistry,
    token: &str,
    address: &str,
    version: &str,
    archive: &[u8],
) -> tfreg_testkit::TestResponse {
    r.publish(
        &module(address, version),
        token,
        &[("m.tar.gz".to_string(), archive.to_vec())],
        Default::default(),
    )
    .await
}

fn marker(m: &str) -> Vec<u8> {
    module_archive(&[(
        "main.tf",
        &format!("output \"marker\" {{ value = \"{m}\" }}\n"),
    )])
}

async fn items_get_put_take_and_conditions(r: TestRegistry) {
    let s = r.registry.items.as_ref();
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
        r.name
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
        r.name
    );
    // take: returns the item once, then it is gone.
    let taken = s.take("Q", "VERSION#1").await.unwrap().unwrap();
    assert_eq!(taken.data, b"q");
    assert!(
        s.take("Q", "VERSION#1").await.unwrap().is_none(),
        "{}",
        r.name
    );
    assert!(s.get("Q", "VERSION#1").await.unwrap().is_none());
    assert!(s.take("NONE", "X").await.unwrap().is_none());
    // An expiry time comes back from get, query and take.
    s.put(
        item("E", "UPLOAD", b"e").expiring_at(1_700_000_000),
        Condition::IfAbsent,
    )
    .await
    .unwrap();
    let expiry = |i: Option<Item>| i.unwrap().expires_at;
    assert_eq!(
        expiry(s.get("E", "UPLOAD").await.unwrap()),
        Some(1_700_000_000)
    );
    let page = s.query_page("E", "", None).await.unwrap();
    assert_eq!(page.items[0].expires_at, Some(1_700_000_000), "{}", r.name);
    assert_eq!(
        expiry(s.take("E", "UPLOAD").await.unwrap()),
        Some(1_700_000_000)
    );
    assert_eq!(
        s.get("P", "VERSION#1").await.unwrap().unwrap().expires_at,
        None
    );
}

async fn queries_page_and_return_everything(r: TestRegistry) {
    let s = r.registry.items.as_ref();
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
        r.name
    );
    let all = query_all(s, "BIG", "VERSION#").await.unwrap();
    let expected: Vec<String> = (0..130).map(|i| format!("VERSION#{i:04}")).collect();
    assert_eq!(
        all.iter().map(|i| i.sk.clone()).collect::<Vec<_>>(),
        expected,
        "{}",
        r.name
    );
}

fn body(bytes: &'static [u8]) -> ByteStream {
    Box::pin(futures_util::stream::once(async move {
        Ok(Bytes::from_static(bytes))
    }))
}

fn digest(bytes: &[u8]) -> Digest {
    Digest {
        size: bytes.len() as u64,
        sha256: sha256_hex(bytes),
    }
}

/// Upload slots are write-once, claims are private snapshots, kept archives
/// are never replaced, closed slots refuse late uploads.
async fn blobs_receive_claim_keep_close(r: TestRegistry) {
    let s = r.registry.blobs.as_ref();
    let id = UploadId::random();
    let slot = BlobKey::upload(&id, &FileName::parse("x.zip").unwrap());
    assert!(
        matches!(s.claim(&slot, 10).await, Err(StoreError::NotFound(_))),
        "{}",
        r.name
    );
    // The declared bytes and nothing else.
    for (sent, want) in [
        (b"hello, world" as &'static [u8], "TooLarge"),
        (b"hell", "Mismatch"),
        (b"HELLO", "Mismatch"),
    ] {
        let err = s.receive(&slot, body(sent), &digest(b"hello")).await;
        assert!(
            format!("{err:?}").contains(want),
            "{}: {sent:?}: {err:?}",
            r.name
        );
    }
    assert!(
        matches!(s.claim(&slot, 10).await, Err(StoreError::NotFound(_))),
        "{}: a refused upload leaves nothing",
        r.name
    );
    s.receive(&slot, body(b"hello"), &digest(b"hello"))
        .await
        .unwrap();
    let again = s.receive(&slot, body(b"hello"), &digest(b"hello")).await;
    assert!(
        matches!(again, Err(StoreError::AlreadyExists(_))),
        "{}: slots are write-once: {again:?}",
        r.name
    );
    assert!(matches!(
        s.claim(&slot, 2).await,
        Err(StoreError::TooLarge { .. })
    ));
    let mut claimed = s.claim(&slot, 100).await.unwrap();
    assert_eq!(claimed.digest, digest(b"hello"), "{}", r.name);
    assert_eq!(claimed.read_all().unwrap(), b"hello");
    let archive = BlobKey::archive(&id, &FileName::parse("x.zip").unwrap());
    s.keep(&claimed, &archive).await.unwrap();
    let again = s.keep(&claimed, &archive).await;
    assert!(
        matches!(again, Err(StoreError::AlreadyExists(_))),
        "{}: a kept archive is never replaced: {again:?}",
        r.name
    );
    // Once claimed, changing the upload changes nothing that is kept: keep
    // stores the claimed bytes, or refuses (S3: the ETag no longer matches).
    let other = UploadId::random();
    let slot2 = BlobKey::upload(&other, &FileName::parse("y.zip").unwrap());
    s.receive(&slot2, body(b"hello"), &digest(b"hello"))
        .await
        .unwrap();
    let claimed2 = s.claim(&slot2, 100).await.unwrap();
    s.close_upload(&slot2).await.unwrap(); // replaces the slot's bytes
    let archive2 = BlobKey::archive(&other, &FileName::parse("y.zip").unwrap());
    match s.keep(&claimed2, &archive2).await {
        Ok(()) => {
            let url = r.registry.read_url(&archive2).await.unwrap();
            assert_eq!(r.download(&url).await.body.as_ref(), b"hello", "{}", r.name);
            s.delete(&archive2).await.unwrap();
        }
        Err(StoreError::Mismatch { .. }) => {}
        Err(e) => panic!("{}: {e}", r.name),
    }
    s.close_upload(&slot).await.unwrap();
    let late = s.receive(&slot, body(b"hello"), &digest(b"hello")).await;
    assert!(
        matches!(late, Err(StoreError::AlreadyExists(_))),
        "{}: a closed slot refuses uploads: {late:?}",
        r.name
    );
    let listed = s.list("archives/").await.unwrap();
    assert_eq!(listed, std::slice::from_ref(&archive), "{}", r.name);
    let url = r.registry.read_url(&archive).await.unwrap();
    let got = r.download(&url).await;
    assert_eq!(got.status, StatusCode::OK, "{}", r.name);
    assert_eq!(got.body.as_ref(), b"hello");
    s.delete(&archive).await.unwrap();
    s.delete(&archive).await.unwrap(); // deleting twice is fine
    assert!(s.list("archives/").await.unwrap().is_empty(), "{}", r.name);
}

async fn concurrent_publishes_have_one_winner_and_leave_no_orphans(r: TestRegistry) {
    let r = Arc::new(r);
    let token = r.token(Scope::Publish, None).await;
    // Half the contenders publish the same content (they may end "unchanged"),
    // the others each their own (they lose with 409).
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let (r, token) = (r.clone(), token.clone());
            tokio::spawn(async move {
                let m = if i % 2 == 0 { 0 } else { i };
                let archive = marker(&format!("contender-{m}"));
                let resp = publish_module(&r, &token, "acme/race/aws", "1.0.0", &archive).await;
                (resp, sha256_hex(&archive))
            })
        })
        .collect();
    let (mut winners, mut unchanged) = (Vec::new(), Vec::new());
    for t in tasks {
        let (resp, sha) = t.await.unwrap();
        match resp.status {
            StatusCode::CREATED => winners.push(sha),
            // The winner's content again, at begin or at complete.
            StatusCode::OK => unchanged.push(sha),
            // Other content: begin after the winner's complete, or complete after its put.
            StatusCode::CONFLICT => {}
            other => panic!("{}: unexpected {other}: {}", r.name, resp.text()),
        }
    }
    assert_eq!(winners.len(), 1, "{}: exactly one publish wins", r.name);
    assert!(
        unchanged.iter().all(|sha| *sha == winners[0]),
        "{}: only the winner's content is unchanged",
        r.name
    );
    let module = ModuleName::parse("acme", "race", "aws").unwrap();
    let releases = catalog::module_releases(r.registry.items.as_ref(), &module)
        .await
        .unwrap();
    assert_eq!(releases.len(), 1);
    assert_eq!(
        releases[0].file.sha256, winners[0],
        "{}: the stored version is the winner's, whole",
        r.name
    );
    let url = r.registry.read_url(&releases[0].file.key).await.unwrap();
    let got = r.download(&url).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(sha256_hex(&got.body), winners[0]);
    // The losers and the no-ops removed what they kept: the only archive is
    // the winner's, and the zip the OCI view serves is made of it alone.
    let zip = catalog::module_zip(r.registry.items.as_ref(), &module, &releases[0])
        .await
        .unwrap()
        .expect("the winner's OCI zip");
    let mut archives = r.registry.blobs.list("archives/").await.unwrap();
    archives.sort();
    let mut expected = vec![releases[0].file.key.clone(), zip.key];
    expected.sort();
    assert_eq!(archives, expected, "{}: no orphaned archives", r.name);
}

async fn version_lists_are_complete_and_in_semver_order(r: TestRegistry) {
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
                key: BlobKey::parse("archives/k.tar.gz").unwrap(),
            },
            published_at: 0,
            lifecycle: Default::default(),
        };
        catalog::put_module_release(
            r.registry.items.as_ref(),
            &module,
            &tfreg_model::version::Version::parse(v).unwrap(),
            &release,
        )
        .await
        .unwrap();
    }
    let resp = r.get("/v1/modules/acme/many/aws/versions").await;
    assert_eq!(resp.status, StatusCode::OK);
    let listed: Vec<String> = resp.json()["modules"][0]["versions"]
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
        r.name
    );
    assert_eq!(listed, expected, "{}: in semver order", r.name);
    assert_eq!(
        listed.iter().position(|v| v == "1.0.0-rc.1").unwrap() + 1,
        listed.iter().position(|v| v == "1.0.0").unwrap()
    );
}

async fn download_urls_answer_head_and_get_and_refuse_tampering(r: TestRegistry) {
    let token = r.token(Scope::Publish, None).await;
    let archive = marker("download");
    let resp = publish_module(&r, &token, "acme/dl/aws", "1.0.0", &archive).await;
    resp.expect(StatusCode::CREATED, r.name);
    let resp = r.get("/v1/modules/acme/dl/aws/1.0.0/download").await;
    assert_eq!(resp.status, StatusCode::NO_CONTENT);
    let url = resp.headers["x-terraform-get"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(url.split('?').next().unwrap().ends_with(".tar.gz"));

    let head = r.send_url(Method::HEAD, &url, &[], Bytes::new()).await;
    assert_eq!(head.status, StatusCode::OK, "{}: HEAD", r.name);
    assert!(head.body.is_empty());
    assert_eq!(
        head.headers["content-length"].to_str().unwrap(),
        archive.len().to_string()
    );
    let got = r.download(&url).await;
    assert_eq!(got.status, StatusCode::OK, "{}: GET", r.name);
    assert_eq!(got.body.as_ref(), archive.as_slice());

    for bad in [
        url.replace("expires=", "expires=1"),
        url.replace(".tar.gz?", ".zip?"),
        format!("{url}x"),
    ] {
        for method in [Method::HEAD, Method::GET] {
            let resp = r.send_url(method.clone(), &bad, &[], Bytes::new()).await;
            assert_eq!(
                resp.status,
                StatusCode::FORBIDDEN,
                "{}: {method} {bad}",
                r.name
            );
        }
    }
    // The same URL, checked an hour later, has expired.
    let later = r.reconfigure(|reg: Registry| reg.with_clock(|| unix_now() + 3600));
    let resp = later.send_url(Method::GET, &url, &[], Bytes::new()).await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{}", r.name);
    assert!(resp.error().contains("expired"), "{}", resp.error());
    let resp = later.send_url(Method::HEAD, &url, &[], Bytes::new()).await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{}", r.name);
    assert!(resp.body.is_empty(), "HEAD answers carry no body");

    if r.name == "aws" {
        // Where GET is redirected to S3: the presigned URL works for GET only,
        // which is why the registry answers HEAD itself; tampering is refused by S3.
        let resp = r.send_url(Method::GET, &url, &[], Bytes::new()).await;
        assert_eq!(resp.status, StatusCode::TEMPORARY_REDIRECT);
        let presigned = resp.headers["location"].to_str().unwrap().to_string();
        let head = r
            .send_url(Method::HEAD, &presigned, &[], Bytes::new())
            .await;
        assert_eq!(
            head.status,
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
        let resp = r.send_url(Method::GET, &tampered, &[], Bytes::new()).await;
        assert_eq!(resp.status, StatusCode::FORBIDDEN);
    }
}

/// Read-only functions may not write the table: they never create the URL
/// secret, refuse every archive URL until a writer made it, then use it.
async fn readers_never_make_the_url_secret(writer: TestRegistry) {
    // A reader on a new table (the writer's holds its secret already), built
    // as the read-only Lambda functions build it.
    let items = writer.fresh_items().await;
    let reader = Registry::with_stored_signer(
        items.clone(),
        writer.registry.blobs.clone(),
        tfreg_testkit::test_config(),
    );
    let reader = writer.reconfigure(|_| reader);
    let forged =
        format!("{PUBLIC_URL}/v1/blobs/archives/abc/m.tar.gz?expires=99999999999&signature=AAAA");
    let resp = reader
        .send_url(Method::GET, &forged, &[], Bytes::new())
        .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{}", writer.name);
    assert!(resp.error().contains("no archive URLs"), "{}", resp.error());
    let resp = reader
        .send_url(Method::HEAD, &forged, &[], Bytes::new())
        .await;
    assert_eq!(resp.status, StatusCode::FORBIDDEN, "{}", writer.name);
    let download = "/v1/modules/acme/ro/aws/1.0.0/download";
    assert_eq!(reader.get(download).await.status, StatusCode::NOT_FOUND);
    assert!(
        tfreg_http::signed_url::read_signer(items.as_ref())
            .await
            .unwrap()
            .is_none(),
        "{}: a reader created the secret",
        writer.name
    );

    // A writer on the reader's table publishes (and so makes the secret).
    let signer = tfreg_http::signed_url::load_signer(items.as_ref())
        .await
        .unwrap();
    let writer = writer.reconfigure(|_| {
        Registry::new(
            items.clone(),
            reader.registry.blobs.clone(),
            signer,
            tfreg_testkit::test_config(),
        )
    });
    let token = writer.token(Scope::Publish, None).await;
    let archive = marker("read-only");
    let resp = publish_module(&writer, &token, "acme/ro/aws", "1.0.0", &archive).await;
    resp.expect(StatusCode::CREATED, writer.name);
    // The same reader (its missing secret was not cached) now issues URLs the
    // writer's secret signs, and serves them.
    let resp = reader.get(download).await;
    assert_eq!(resp.status, StatusCode::NO_CONTENT, "{}", writer.name);
    let url = resp.headers["x-terraform-get"]
        .to_str()
        .unwrap()
        .to_string();
    let got = reader.download(&url).await;
    assert_eq!(got.status, StatusCode::OK, "{}", writer.name);
    assert_eq!(got.body.as_ref(), archive.as_slice());
    let got = writer.download(&url).await;
    assert_eq!(
        got.status,
        StatusCode::OK,
        "{}: one secret for all",
        writer.name
    );
    assert_eq!(got.body.as_ref(), archive.as_slice());

    // A reader asked for the secret many times at once (a function's warm-up
    // at init and its first requests) reads it once: the others wait.
    let counting = Arc::new(tfreg_testkit::counting::CountingStore::new(items.clone()));
    let cold = Registry::with_stored_signer(
        counting.clone(),
        reader.registry.blobs.clone(),
        tfreg_testkit::test_config(),
    );
    let asks = (0..8).map(|_| {
        let r = cold.clone();
        tokio::spawn(async move { r.signer_if_ready().await.map(|s| s.is_some()) })
    });
    for ask in asks.collect::<Vec<_>>() {
        assert!(ask.await.unwrap().unwrap(), "{}", writer.name);
    }
    assert_eq!(counting.counts().gets, 1, "{}", writer.name);
}

/// Sign-in's items (issue 21): a code is taken once (of two concurrent
/// takes, one wins) and carries its expiry, a nonce is used once, group
/// mappings are read whole. (A sign-in in progress stores nothing: issue 35.)
async fn sign_in_items_are_taken_once_and_expire(r: TestRegistry) {
    use tfreg_model::login::{AuthorizeRequest, CODE_TTL_SECS};
    use tfreg_model::signin::{LoginCode, Subject};
    use tfreg_model::sso::GroupMapping;
    use tfreg_model::token::Scope;
    use tfreg_store::catalog::schema::LOGINCODE_PK;
    use tfreg_store::catalog::{login, sso};

    let s = r.registry.items.clone();
    let now = 1_000_000;
    let request = AuthorizeRequest {
        redirect_uri: "http://localhost:10000/login".into(),
        port: 10000,
        state: "cli-state".into(),
        code_challenge: "c".repeat(43),
    };
    let code = LoginCode::new(
        "terraform-cli",
        &request,
        Subject {
            iss: "https://idp.test".into(),
            sub: "alice".into(),
            name: None,
            email: None,
            ci: None,
        },
        vec!["platform".into()],
        now,
    );
    login::put_code(s.as_ref(), "the-code", &code)
        .await
        .unwrap();
    let sk = tfreg_model::hashing::sha256_hex(b"the-code");
    let kept = s.get(LOGINCODE_PK, &sk).await.unwrap().unwrap();
    assert_eq!(kept.expires_at, Some(now + CODE_TTL_SECS), "{}", r.name);
    let takes = (0..2).map(|_| {
        let s = s.clone();
        tokio::spawn(async move { login::take_code(s.as_ref(), "the-code").await })
    });
    let won: Vec<_> = futures_util::future::join_all(takes)
        .await
        .into_iter()
        .filter_map(|t| t.unwrap().unwrap())
        .collect();
    assert_eq!(won, [code], "{}", r.name);

    assert!(login::use_nonce(s.as_ref(), "n1", now + 60).await.unwrap());
    assert!(!login::use_nonce(s.as_ref(), "n1", now + 60).await.unwrap());

    let mapping = GroupMapping::new("platform", Scope::Publish, &["acme"]).unwrap();
    sso::put_mapping(s.as_ref(), &mapping).await.unwrap();
    assert_eq!(
        sso::mappings(s.as_ref()).await.unwrap(),
        [mapping],
        "{}",
        r.name
    );
}

fn add(pk: &str, sk: &str, by: u64, at: u64, expires_at: Option<u64>) -> tfreg_store::Add {
    tfreg_store::Add {
        pk: pk.into(),
        sk: sk.into(),
        by,
        at,
        data: format!("label {at}").into_bytes(),
        expires_at,
    }
}

/// A counter is made by its first add, summed by every later one (never
/// read and written back), its times and label set; 64 concurrent adds of
/// one counter sum exactly.
async fn counters_add_atomically_and_sum_exactly(r: TestRegistry) {
    use tfreg_store::Counter;
    let s = r.registry.items.as_ref();
    s.add(add("USAGE#c", "N#1", 2, 100, Some(9_000)))
        .await
        .unwrap();
    let made = s.get("USAGE#c", "N#1").await.unwrap().unwrap();
    assert_eq!(
        made.counter,
        Some(Counter {
            n: 2,
            first_at: 100,
            last_at: 100
        }),
        "{}",
        r.name
    );
    assert_eq!(
        (made.data.as_slice(), made.expires_at),
        (&b"label 100"[..], Some(9_000))
    );
    // No expiry given: the one set stays.
    s.add(add("USAGE#c", "N#1", 3, 200, None)).await.unwrap();
    let summed = s.get("USAGE#c", "N#1").await.unwrap().unwrap();
    assert_eq!(
        summed.counter,
        Some(Counter {
            n: 5,
            first_at: 100,
            last_at: 200
        }),
        "{}",
        r.name
    );
    assert_eq!(
        (summed.data.as_slice(), summed.expires_at),
        (&b"label 200"[..], Some(9_000))
    );
    // A plain item has no counter; a query returns counters too.
    s.put(item("USAGE#c", "P#1", b"p"), Condition::Always)
        .await
        .unwrap();
    assert_eq!(
        s.get("USAGE#c", "P#1").await.unwrap().unwrap().counter,
        None
    );
    let listed = query_all(s, "USAGE#c", "N#").await.unwrap();
    assert_eq!(listed[0].counter.map(|c| c.n), Some(5), "{}", r.name);

    let reader = r.registry.items.clone();
    let adds = (0..64u64).map(|i| {
        let reader = reader.clone();
        tokio::spawn(async move {
            reader
                .add(add("USAGE#c", "N#2", i + 1, 1_000 + i, None))
                .await
        })
    });
    for done in futures_util::future::join_all(adds).await {
        done.unwrap().unwrap();
    }
    let counter = s
        .get("USAGE#c", "N#2")
        .await
        .unwrap()
        .unwrap()
        .counter
        .unwrap();
    assert_eq!(counter.n, (1..=64).sum::<u64>(), "{}: exact", r.name);
    assert!((1_000..1_064).contains(&counter.first_at));
}

/// Downloads through the read side, counted by serve's sink: one add per
/// counter per flush, the report naming the reading token; a versions list
/// counts nothing; a 404 counts nothing.
async fn downloads_are_counted_and_reported_by_consumer(r: TestRegistry) {
    use tfreg_model::usage::{ConsumerKind, Package};
    let publisher = r.token(Scope::Publish, Some("acme")).await;
    publish_module(&r, &publisher, "acme/counted/aws", "1.0.0", &marker("c"))
        .await
        .expect(StatusCode::CREATED, "publish");
    let sink = Arc::new(tfreg_http::usage::Tallied::new());
    let counted = sink.clone();
    let view = r.reconfigure(move |reg: Registry| reg.with_usage(counted));
    let reader = view.token(Scope::Read, None).await;
    for _ in 0..3 {
        view.get_with("/v1/modules/acme/counted/aws/1.0.0/download", &reader)
            .await
            .expect(StatusCode::NO_CONTENT, "download");
    }
    view.get_with("/v1/modules/acme/counted/aws/versions", &reader)
        .await
        .expect(StatusCode::OK, "versions");
    let missing = view
        .get_with("/v1/modules/acme/counted/aws/9.9.9/download", &reader)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(sink.pending(), 3, "{}", r.name);
    let flushed = sink.flush(r.registry.items.as_ref()).await.unwrap();
    assert_eq!((flushed.downloads, flushed.counters), (3, 2), "{}", r.name);
    let package = Package::Module {
        hostname: r.registry.config.hostname.as_str().into(),
        namespace: "acme".into(),
        name: "counted".into(),
        system: "aws".into(),
    };
    let report = catalog::usage::report(r.registry.items.as_ref(), &package, None, true)
        .await
        .unwrap();
    assert_eq!(report.versions.len(), 1, "{}: {report:?}", r.name);
    let v = &report.versions[0];
    assert_eq!((v.version.as_str(), v.downloads), ("1.0.0", 3));
    assert_eq!(v.days.len(), 1);
    assert_eq!(v.consumers.len(), 1);
    assert_eq!(v.consumers[0].consumer.kind, ConsumerKind::Token);
    assert!(v.consumers[0].consumer.id.starts_with("token:"));
    assert!(
        !serde_json::to_string(&report).unwrap().contains(&reader),
        "never the secret"
    );
}

/// Run each contract test against both backends.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(tfreg_testkit::TestRegistry::embedded().await).await }) *
        }
        mod aws {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() { super::$name(tfreg_testkit::TestRegistry::aws().await).await }) *
        }
    };
}
pub(crate) use contract;

contract!(
    items_get_put_take_and_conditions,
    queries_page_and_return_everything,
    blobs_receive_claim_keep_close,
    concurrent_publishes_have_one_winner_and_leave_no_orphans,
    version_lists_are_complete_and_in_semver_order,
    download_urls_answer_head_and_get_and_refuse_tampering,
    readers_never_make_the_url_secret,
    sign_in_items_are_taken_once_and_expire,
    counters_add_atomically_and_sum_exactly,
    downloads_are_counted_and_reported_by_consumer,
);
