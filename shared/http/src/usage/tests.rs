use std::sync::Arc;

use tfreg_model::token::{CiJob, Subject, TokenRecord};
use tfreg_model::usage::Package;
use tfreg_store::sqlite::SqliteStore;

use super::*;

fn record(created_by: &str, issued_to: Option<Subject>) -> Principal {
    Principal::Token(Arc::new(TokenRecord {
        id: "3f2a9c1b0d4e".into(),
        name: "ci-deploy".into(),
        grants: vec![],
        created_at: 1,
        expires_at: None,
        created_by: created_by.into(),
        issued_to,
        fill: false,
    }))
}

fn subject(ci: Option<CiJob>) -> Subject {
    Subject {
        iss: "https://token.actions.githubusercontent.com".into(),
        sub: "repo:acme/infra:ref:refs/heads/main".into(),
        name: Some("Alice".into()),
        email: Some("alice@example.com".into()),
        ci,
    }
}

#[test]
fn consumers_are_named_by_what_identifies_them_never_a_secret() {
    assert_eq!(consumer_of(&Principal::Operator), None);
    let anon = consumer_of(&Principal::Anonymous).unwrap();
    assert_eq!(
        (anon.kind, anon.id.as_str()),
        (ConsumerKind::Anonymous, "anonymous")
    );
    let token = consumer_of(&record("token admin (0123)", None)).unwrap();
    assert_eq!(token.kind, ConsumerKind::Token);
    assert_eq!(token.id, "token:3f2a9c1b0d4e");
    assert_eq!(token.label, "ci-deploy (3f2a9c1b0d4e)");
    let sso = consumer_of(&record("sso", Some(subject(None)))).unwrap();
    assert_eq!(sso.kind, ConsumerKind::Sso);
    assert_eq!(
        sso.id,
        "sso:https://token.actions.githubusercontent.com|repo:acme/infra:ref:refs/heads/main"
    );
    assert_eq!(sso.label, "alice@example.com");
    let job = CiJob {
        repository: "acme/infra".into(),
        workflow: ".github/workflows/plan.yml".into(),
    };
    let ci = consumer_of(&record("ci-exchange", Some(subject(Some(job))))).unwrap();
    assert_eq!(ci.kind, ConsumerKind::Ci);
    assert_eq!(
        ci.id,
        "ci:https://token.actions.githubusercontent.com|acme/infra|.github/workflows/plan.yml"
    );
    assert_eq!(ci.label, "acme/infra .github/workflows/plan.yml");
    // An exchanged token from before the job was kept: by its subject.
    let old = consumer_of(&record("ci-exchange", Some(subject(None)))).unwrap();
    assert_eq!(old.kind, ConsumerKind::Ci);
    assert_eq!(old.label, "repo:acme/infra:ref:refs/heads/main");
}

fn download(at: u64) -> Download {
    Download {
        package: Package::Module {
            hostname: "registry.example.com".into(),
            namespace: "acme".into(),
            name: "vpc".into(),
            system: "aws".into(),
        },
        version: "1.0.0".into(),
        platform: None,
        consumer: consumer_of(&Principal::Anonymous).unwrap(),
        at,
    }
}

/// A store whose adds fail until told otherwise.
struct Flaky {
    inner: SqliteStore,
    failing: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl ItemStore for Flaky {
    async fn get(
        &self,
        pk: &str,
        sk: &str,
    ) -> Result<Option<tfreg_store::Item>, tfreg_store::StoreError> {
        self.inner.get(pk, sk).await
    }
    async fn query_page(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
    ) -> Result<tfreg_store::Page, tfreg_store::StoreError> {
        self.inner.query_page(pk, sk_prefix, start_after).await
    }
    async fn put(
        &self,
        item: tfreg_store::Item,
        condition: tfreg_store::Condition,
    ) -> Result<(), tfreg_store::StoreError> {
        self.inner.put(item, condition).await
    }
    async fn take(
        &self,
        pk: &str,
        sk: &str,
    ) -> Result<Option<tfreg_store::Item>, tfreg_store::StoreError> {
        self.inner.take(pk, sk).await
    }
    async fn touch(
        &self,
        pk: &str,
        sk: &str,
        at: u64,
        after: u64,
    ) -> Result<bool, tfreg_store::StoreError> {
        self.inner.touch(pk, sk, at, after).await
    }
    async fn add(&self, add: tfreg_store::Add) -> Result<(), tfreg_store::StoreError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(tfreg_store::StoreError::Unavailable("down".into()));
        }
        self.inner.add(add).await
    }
}

#[tokio::test]
async fn a_flush_writes_the_tally_and_keeps_what_failed_for_the_next() {
    let store = Flaky {
        inner: SqliteStore::in_memory().unwrap(),
        failing: true.into(),
    };
    let sink = Tallied::new();
    for at in [10, 20, 30] {
        sink.count(download(at));
    }
    assert_eq!(sink.pending(), 3);
    assert!(sink.flush(&store).await.is_err(), "the store is down");
    sink.count(download(40));
    store
        .failing
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let flushed = sink.flush(&store).await.unwrap();
    // Day and consumer counters of one version and one day: two adds.
    assert_eq!(flushed.counters, 2);
    let report = tfreg_store::catalog::usage::report(&store, &download(0).package, None, true)
        .await
        .unwrap();
    assert_eq!(
        report.versions[0].downloads, 4,
        "the failed batch was put back"
    );
    assert_eq!(sink.flush(&store).await.unwrap(), Flushed::default());
}
