//! Answers this process made lately, kept while they are still what it would
//! answer: a handler group's answer to a route, after authorisation, for as
//! long as the item store's change counter
//! ([`tfreg_store::ItemStore::change_counter`]) and the clock's second are
//! those it was made under. Any write (a publish, yank, deprecate, delete, a
//! token's last use) moves the counter, so the next request makes its answer
//! afresh; an answer holding signed URLs, which name their expiry, is the same
//! only within its second. A store without a counter (DynamoDB) caches
//! nothing.
//!
//! Only what a route answers *whoever asks* may be kept: the key is the
//! route alone, so the caller is authorised before a kept answer is looked
//! up (by [`crate::app`], on every request), and a caller refused there never
//! reaches it.

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};

use crate::body::{Body, Response};

/// A whole answer: status, headers and body, cheap to clone (the body is shared).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    /// A JSON answer.
    pub fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Self {
        // Serialising our own wire types cannot fail (no maps with non-string keys).
        let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        Self {
            status,
            headers,
            body: body.into(),
        }
    }

    /// An answer without a body.
    pub fn empty(status: StatusCode) -> Self {
        Self {
            status,
            headers: HeaderMap::new(),
            body: Bytes::new(),
        }
    }

    /// This answer with one more header.
    pub fn with_header(mut self, name: HeaderName, value: HeaderValue) -> Self {
        self.headers.insert(name, value);
        self
    }

    /// The response to send.
    pub fn response(&self) -> Response {
        let mut resp = http::Response::new(Body::from(self.body.clone()));
        *resp.status_mut() = self.status;
        *resp.headers_mut() = self.headers.clone();
        resp
    }
}

/// Most bytes of answer bodies kept at once (the cache is emptied when a new
/// answer would pass it).
const CAPACITY_BYTES: usize = 32 * 1024 * 1024;
/// Largest answer body kept.
const LARGEST_KEPT: usize = 1024 * 1024;

struct Entry {
    counter: u64,
    second: u64,
    answer: Answer,
}

#[derive(Default)]
struct Entries {
    by_key: HashMap<String, Entry>,
    bytes: usize,
}

/// Answers made lately, by route (see the module documentation).
#[derive(Default)]
pub struct AnswerCache {
    entries: Mutex<Entries>,
}

/// A copy starts empty: a registry cloned to be configured otherwise (another
/// hostname or public URL) must not answer with the original's answers.
impl Clone for AnswerCache {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl std::fmt::Debug for AnswerCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AnswerCache(..)")
    }
}

impl AnswerCache {
    /// The answer kept for `key`, if it was made under this change counter
    /// and in this second.
    pub fn get(&self, key: &str, counter: u64, second: u64) -> Option<Answer> {
        let entries = self.entries.lock().ok()?;
        let entry = entries.by_key.get(key)?;
        (entry.counter == counter && entry.second == second).then(|| entry.answer.clone())
    }

    /// Keep `answer` for `key`, made from reads that followed the change
    /// counter reading `counter`, in `second`.
    pub fn put(&self, key: &str, counter: u64, second: u64, answer: &Answer) {
        let size = answer.body.len() + key.len();
        if answer.body.len() > LARGEST_KEPT {
            return;
        }
        let Ok(mut entries) = self.entries.lock() else {
            return;
        };
        if entries.bytes + size > CAPACITY_BYTES {
            entries.by_key.clear();
            entries.bytes = 0;
        }
        let entry = Entry {
            counter,
            second,
            answer: answer.clone(),
        };
        let replaced = match entries.by_key.get_mut(key) {
            Some(old) => Some(std::mem::replace(old, entry)),
            None => {
                entries.by_key.insert(key.to_string(), entry);
                None
            }
        };
        let freed = replaced.map_or(0, |old| old.answer.body.len() + key.len());
        entries.bytes = entries.bytes + size - freed;
    }

    /// How many answers are kept (tests).
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.by_key.len())
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> Answer {
        Answer::json(StatusCode::OK, &text)
    }

    #[test]
    fn an_answer_is_kept_only_under_its_counter_and_second() {
        let cache = AnswerCache::default();
        assert!(cache.get("/a", 1, 10).is_none());
        cache.put("/a", 1, 10, &answer("one"));
        assert_eq!(cache.get("/a", 1, 10).unwrap().body, "\"one\"");
        assert!(cache.get("/a", 2, 10).is_none(), "the store changed");
        assert!(cache.get("/a", 1, 11).is_none(), "a second later");
        assert!(cache.get("/b", 1, 10).is_none(), "another route");
        cache.put("/a", 2, 10, &answer("two"));
        assert_eq!(cache.get("/a", 2, 10).unwrap().body, "\"two\"");
        assert!(cache.get("/a", 1, 10).is_none());
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn the_cache_stays_within_its_bytes() {
        let cache = AnswerCache::default();
        let big = Answer {
            body: Bytes::from(vec![b'x'; LARGEST_KEPT]),
            ..Answer::empty(StatusCode::OK)
        };
        for i in 0..(2 * CAPACITY_BYTES / LARGEST_KEPT) {
            cache.put(&format!("/{i}"), 0, 0, &big);
            let bytes = cache.entries.lock().unwrap().bytes;
            assert!(bytes <= CAPACITY_BYTES, "{bytes}");
        }
        let huge = Answer {
            body: Bytes::from(vec![b'x'; LARGEST_KEPT + 1]),
            ..Answer::empty(StatusCode::OK)
        };
        cache.put("/huge", 0, 0, &huge);
        assert!(cache.get("/huge", 0, 0).is_none(), "too large to keep");
    }
}
