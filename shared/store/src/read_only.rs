//! [`ReadOnly`]: an item store that reads, touches an item's `touched_at`
//! and adds to counters, but never writes or deletes: what the read
//! functions' roles may do in DynamoDB (`GetItem`, `Query`, `UpdateItem`
//! of a token's `touched_at`, and the download functions' `UpdateItem` of
//! a usage counter). Chosen when the function is built, not by a
//! setting, so a function given it links none of its backend's write paths
//! (for DynamoDB, `PutItem` and `DeleteItem` with their serialisers).

use async_trait::async_trait;

use crate::traits::{Add, Condition, Item, ItemStore, Page, StoreError};

/// `S`, for reading only: a write is refused as our bug (a 500), since no
/// route a read function serves writes.
pub struct ReadOnly<S>(pub S);

fn refused(what: &str) -> StoreError {
    StoreError::internal(format!(
        "a {what} through a read-only store: this function's role may only read"
    ))
}

#[async_trait]
impl<S: ItemStore> ItemStore for ReadOnly<S> {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        self.0.get(pk, sk).await
    }

    async fn query_page(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
    ) -> Result<Page, StoreError> {
        self.0.query_page(pk, sk_prefix, start_after).await
    }

    async fn put(&self, _: Item, _: Condition) -> Result<(), StoreError> {
        Err(refused("write"))
    }

    async fn take(&self, _: &str, _: &str) -> Result<Option<Item>, StoreError> {
        Err(refused("delete"))
    }

    async fn touch(
        &self,
        pk: &str,
        sk: &str,
        at: u64,
        unless_after: u64,
    ) -> Result<bool, StoreError> {
        self.0.touch(pk, sk, at, unless_after).await
    }

    async fn add(&self, add: Add) -> Result<(), StoreError> {
        self.0.add(add).await
    }

    fn change_counter(&self) -> Option<u64> {
        self.0.change_counter()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// A store that records what reached it.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<&'static str>>);

    #[async_trait]
    impl ItemStore for Recorder {
        async fn get(&self, _: &str, _: &str) -> Result<Option<Item>, StoreError> {
            self.0.lock().unwrap().push("get");
            Ok(Some(Item::new("p", "s", b"x".to_vec())))
        }
        async fn query_page(&self, _: &str, _: &str, _: Option<&str>) -> Result<Page, StoreError> {
            self.0.lock().unwrap().push("query");
            Ok(Page::default())
        }
        async fn put(&self, _: Item, _: Condition) -> Result<(), StoreError> {
            self.0.lock().unwrap().push("put");
            Ok(())
        }
        async fn take(&self, _: &str, _: &str) -> Result<Option<Item>, StoreError> {
            self.0.lock().unwrap().push("take");
            Ok(None)
        }
        async fn touch(&self, _: &str, _: &str, _: u64, _: u64) -> Result<bool, StoreError> {
            self.0.lock().unwrap().push("touch");
            Ok(true)
        }
        async fn add(&self, _: Add) -> Result<(), StoreError> {
            self.0.lock().unwrap().push("add");
            Ok(())
        }
        fn change_counter(&self) -> Option<u64> {
            Some(7)
        }
    }

    #[tokio::test]
    async fn reads_touches_and_adds_pass_writes_and_deletes_never_reach_the_store() {
        let store = ReadOnly(Recorder::default());
        assert_eq!(store.get("p", "s").await.unwrap().unwrap().data, b"x");
        assert!(
            store
                .query_page("p", "", None)
                .await
                .unwrap()
                .items
                .is_empty()
        );
        assert!(store.touch("p", "s", 2, 1).await.unwrap());
        let add = Add {
            pk: "p".into(),
            sk: "s".into(),
            by: 1,
            at: 2,
            data: vec![],
            expires_at: None,
        };
        store.add(add).await.unwrap();
        assert_eq!(store.change_counter(), Some(7));
        let put = store
            .put(Item::new("p", "s", vec![]), Condition::Always)
            .await;
        assert!(matches!(put, Err(StoreError::Internal(_))), "{put:?}");
        let take = store.take("p", "s").await;
        assert!(matches!(take, Err(StoreError::Internal(_))), "{take:?}");
        assert_eq!(*store.0.0.lock().unwrap(), ["get", "query", "touch", "add"]);
    }
}
