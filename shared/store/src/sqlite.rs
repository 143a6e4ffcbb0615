//! The embedded item store: SQLite (ACID, and several processes can share one
//! data directory, so `tfreg token create` works while `tfreg serve` runs).
//!
//! A database that is locked, read-only, full or failing answers
//! [`StoreError::Unavailable`] (503), never crashes the server, and is used
//! again as soon as it works: after such an error the connection is closed
//! and the next request opens a new one. The rollback journal, not WAL: WAL
//! maps its `-shm` index into memory, and a write to that mapping on a file
//! made read-only or a full disk kills the process with SIGBUS.
//!
//! Writes go through one read-write connection, on a blocking thread. Point
//! reads and query pages are served first on the caller's thread by an idle
//! read-only connection that never waits for a lock: the database is small
//! and in the page cache, so such a read takes microseconds, far less than a
//! hand-over to a blocking thread. When that connection cannot answer at
//! once (another connection holds a lock, a hot journal to roll back, any
//! failure), the read goes the writer's way, which waits and reports as
//! before. Every read is its own transaction, so a write shows at once.
//!
//! [`ItemStore::change_counter`]: this process's writes, counted as they
//! return, and SQLite's own file change counter (bytes 24..28 of the file,
//! which every committed write transaction of any process increments in
//! rollback-journal mode), read with one `pread` and no lock. `PRAGMA
//! data_version` would say the same but only inside a read transaction of
//! one connection, which is the cost the counter lets a cached answer skip.

use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use crate::{Add, Condition, Counter, Item, ItemStore, Page, ScanPage, StoreError};

/// A SQLite failure as a [`StoreError`]: a database that is busy, locked,
/// read-only, out of space or failing I/O is unavailable (503, retry later);
/// anything else (a corrupt file, a bad statement) is internal.
fn sqlite_error(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::*;
    match &e {
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(
                f.code,
                DatabaseBusy
                    | DatabaseLocked
                    | ReadOnly
                    | DiskFull
                    | SystemIoFailure
                    | CannotOpen
                    | FileLockingProtocolFailed
                    | OutOfMemory
            ) =>
        {
            StoreError::Unavailable(format!("sqlite: {e}"))
        }
        _ => StoreError::Internal(format!("sqlite: {e}")),
    }
}

/// How long a request waits for another process's lock before the database
/// counts as unavailable (503): short, the client retries.
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Items per query page. Small on purpose, so paging is exercised as it is on DynamoDB.
pub const PAGE_SIZE: usize = 100;

/// [`ItemStore`] on one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The file; `None` for an in-memory database (never reopened: it would be empty).
    path: Option<PathBuf>,
    /// The open connection; `None` after a failure that a new one may not have.
    conn: Mutex<Option<Connection>>,
    /// Idle read-only connections to `path`, for reads on the caller's thread.
    readers: Mutex<Vec<Connection>>,
    /// Writes through this store that have returned.
    writes: AtomicU64,
    /// The file, read-only, for its change counter; `None` in memory.
    header: Option<std::fs::File>,
}

/// Where SQLite keeps its file change counter (big-endian u32).
const CHANGE_COUNTER_OFFSET: u64 = 24;

/// Most idle read-only connections kept (one per thread reading at once is enough).
const IDLE_READERS: usize = 8;

