//! Publishes in progress. `begin` records what will be uploaded and where it
//! will be published; `complete` checks the record against its own target and
//! files, then takes it, atomically, so exactly one complete runs per publish
//! and a complete for another target neither finishes nor spoils it.
//!
//! Publishes in progress are bounded: each holds a place among its token's
//! and one among its namespace's ([`super::places`]) from `begin` until its
//! complete or its expiry, so `begin` alone cannot fill the store.
//!
//! Item: pk `UPLOAD#<upload id>`, sk `UPLOAD` (see [`crate::catalog::schema`]).

use serde::{Deserialize, Serialize};

use tfreg_model::blob_key::UploadId;
use tfreg_model::protocol::FileDecl;
use tfreg_model::router::PublishTarget;

use super::places::{self, Place};
use super::schema::{UPLOAD_SK, namespace_publishing_pk, token_publishing_pk, upload_pk};
use crate::{Condition, Item, ItemStore, StoreError};

/// How long after its upload URLs expire a publish may still be completed.
pub const GRACE_SECS: u64 = 3600;
/// Most publishes one token may have in progress: a CI pipeline publishes
/// a release at a time, a handful at most.
pub const MAX_PER_TOKEN: usize = 20;
/// Most publishes in progress into one namespace, every token's together.
pub const MAX_PER_NAMESPACE: usize = 100;

/// What `begin` announced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadSession {
    pub target: PublishTarget,
    pub files: Vec<FileDecl>,
    pub created_at: u64,
    /// After this (unix seconds) the publish can no longer be completed.
    pub expires_at: u64,
    /// The places it holds until then ([`begin`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<Place>,
}

impl UploadSession {
    /// Refuse a complete for another target, with other files, or too late.
    pub fn check(
        &self,
        target: &PublishTarget,
        files: &[FileDecl],
        now: u64,
    ) -> Result<(), StoreError> {
        if self.target != *target {
            return Err(StoreError::invalid(
                "this upload_id belongs to another publish: call begin again",
            ));
        }
        let sorted = |f: &[FileDecl]| {
            let mut f = f.to_vec();
            f.sort();
            f
        };
        if sorted(&self.files) != sorted(files) {
            return Err(StoreError::invalid(
                "the files differ from those announced at begin: call begin again",
            ));
        }
        if now > self.expires_at {
            return Err(StoreError::invalid(
                "this publish has expired: call begin again",
            ));
        }
        Ok(())
    }
}

/// Start a publish by the token `token_id` (none: the operator): take a
/// place among the token's publishes in progress and one among its
/// namespace's, then record it holding them. All of them held already:
/// [`StoreError::Full`], with the seconds until the first frees up.
pub async fn begin(
    store: &dyn ItemStore,
    id: &UploadId,
    mut session: UploadSession,
    token_id: Option<&str>,
    now: u64,
) -> Result<(), StoreError> {
    let until = session.expires_at;
    let mut taken = Vec::new();
    let result = async {
        if let Some(token) = token_id {
            let full = || {
                format!(
                    "this token has {MAX_PER_TOKEN} publishes in progress, the most it may have: complete them (or wait until the unfinished ones expire) and begin again"
                )
            };
            let pk = token_publishing_pk(token);
            taken.push(places::take(store, &pk, MAX_PER_TOKEN, id, until, now, full).await?);
        }
        let full = || {
            format!(
                "{} has {MAX_PER_NAMESPACE} publishes in progress, the most it may have: complete them (or wait until the unfinished ones expire) and begin again",
                namespace_of(&session.target)
            )
        };
        let pk = namespace_publishing_pk(&session.target);
        taken.push(places::take(store, &pk, MAX_PER_NAMESPACE, id, until, now, full).await?);
        session.places = taken.clone();
        open(store, id, &session).await
    }
    .await;
    if result.is_err() {
        for place in &taken {
            if let Err(e) = places::release(store, place, id, until, now).await {
                tracing::warn!(upload = %id, error = %e, "cannot free the place of a publish that did not begin: it frees up when it expires");
            }
        }
    }
    result
}

/// Let go of the places a publish held: it completed, or was refused.
pub async fn release(
    store: &dyn ItemStore,
    id: &UploadId,
    session: &UploadSession,
    now: u64,
) -> Result<(), StoreError> {
    for place in &session.places {
        places::release(store, place, id, session.expires_at, now).await?;
    }
    Ok(())
}

/// What a publish's namespace is called in messages.
fn namespace_of(target: &PublishTarget) -> String {
    match target {
        PublishTarget::Provider { provider, .. } => format!("namespace {}", provider.namespace),
        PublishTarget::Module { module, .. } => format!("namespace {}", module.namespace),
        PublishTarget::Mirror {
            hostname, provider, ..
        } => format!("the mirror of {hostname}/{}", provider.namespace),
    }
}

/// Record a publish (a new one, or one restored for a retry).
pub async fn open(
    store: &dyn ItemStore,
    id: &UploadId,
    session: &UploadSession,
) -> Result<(), StoreError> {
    // Gone from the store a while after nobody can complete it.
    let item = Item::new(upload_pk(id), UPLOAD_SK, super::codec::encode(session)?)
        .expiring_at(session.expires_at + GRACE_SECS);
    match store.put(item, Condition::IfAbsent).await {
        Ok(()) => Ok(()),
        Err(StoreError::ConditionFailed) => Err(StoreError::internal(format!(
            "upload id {id} is already in use"
        ))),
        Err(e) => Err(e),
    }
}

