//! Publishes in progress. `begin` records what will be uploaded and where it
//! will be published; `complete` checks the record against its own target and
//! files, then takes it, atomically, so exactly one complete runs per publish
//! and a complete for another target neither finishes nor spoils it.
//!
//! Item: pk `UPLOAD#<upload id>`, sk `UPLOAD` (see [`crate::catalog::schema`]).

use serde::{Deserialize, Serialize};

use tfreg_model::blob_key::UploadId;
use tfreg_model::protocol::FileDecl;
use tfreg_model::router::PublishTarget;

use super::schema::{UPLOAD_SK, upload_pk};
use crate::{Condition, Item, ItemStore, StoreError};

/// How long after its upload URLs expire a publish may still be completed.
pub const GRACE_SECS: u64 = 3600;

/// What `begin` announced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadSession {
    pub target: PublishTarget,
    pub files: Vec<FileDecl>,
    pub created_at: u64,
    /// After this (unix seconds) the publish can no longer be completed.
    pub expires_at: u64,
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

/// Record a new publish.
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