/// A read-only connection that fails at once on a lock rather than wait:
/// it runs on an async worker thread.
fn open_reader(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sqlite_error)?;
    conn.busy_timeout(std::time::Duration::ZERO)
        .map_err(sqlite_error)?;
    Ok(conn)
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let conn = Self::connect(path)?;
        Ok(Self::with(Some(path.to_path_buf()), conn))
    }

    /// An in-memory store, for tests.
    pub fn in_memory() -> Result<Self, StoreError> {
        let conn = Connection::open_in_memory().map_err(sqlite_error)?;
        Ok(Self::with(None, init(conn)?))
    }

    fn with(path: Option<PathBuf>, conn: Connection) -> Self {
        // Without the file's counter only this process's writes would be
        // seen: then no counter at all (nothing is cached).
        let header = path.as_ref().and_then(|p| std::fs::File::open(p).ok());
        Self {
            inner: Arc::new(Inner {
                path,
                conn: Mutex::new(Some(conn)),
                readers: Mutex::new(Vec::new()),
                writes: AtomicU64::new(0),
                header,
            }),
        }
    }

    /// [`Self::with_conn`] for a write: counted once it has returned
    /// (committed or failed), for [`ItemStore::change_counter`].
    async fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let result = self.with_conn(f).await;
        self.inner.writes.fetch_add(1, Ordering::SeqCst);
        result
    }

    fn connect(path: &Path) -> Result<Connection, StoreError> {
        init(Connection::open(path).map_err(sqlite_error)?)
    }

    async fn with_conn<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = inner
                .conn
                .lock()
                .map_err(|_| StoreError::internal("database lock poisoned"))?;
            let conn = match (guard.as_mut(), &inner.path) {
                (Some(conn), _) => conn,
                (None, Some(path)) => guard.insert(Self::connect(path)?),
                (None, None) => return Err(StoreError::internal("in-memory database closed")),
            };
            let result = f(conn);
            if matches!(result, Err(StoreError::Unavailable(_))) && inner.path.is_some() {
                // Read-only, full, locked or failing: the next request starts afresh.
                *guard = None;
            }
            result
        })
        .await
        .map_err(StoreError::internal)?
    }

    /// Delete the items whose `expires_at` is before `now` (unix seconds);
    /// how many went.
    pub async fn sweep_expired(&self, now: u64) -> Result<usize, StoreError> {
        self.write(move |c| {
            c.execute(
                "DELETE FROM items WHERE expires_at IS NOT NULL AND expires_at < ?1",
                params![now as i64],
            )
            .map_err(sqlite_error)
        })
        .await
    }

    /// `read` at once on this thread with an idle read-only connection;
    /// `None` when that cannot answer (an in-memory database, a lock held
    /// elsewhere, any failure): the caller then reads through [`Self::with_conn`].
    fn read_now<T>(&self, read: impl FnOnce(&Connection) -> Result<T, StoreError>) -> Option<T> {
        let path = self.inner.path.as_ref()?;
        let idle = self.inner.readers.lock().ok()?.pop();
        let conn = match idle {
            Some(conn) => conn,
            None => open_reader(path).ok()?,
        };
        // A failed connection is dropped: the next read opens a new one.
        let found = read(&conn).ok()?;
        if let Ok(mut idle) = self.inner.readers.lock()
            && idle.len() < IDLE_READERS
        {
            idle.push(conn);
        }
        Some(found)
    }

    /// A read: on this thread if it can be answered at once, else on the
    /// writer's connection (waiting for locks, reporting failures).
    async fn read<T: Send + 'static>(
        &self,
        read: impl Fn(&Connection) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        match self.read_now(&read) {
            Some(found) => Ok(found),
            None => self.with_conn(move |c| read(c)).await,
        }
    }
}

/// The columns every read returns, in this order after any before them.
const COLUMNS: &str = "data, expires_at, touched_at, n, first_at, last_at";

/// An item of `pk`, `sk` from a row of [`COLUMNS`] starting at column `at`.
fn item_of(row: &rusqlite::Row<'_>, pk: &str, sk: String, at: usize) -> rusqlite::Result<Item> {
    let n: Option<i64> = row.get(at + 3)?;
    let counter = match n {
        Some(n) => Some(Counter {
            n: n.max(0) as u64,
            first_at: unix(row.get(at + 4)?).unwrap_or(0),
            last_at: unix(row.get(at + 5)?).unwrap_or(0),
        }),
        None => None,
    };
    Ok(Item {
        pk: pk.to_string(),
        sk,
        data: row.get(at)?,
        expires_at: unix(row.get(at + 1)?),
        touched_at: unix(row.get(at + 2)?),
        counter,
    })
}

/// The one item `sql` (with `pk`, `sk` as ?1, ?2) returns as [`COLUMNS`].
fn one_item(c: &Connection, sql: &str, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
    let mut stmt = c.prepare_cached(sql).map_err(sqlite_error)?;
    stmt.query_row(params![pk, sk], |row| item_of(row, pk, sk.to_string(), 0))
        .optional()
        .map_err(sqlite_error)
}