/// A publish's record, if it exists.
pub async fn get(
    store: &dyn ItemStore,
    id: &UploadId,
) -> Result<Option<UploadSession>, StoreError> {
    store
        .get(&upload_pk(id), UPLOAD_SK)
        .await?
        .map(|item| super::decode(&item))
        .transpose()
}

/// Take a publish's record: `None` if it never existed or was already taken.
pub async fn take(
    store: &dyn ItemStore,
    id: &UploadId,
) -> Result<Option<UploadSession>, StoreError> {
    store
        .take(&upload_pk(id), UPLOAD_SK)
        .await?
        .map(|item| super::decode(&item))
        .transpose()
}

#[cfg(all(test, feature = "embedded"))]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::sqlite::SqliteStore;

    fn session() -> UploadSession {
        UploadSession {
            target: PublishTarget::try_from("modules/ns/m/aws/1.0.0".to_string()).unwrap(),
            files: vec![FileDecl {
                name: "m.tar.gz".into(),
                size: 3,
                sha256: "a".repeat(64),
            }],
            created_at: 0,
            expires_at: 100,
            places: vec![],
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn one_complete_takes_a_session() {
        let store = Arc::new(SqliteStore::in_memory().unwrap());
        let id = UploadId::random();
        open(store.as_ref(), &id, &session()).await.unwrap();
        let takers: Vec<_> = (0..10)
            .map(|_| {
                let (store, id) = (store.clone(), id.clone());
                tokio::spawn(async move { take(store.as_ref(), &id).await.unwrap() })
            })
            .collect();
        let mut taken = 0;
        for t in takers {
            if let Some(s) = t.await.unwrap() {
                assert_eq!(s, session());
                taken += 1;
            }
        }
        assert_eq!(taken, 1);
    }

    /// Many begins at once by one token: exactly as many get a place as
    /// there are places; the others are told when the first frees up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_begins_get_exactly_the_places_there_are() {
        let store = Arc::new(SqliteStore::in_memory().unwrap());
        let begins: Vec<_> = (0..MAX_PER_TOKEN + 10)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    begin(store.as_ref(), &UploadId::random(), session(), Some("t"), 0).await
                })
            })
            .collect();
        let (mut begun, mut full) = (0, 0);
        for b in begins {
            match b.await.unwrap() {
                Ok(()) => begun += 1,
                Err(StoreError::Full {
                    message,
                    retry_after_secs,
                }) => {
                    assert!(message.contains("this token has 20"), "{message}");
                    assert_eq!(retry_after_secs, 101);
                    full += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!((begun, full), (MAX_PER_TOKEN, 10));
    }

    /// A released place and an expired one are free again; a begin refused
    /// by its namespace gives back its token's place.
    #[tokio::test]
    async fn places_free_up_when_released_or_expired() {
        let store = SqliteStore::in_memory().unwrap();
        let mut ids = Vec::new();
        for _ in 0..MAX_PER_TOKEN {
            let id = UploadId::random();
            begin(&store, &id, session(), Some("t"), 0).await.unwrap();
            ids.push(id);
        }
        let full = begin(&store, &UploadId::random(), session(), Some("t"), 50).await;
        assert!(matches!(
            full,
            Err(StoreError::Full {
                retry_after_secs: 51,
                ..
            })
        ));
        // Completed: its places go.
        let done = take(&store, &ids[0]).await.unwrap().unwrap();
        assert_eq!(done.places.len(), 2);
        release(&store, &ids[0], &done, 50).await.unwrap();
        begin(&store, &UploadId::random(), session(), Some("t"), 50)
            .await
            .unwrap();
        assert!(
            begin(&store, &UploadId::random(), session(), Some("t"), 50)
                .await
                .is_err()
        );
        // Expired (after 100): every place is free again.
        let later = || UploadSession {
            expires_at: 1000,
            ..session()
        };
        for _ in 0..MAX_PER_TOKEN {
            begin(&store, &UploadId::random(), later(), Some("t"), 101)
                .await
                .unwrap();
        }
        // The namespace: 20 places held by t; other tokens fill it.
        for n in 0..(MAX_PER_NAMESPACE - MAX_PER_TOKEN) {
            let token = format!("u{}", n / MAX_PER_TOKEN);
            begin(&store, &UploadId::random(), later(), Some(&token), 101)
                .await
                .unwrap();
        }
        let refused = begin(&store, &UploadId::random(), later(), Some("v"), 101).await;
        match refused {
            Err(StoreError::Full { message, .. }) => {
                assert!(message.contains("namespace ns has 100"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        // v's token place was given back: v holds none.
        let held = crate::query_all(&store, &token_publishing_pk("v"), "")
            .await
            .unwrap();
        assert!(
            held.iter()
                .all(|i| crate::catalog::decode::<serde_json::Value>(i).unwrap()["until"] == 0),
            "{held:?}"
        );
    }

    #[test]
    fn complete_must_match_begin() {
        let s = session();
        assert!(s.check(&s.target, &s.files, 100).is_ok());
        let other = PublishTarget::try_from("modules/ns/m/aws/2.0.0".to_string()).unwrap();
        assert!(
            s.check(&other, &s.files, 0)
                .unwrap_err()
                .to_string()
                .contains("another publish")
        );
        let mut files = s.files.clone();
        files[0].size = 4;
        assert!(
            s.check(&s.target, &files, 0)
                .unwrap_err()
                .to_string()
                .contains("differ")
        );
        assert!(
            s.check(&s.target, &s.files, 101)
                .unwrap_err()
                .to_string()
                .contains("expired")
        );
    }
}