/// One page of `pk`'s items whose sort key starts with `prefix`, after `after`.
fn page(c: &Connection, pk: &str, prefix: &str, after: Option<&str>) -> Result<Page, StoreError> {
    let mut stmt = c
        .prepare_cached(
            "SELECT sk, data, expires_at, touched_at, n, first_at, last_at FROM items
             WHERE pk = ?1 AND substr(sk, 1, ?2) = ?3 AND (?4 IS NULL OR sk > ?4)
             ORDER BY sk LIMIT ?5",
        )
        .map_err(sqlite_error)?;
    let rows = stmt
        .query_map(
            params![
                pk,
                prefix.chars().count() as i64,
                prefix,
                after,
                PAGE_SIZE as i64 + 1
            ],
            |row| item_of(row, pk, row.get(0)?, 1),
        )
        .map_err(sqlite_error)?;
    let mut items = rows.collect::<Result<Vec<_>, _>>().map_err(sqlite_error)?;
    let next = if items.len() > PAGE_SIZE {
        items.truncate(PAGE_SIZE);
        items.last().map(|i| i.sk.clone())
    } else {
        None
    };
    Ok(Page { items, next })
}

/// One page of every item, in key order, after `after`.
fn scan(c: &Connection, after: Option<(&str, &str)>) -> Result<ScanPage, StoreError> {
    let (pk, sk) = after.unzip();
    let mut stmt = c
        .prepare_cached(
            "SELECT pk, sk, data, expires_at, touched_at, n, first_at, last_at FROM items
             WHERE ?1 IS NULL OR pk > ?1 OR (pk = ?1 AND sk > ?2)
             ORDER BY pk, sk LIMIT ?3",
        )
        .map_err(sqlite_error)?;
    let rows = stmt
        .query_map(params![pk, sk, SCAN_PAGE_SIZE as i64 + 1], |row| {
            let pk: String = row.get(0)?;
            item_of(row, &pk, row.get(1)?, 2)
        })
        .map_err(sqlite_error)?;
    let mut items = rows.collect::<Result<Vec<_>, _>>().map_err(sqlite_error)?;
    let next = if items.len() > SCAN_PAGE_SIZE {
        items.truncate(SCAN_PAGE_SIZE);
        items.last().map(|i| (i.pk.clone(), i.sk.clone()))
    } else {
        None
    };
    Ok(ScanPage { items, next })
}

/// Items per page of a whole-store read.
const SCAN_PAGE_SIZE: usize = 1000;

/// A time or count as SQLite's integer (past i64 is as good as never).
fn clamp(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

fn unix(t: Option<i64>) -> Option<u64> {
    t.map(|t| t.max(0) as u64)
}

/// Settings and schema of a new connection.
fn init(conn: Connection) -> Result<Connection, StoreError> {
    conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite_error)?;
    conn.execute_batch(
        "PRAGMA journal_mode=DELETE;
         PRAGMA synchronous=FULL;
         CREATE TABLE IF NOT EXISTS items (
             pk TEXT NOT NULL,
             sk TEXT NOT NULL,
             data BLOB NOT NULL,
             expires_at INTEGER,
             PRIMARY KEY (pk, sk)
         ) WITHOUT ROWID;",
    )
    .map_err(sqlite_error)?;
    // A database made before items could expire, be touched or count: add the columns.
    for column in ["expires_at", "touched_at", "n", "first_at", "last_at"] {
        let present: bool = conn
            .query_row(
                "SELECT COUNT(*) FROM pragma_table_info('items') WHERE name = ?1",
                [column],
                |row| row.get::<_, i64>(0),
            )
            .map_err(sqlite_error)?
            > 0;
        if !present {
            conn.execute_batch(&format!("ALTER TABLE items ADD COLUMN {column} INTEGER;"))
                .map_err(sqlite_error)?;
        }
    }
    Ok(conn)
}

#[async_trait]
impl ItemStore for SqliteStore {
    async fn get(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let (pk, sk) = (pk.to_string(), sk.to_string());
        self.read(move |c| {
            one_item(
                c,
                &format!("SELECT {COLUMNS} FROM items WHERE pk = ?1 AND sk = ?2"),
                &pk,
                &sk,
            )
        })
        .await
    }

    async fn query_page(
        &self,
        pk: &str,
        sk_prefix: &str,
        start_after: Option<&str>,
    ) -> Result<Page, StoreError> {
        let (pk, prefix) = (pk.to_string(), sk_prefix.to_string());
        let after = start_after.map(str::to_string);
        self.read(move |c| page(c, &pk, &prefix, after.as_deref()))
            .await
    }

    async fn scan_page(&self, start_after: Option<(&str, &str)>) -> Result<ScanPage, StoreError> {
        let after = start_after.map(|(p, s)| (p.to_string(), s.to_string()));
        self.read(move |c| scan(c, after.as_ref().map(|(p, s)| (p.as_str(), s.as_str()))))
            .await
    }

    async fn put(&self, item: Item, condition: Condition) -> Result<(), StoreError> {
        self.write(move |c| {
            // Past i64 is as good as never (not negative: swept at once).
            let expires_at = item
                .expires_at
                .map(|t| i64::try_from(t).unwrap_or(i64::MAX));
            let touched_at = item.touched_at.map(clamp);
            let counter = item.counter;
            let (n, first_at, last_at) = (
                counter.map(|c| clamp(c.n)),
                counter.map(|c| clamp(c.first_at)),
                counter.map(|c| clamp(c.last_at)),
            );
            let row = params![
                item.pk, item.sk, item.data, expires_at, touched_at, n, first_at, last_at
            ];
            let changed = match condition {
                Condition::Always => c.execute(
                    "INSERT OR REPLACE INTO items
                     (pk, sk, data, expires_at, touched_at, n, first_at, last_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    row,
                ),
                Condition::IfAbsent => c.execute(
                    "INSERT OR IGNORE INTO items
                     (pk, sk, data, expires_at, touched_at, n, first_at, last_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    row,
                ),
                Condition::IfUnchanged(old) => c.execute(
                    "UPDATE items SET data = ?3, expires_at = ?4, touched_at = ?5,
                     n = ?6, first_at = ?7, last_at = ?8
                     WHERE pk = ?1 AND sk = ?2 AND data = ?9",
                    params![
                        item.pk, item.sk, item.data, expires_at, touched_at, n, first_at, last_at,
                        old
                    ],
                ),
            }
            .map_err(sqlite_error)?;
            if changed == 0 {
                return Err(StoreError::ConditionFailed);
            }
            Ok(())
        })
        .await
    }

    async fn take(&self, pk: &str, sk: &str) -> Result<Option<Item>, StoreError> {
        let (pk, sk) = (pk.to_string(), sk.to_string());
        self.write(move |c| {
            one_item(
                c,
                &format!("DELETE FROM items WHERE pk = ?1 AND sk = ?2 RETURNING {COLUMNS}"),
                &pk,
                &sk,
            )
        })
        .await
    }

    async fn touch(
        &self,
        pk: &str,
        sk: &str,
        at: u64,
        unless_after: u64,
    ) -> Result<bool, StoreError> {
        let (pk, sk) = (pk.to_string(), sk.to_string());
        self.write(move |c| {
            c.execute(
                "UPDATE items SET touched_at = ?3 WHERE pk = ?1 AND sk = ?2
                 AND (touched_at IS NULL OR touched_at < ?4)",
                params![pk, sk, at as i64, unless_after as i64],
            )
            .map(|n| n > 0)
            .map_err(sqlite_error)
        })
        .await
    }

    async fn add(&self, add: Add) -> Result<(), StoreError> {
        self.write(move |c| {
            // One statement, so one transaction: the sum is exact however
            // many processes add at once (each waits for the write lock).
            c.execute(
                "INSERT INTO items (pk, sk, data, expires_at, n, first_at, last_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
                 ON CONFLICT (pk, sk) DO UPDATE SET
                     n = coalesce(n, 0) + excluded.n,
                     first_at = coalesce(first_at, excluded.first_at),
                     last_at = excluded.last_at,
                     data = excluded.data,
                     expires_at = coalesce(excluded.expires_at, expires_at)",
                params![
                    add.pk,
                    add.sk,
                    add.data,
                    add.expires_at.map(clamp),
                    clamp(add.by),
                    clamp(add.at)
                ],
            )
            .map(|_| ())
            .map_err(sqlite_error)
        })
        .await
    }

    fn change_counter(&self) -> Option<u64> {
        let writes = self.inner.writes.load(Ordering::SeqCst);
        let file = match (&self.inner.header, &self.inner.path) {
            (Some(file), _) => {
                let mut counter = [0u8; 4];
                file.read_exact_at(&mut counter, CHANGE_COUNTER_OFFSET)
                    .ok()?;
                u32::from_be_bytes(counter)
            }
            // In memory: no other process can write it.
            (None, None) => 0,
            (None, Some(_)) => return None,
        };
        Some((writes << 32) | u64::from(file))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn expired_items_are_swept_and_only_they() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("db")).unwrap();
        for (sk, expiry) in [("old", Some(100)), ("new", Some(300)), ("kept", None)] {
            let item = Item::new("P", sk, b"x".to_vec());
            let item = match expiry {
                Some(at) => item.expiring_at(at),
                None => item,
            };
            store.put(item, Condition::IfAbsent).await.unwrap();
        }
        assert_eq!(store.sweep_expired(200).await.unwrap(), 1);
        let left = crate::query_all(&store, "P", "").await.unwrap();
        let left: Vec<&str> = left.iter().map(|i| i.sk.as_str()).collect();
        assert_eq!(left, ["kept", "new"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_see_each_write_at_once_and_wait_out_a_lock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = SqliteStore::open(&path).unwrap();
        let read = |store: SqliteStore| async move {
            store.get("P", "S").await.unwrap().map(|item| item.data)
        };
        assert_eq!(read(store.clone()).await, None);
        store
            .put(Item::new("P", "S", b"1".to_vec()), Condition::IfAbsent)
            .await
            .unwrap();
        assert_eq!(read(store.clone()).await, Some(b"1".to_vec()));
        assert_eq!(
            store.inner.readers.lock().unwrap().len(),
            1,
            "the reads were answered by a kept read-only connection"
        );
        store
            .put(Item::new("P", "S", b"2".to_vec()), Condition::Always)
            .await
            .unwrap();
        assert_eq!(
            read(store.clone()).await,
            Some(b"2".to_vec()),
            "no stale read"
        );
        // Another process writing: the read cannot be answered at once, so it
        // waits for the lock (as reads always did) and then sees the write.
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("BEGIN EXCLUSIVE; UPDATE items SET data = x'33';")
            .unwrap();
        let reading = tokio::spawn(read(store.clone()));
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            !reading.is_finished(),
            "a read does not pass an exclusive lock"
        );
        other.execute_batch("COMMIT").unwrap();
        assert_eq!(reading.await.unwrap(), Some(b"3".to_vec()));
    }

    #[tokio::test]
    async fn the_change_counter_moves_with_every_write_here_or_in_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let store = SqliteStore::open(&path).unwrap();
        let start = store.change_counter().expect("a file's store counts");
        store.get("P", "S").await.unwrap();
        assert_eq!(
            store.change_counter(),
            Some(start),
            "a read changes nothing"
        );
        store
            .put(Item::new("P", "S", b"1".to_vec()), Condition::IfAbsent)
            .await
            .unwrap();
        let written = store.change_counter().unwrap();
        assert_ne!(written, start, "a write here");
        // Another process: a connection this store knows nothing of.
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("UPDATE items SET data = x'32'")
            .unwrap();
        let elsewhere = store.change_counter().unwrap();
        assert_ne!(elsewhere, written, "a write committed elsewhere");
        store.touch("P", "S", 5, 5).await.unwrap();
        assert_ne!(store.change_counter().unwrap(), elsewhere, "a touch");
        // In memory: this store's writes only (no other process sees it).
        let memory = SqliteStore::in_memory().unwrap();
        let start = memory.change_counter().expect("counted in memory too");
        memory
            .put(Item::new("P", "S", b"1".to_vec()), Condition::Always)
            .await
            .unwrap();
        assert_ne!(memory.change_counter().unwrap(), start);
    }

    #[test]
    fn a_database_from_before_expiry_gains_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let old = Connection::open(&path).unwrap();
        old.execute_batch(
            "PRAGMA journal_mode=WAL;
             CREATE TABLE items (pk TEXT NOT NULL, sk TEXT NOT NULL, data BLOB NOT NULL,
                                 PRIMARY KEY (pk, sk)) WITHOUT ROWID;
             INSERT INTO items VALUES ('P', 'S', x'01');",
        )
        .unwrap();
        drop(old);
        let store = SqliteStore::open(&path).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let item = rt.block_on(store.get("P", "S")).unwrap().unwrap();
        assert_eq!((item.data, item.expires_at), (vec![1], None));
        let mode: String = Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete", "WAL (and its memory-mapped index) is gone");
    }
}
