//! The journal: the user's handle over a store.

pub(crate) mod intent;
pub(crate) mod records;

use std::any::Any;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::format::TailDamage;
use crate::format::{DEFAULT_MAX_EVENT_BYTES, ajournal as file};
use crate::model::SessionId;
use crate::snapshot::CheckpointStrategy;
use crate::state::SliceRegistry;
use crate::store::poison::Poison;
use crate::store::{Durability, Loss, Store, SyncStats, Visit, memory, sled};

/// A function called after every append is durable, with the session and
/// the seqs of the first and last event appended. For crash injection in
/// tests and demos (abort "right after event N is durable"), and metrics.
pub type AfterAppend = std::sync::Arc<dyn Fn(SessionId, u64, u64) + Send + Sync>;

/// Settings of a journal. Build with `JournalConfig::default()` and adjust.
#[derive(Clone)]
pub struct JournalConfig {
    /// Durability of each append. Default: [`Durability::Synced`].
    pub durability: Durability,
    /// Largest encoded event, in bytes; larger ones are refused before
    /// anything is written. Default: 16 MiB.
    pub max_event_bytes: u64,
    /// Largest snapshot, in bytes; a larger state is simply not cached.
    /// Default: 4 GiB.
    pub max_snapshot_bytes: u64,
    /// When snapshots are written. Default: [`CheckpointStrategy::default()`]
    /// (`Incremental` every 8,192 events: a whole snapshot, then deltas, so
    /// an open replays fewer than 8,192 events and the snapshot bytes stay
    /// about the final state's).
    pub checkpoint: CheckpointStrategy,
    /// Application slices folded into every session's state. Default: none.
    pub slices: SliceRegistry,
    /// Create the database if the path does not exist. Default: `true`.
    pub create_if_missing: bool,
    /// sled page-cache size in bytes. Default: 512 MiB.
    pub cache_bytes: u64,
    /// Compress the pages of a database this open creates (sled's zstd
    /// compression). On the benchmark's agent steps (row 15 of
    /// `cargo bench --bench journal`) the database is about 2.4x smaller,
    /// and sled inserts cost about 3x the CPU (a `Buffered` append is that
    /// much slower; a `Synced` one from one writer is not, 16 writers are
    /// held to what the insert thread keeps up with). A database keeps the
    /// setting it was created with, whatever later opens say;
    /// [`Journal::compact_to_with`] rewrites it the other way. Default:
    /// `false`.
    pub compress: bool,
    /// Bytes of events the sled store packs into one compressed block.
    /// Consecutive appends of a session go into sled together, as runs of
    /// up to 7 KiB; once a session's runs add up to this much, a thread of
    /// the store compresses them (zstd, level 1) into a block in a segment
    /// file under `frames/` and sled keeps one pointer to it
    /// (`docs/format.md`, "Runs and blocks"). Larger blocks compress
    /// better; reading any event of a block decompresses it whole. `0`
    /// keeps every run in sled, uncompressed. The setting applies to what
    /// this open writes: every database reads whatever it holds. Default:
    /// 128 KiB.
    pub block_bytes: usize,
    /// Called after each append is durable. Default: none.
    pub after_append: Option<AfterAppend>,
    /// While this process has a sled database open, serve it read-only to
    /// other local processes ([`Journal::attach`]) over a Unix socket in
    /// the database folder, `readers.sock`. Default: `true` (on Unix).
    pub serve_readers: bool,
}

impl std::fmt::Debug for JournalConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalConfig")
            .field("durability", &self.durability)
            .field("max_event_bytes", &self.max_event_bytes)
            .field("max_snapshot_bytes", &self.max_snapshot_bytes)
            .field("checkpoint", &self.checkpoint)
            .field("slices", &self.slices)
            .field("create_if_missing", &self.create_if_missing)
            .field("cache_bytes", &self.cache_bytes)
            .field("compress", &self.compress)
            .field("block_bytes", &self.block_bytes)
            .field("after_append", &self.after_append.as_ref().map(|_| "Fn"))
            .field("serve_readers", &self.serve_readers)
            .finish()
    }
}

impl JournalConfig {
    /// The default of [`JournalConfig::block_bytes`].
    pub const DEFAULT_BLOCK_BYTES: usize = 128 << 10;
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            durability: Durability::Synced,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_snapshot_bytes: 4 << 30,
            checkpoint: CheckpointStrategy::default(),
            slices: SliceRegistry::default(),
            create_if_missing: true,
            cache_bytes: 512 << 20,
            compress: false,
            block_bytes: JournalConfig::DEFAULT_BLOCK_BYTES,
            after_append: None,
            serve_readers: true,
        }
    }
}

/// What `Journal::sessions_info` reports for one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionInfo {
    /// The session.
    pub id: SessionId,
    /// When its first event was appended.
    pub created: DateTime<Utc>,
    /// When its last event was appended.
    pub last_activity: DateTime<Utc>,
    /// Number of events.
    pub events: u64,
    /// Its labels.
    pub labels: Vec<(String, String)>,
    /// Running (unfinished evaluation), finished, or empty.
    pub status: SessionStatus,
    /// For a fork: the session it branches from and the last seq of that
    /// session it includes.
    pub forked_from: Option<(SessionId, u64)>,
}

/// Whether a session's latest evaluation finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStatus {
    /// No evaluation (or conversation turn) was ever started.
    Idle,
    /// The latest evaluation (or a conversation turn) has not finished: it
    /// is running in this process, or its process stopped (crashed) before
    /// finishing it.
    Unfinished,
    /// The latest evaluation (or every conversation turn) finished.
    Finished,
}

pub(crate) struct Inner {
    /// The read service of a sled database (dropped first: it stops its
    /// threads before the store closes).
    #[cfg(unix)]
    readers: Option<crate::store::sled::reader::ReadService>,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) config: JournalConfig,
    path: Option<PathBuf>,
    /// The sessions open in this journal, so that handles to one session
    /// share its state. Kept by the session layer (`session/open.rs`),
    /// which alone knows the type behind each entry.
    pub(crate) open: Mutex<HashMap<SessionId, Weak<dyn Any + Send + Sync>>>,
    file_tail: Option<TailDamage>,
    /// Set by the first failed write or flush: later writes are refused,
    /// whatever the store, because what was acknowledged can no longer be
    /// promised. A sled store shares it.
    pub(crate) poison: Poison,
    /// The private folder holding the copy this journal reads
    /// ([`Journal::open_private_copy`]); removed when the journal closes
    /// (the last field: dropped after the store).
    _scratch: Option<crate::store::private::PrivateDir>,
    /// Where a damaged database was kept when the open rebuilt it
    /// ([`Journal::rebuilt_from`]).
    rebuilt: Option<PathBuf>,
}

impl Inner {
    /// Runs a write on the store: the one gate of every write path
    /// (appends, flushes, deletions, imports). Refused with
    /// [`Error::Poisoned`](crate::Error::Poisoned) once a write has failed; a failure of the disk or
    /// the store (I/O, storage, a failed flush) poisons the journal.
    pub(crate) fn write<T>(&self, f: impl FnOnce(&dyn Store) -> Result<T>) -> Result<T> {
        self.poison.check()?;
        let result = f(&*self.store);
        if let Err(e) = &result {
            self.poison.note(e);
        }
        result
    }

    /// Flushes at the configured durability, through [`Inner::write`].
    pub(crate) fn flush_configured(&self) -> Result<()> {
        self.write(|store| store.flush(self.config.durability))
    }
}

/// An open journal: one sled database directory, an exported `.ajournal`
/// file (read-only), or memory. Cheap to clone; `Send + Sync`.
///
/// Only one process may open a sled database at a time: a second one gets
/// [`Error::Locked`](crate::Error::Locked), and may read it meanwhile with
/// [`Journal::attach`].
#[derive(Clone)]
pub struct Journal {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("store", &self.inner.store.kind())
            .field("path", &self.inner.path)
            .finish()
    }
}

/// True if `s` names a PostgreSQL journal.
fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgres://") || s.starts_with("postgresql://")
}

impl Journal {
    /// Opens the journal at `path` with the default configuration, creating
    /// a database there if nothing exists.
    ///
    /// `path` is a database directory, or an exported `.ajournal` file (opened
    /// read-only).
    ///
    /// # Errors
    /// [`Error::Locked`](crate::Error::Locked) if another process has the database open;
    /// [`Error::NotAJournal`](crate::Error::NotAJournal) if the path holds something else;
    /// [`Error::Corruption`](crate::Error::Corruption) if an exported file is damaged before its end.
    pub fn open(path: impl AsRef<Path>) -> Result<Journal> {
        Self::open_with(path, JournalConfig::default())
    }

    /// Opens the journal at `path` with `config`. See [`Journal::open`].
    pub fn open_with(path: impl AsRef<Path>, config: JournalConfig) -> Result<Journal> {
        let path = path.as_ref();
        if let Some(url) = path.to_str().filter(|s| is_postgres_url(s)) {
            return Self::open_postgres(url, config);
        }
        if path.is_file() && file::looks_like_journal_file(path) {
            let (f, index) = file::read_file(path, config.max_event_bytes)?;
            let tail = index.tail.clone();
            let store = Arc::new(crate::store::file::FileStore::new(
                f,
                path.to_owned(),
                index,
            ));
            return Ok(Self::build(
                store,
                config,
                Some(path.to_owned()),
                tail,
                Poison::default(),
            ));
        }
        let poison = Poison::default();
        let (store, rebuilt) = Self::open_sled(path, &config, &poison)?;
        let store: Arc<dyn Store> = Arc::new(store);
        let mut journal = Self::build(store, config, Some(path.to_owned()), None, poison);
        if let Some(inner) = Arc::get_mut(&mut journal.inner) {
            inner.rebuilt = rebuilt;
        }
        #[cfg(unix)]
        if journal.inner.config.serve_readers {
            let service = crate::store::sled::reader::ReadService::start(
                path,
                Arc::downgrade(&journal.inner.store),
            );
            if let Some(inner) = Arc::get_mut(&mut journal.inner) {
                inner.readers = service;
            }
        }
        journal.roll_back_interrupted_import_at_open()?;
        Ok(journal)
    }

    /// Opens the sled store at `path`. A database sled refuses, or whose
    /// tree lost events the acknowledgement log says were acknowledged, or whose
    /// sessions cannot be listed, is rebuilt from the journal's own durable
    /// records when they hold every acknowledged event
    /// (`store/sled/rebuild.rs`), then opened; returns where the damaged
    /// one was kept, if it was.
    fn open_sled(
        path: &Path,
        config: &JournalConfig,
        poison: &Poison,
    ) -> Result<(sled::Guarded, Option<PathBuf>)> {
        let open = || {
            sled::Guarded::open(
                path,
                config.create_if_missing,
                config.cache_bytes,
                config.compress,
                config.durability == Durability::Synced,
                config.block_bytes,
                poison.clone(),
            )
        };
        let cause = match open() {
            Ok(store) => {
                let damaged = !store.losses().is_empty()
                    || matches!(store.sessions(), Err(ref e) if e.is_corruption());
                if !damaged {
                    return Ok((store, None));
                }
                drop(store);
                None
            }
            Err(e) if e.is_corruption() => Some(e),
            Err(e) => return Err(e),
        };
        let settings = sled::rebuild::Settings {
            limit: config.max_event_bytes,
            compress: crate::store::sled::compressed(path).unwrap_or(config.compress),
            cache_bytes: config.cache_bytes,
            block_bytes: config.block_bytes,
        };
        let kept = match sled::rebuild::rebuild(path, &settings) {
            Ok(kept) => kept,
            // The rebuild failed (a full disk): the damage is what to report.
            Err(e) => match cause {
                Some(cause) => return Err(cause),
                None => return Err(e),
            },
        };
        match (kept, cause) {
            (Some(kept), _) => {
                tracing::warn!(
                    "{}: rebuilt from the journal's own records (every acknowledged event \
                     was in them); the damaged database is kept as {}",
                    path.display(),
                    kept.display()
                );
                Ok((open()?, Some(kept)))
            }
            (None, Some(cause)) => Err(cause),
            (None, None) => Ok((open()?, None)),
        }
    }

    /// Where the damaged database was kept, if this open rebuilt it from
    /// the journal's own records: sled could not open it (or had lost
    /// acknowledged events) after a power cut, and every acknowledged event
    /// was still in the write-ahead log, the sealed segments or whole in
    /// sled's file. The rebuilt database holds them all; its snapshots are
    /// made again as it is used.
    pub fn rebuilt_from(&self) -> Option<&Path> {
        self.inner.rebuilt.as_deref()
    }

    /// Opens a private copy of the sled database at `path`, so that nothing
    /// done through the journal changes its files: not sled's repair of a
    /// damaged log at open (it zeroes what follows the damage), not the
    /// roll-back of an interrupted import. Use it to look at a database
    /// without touching it: `verify` and `salvage` of the command line do.
    ///
    /// The files are copied into a new folder under the temporary directory
    /// (`$TMPDIR`) that only this user can read or write (made fresh with
    /// mode 0700 under an unpredictable name, links and special files left
    /// out), while a shared lock on the database keeps a writer from
    /// opening it; the folder is removed when the journal is dropped. What
    /// is appended to the original afterwards is not seen, and what is
    /// written through this journal goes to the copy and is lost with it.
    /// It needs as much free space in the temporary directory as the
    /// database takes. An exported `.ajournal` file or a PostgreSQL URL is
    /// opened as it is ([`Journal::open_with`]): nothing changes those.
    ///
    /// # Errors
    /// [`Error::Locked`](crate::Error::Locked) if a process has the
    /// database open (read it through [`Journal::attach`]);
    /// [`Error::NotAJournal`](crate::Error::NotAJournal) if there is no
    /// database at `path`; [`Error::Io`](crate::Error::Io) if it cannot be
    /// read or copied; those of [`Journal::open_with`] on the copy.
    pub fn open_private_copy(path: impl AsRef<Path>, config: JournalConfig) -> Result<Journal> {
        use crate::store::private;
        let path = path.as_ref();
        if !path.is_dir() {
            return Self::open_with(path, config);
        }
        let scratch = private::copy_database(path)?;
        let config = JournalConfig {
            create_if_missing: false,
            serve_readers: false,
            ..config
        };
        let mut journal = Self::open_with(scratch.path(), config)?;
        match Arc::get_mut(&mut journal.inner) {
            Some(inner) => inner._scratch = Some(scratch),
            // Never: the journal was just built and not shared. Keeping the
            // folder (and saying so) beats removing it under the store.
            None => std::mem::forget(scratch),
        }
        Ok(journal)
    }

    /// Opens, read-only, the sled database at `path` that another process
    /// of this machine has open, through that process's read service
    /// ([`JournalConfig::serve_readers`]): sessions, events, states and
    /// `verify` work as on a database opened here, and see the writer's
    /// appends as they land (`Session::refresh`); every write is refused.
    ///
    /// # Errors
    /// [`Error::Locked`](crate::Error::Locked) when no process serves the
    /// database (it does not run a read service, or it stopped);
    /// [`Error::Io`](crate::Error::Io) when this user may not connect (the
    /// socket's permissions are those of the database's files: a user who
    /// cannot read them cannot read through it);
    /// [`Error::Unsupported`](crate::Error::Unsupported) when the service
    /// is busy (64 readers at once), and off Unix.
    pub fn attach(path: impl AsRef<Path>) -> Result<Journal> {
        Self::attach_with(path, JournalConfig::default())
    }

    /// [`Journal::attach`] with `config` (its slices and limits apply).
    pub fn attach_with(path: impl AsRef<Path>, config: JournalConfig) -> Result<Journal> {
        let path = path.as_ref();
        #[cfg(unix)]
        {
            let store = crate::store::sled::reader::RemoteStore::connect(path)?;
            Ok(Self::build(
                Arc::new(store),
                config,
                Some(path.to_owned()),
                None,
                Poison::default(),
            ))
        }
        #[cfg(not(unix))]
        {
            let _ = config;
            Err(crate::error::Error::Unsupported(format!(
                "{}: live reads need Unix sockets",
                path.display()
            )))
        }
    }

    /// The journal in a PostgreSQL database (`postgres://` or
    /// `postgresql://`; the `schema=NAME` parameter picks the schema of its
    /// tables, default `agent_journal`), created there if missing. Any
    /// number of processes may open it at once; see `docs/postgres.md`.
    #[cfg(feature = "postgres")]
    fn open_postgres(url: &str, config: JournalConfig) -> Result<Journal> {
        let store = Arc::new(crate::store::postgres::PostgresStore::open(
            url,
            config.durability,
            config.create_if_missing,
        )?);
        Ok(Self::build(store, config, None, None, Poison::default()))
    }

    #[cfg(not(feature = "postgres"))]
    fn open_postgres(url: &str, _config: JournalConfig) -> Result<Journal> {
        let _ = url;
        Err(crate::error::Error::Unsupported(
            "this build has no PostgreSQL store (cargo feature `postgres`)".into(),
        ))
    }

    /// A journal in memory, with `Durability::Buffered` semantics: nothing
    /// survives the process.
    pub fn memory() -> Journal {
        Self::memory_with(JournalConfig::default())
    }

    /// A journal in memory with `config`.
    pub fn memory_with(config: JournalConfig) -> Journal {
        let store = Arc::new(memory::MemoryStore::new());
        Self::build(store, config, None, None, Poison::default())
    }

    /// A journal over any [`Store`] implementation.
    pub fn with_store(store: Arc<dyn Store>, config: JournalConfig) -> Journal {
        Self::build(store, config, None, None, Poison::default())
    }

    fn build(
        store: Arc<dyn Store>,
        config: JournalConfig,
        path: Option<PathBuf>,
        file_tail: Option<TailDamage>,
        poison: Poison,
    ) -> Journal {
        Journal {
            inner: Arc::new(Inner {
                #[cfg(unix)]
                readers: None,
                store,
                config,
                path,
                open: Mutex::new(HashMap::new()),
                file_tail,
                poison,
                _scratch: None,
                rebuilt: None,
            }),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &JournalConfig {
        &self.inner.config
    }

    /// The path it was opened from, if any.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// True for an exported file opened for reading.
    pub fn is_read_only(&self) -> bool {
        self.inner.store.read_only()
    }

    /// The damaged tail cut off when an exported file was read, if any.
    pub fn file_damage(&self) -> Option<&TailDamage> {
        self.inner.file_tail.as_ref()
    }

    /// The number of events stored for a session, without opening it
    /// (`None` if it does not exist).
    pub fn stream_len(&self, id: SessionId) -> Result<Option<u64>> {
        self.inner.store.len(id)
    }

    /// The ids of every session, in creation order. A session that a copy
    /// into this journal left in part (the copy stopped before its last
    /// event was durable) is not listed: `verify` reports it, and the next
    /// [`Journal::copy_to`] replaces it.
    pub fn sessions(&self) -> Result<Vec<SessionId>> {
        let mut ids = self.inner.store.sessions()?;
        let partial = self.incomplete_copies()?;
        if !partial.is_empty() {
            ids.retain(|id| !partial.contains(id));
        }
        Ok(ids)
    }

    /// Acknowledged events that were found missing when the journal was
    /// opened: sessions whose stream the store holds only up to
    /// [`Loss::held`] although [`Loss::acknowledged`] events were
    /// acknowledged (sled rolled its log back after damage, or lost files of
    /// its own; the write-ahead log no longer had them). Each is reported by
    /// the session as its damaged tail and by [`Journal::verify`], and
    /// stays reported until an append to the session cuts it off (or the
    /// session is deleted). Empty for a sound database.
    pub fn losses(&self) -> Vec<Loss> {
        self.inner.store.losses()
    }

    /// Makes everything appended so far survive power loss (a `Synced` flush).
    ///
    /// # Errors
    /// [`Error::Poisoned`](crate::Error::Poisoned) after an earlier failed write; a failure here
    /// poisons the journal.
    pub fn flush(&self) -> Result<()> {
        self.inner.write(|store| store.flush(Durability::Synced))
    }

    /// Bytes on disk (0 for memory and exported files).
    pub fn size_on_disk(&self) -> Result<u64> {
        self.inner.store.size_on_disk()
    }

    /// How the durable writes of this journal went since it was opened:
    /// writes of the write-ahead log and the appends each carried (group
    /// commit at work), their time, checkpoints and sled flushes.
    pub fn sync_stats(&self) -> SyncStats {
        self.inner.store.sync_stats()
    }

    /// Reads raw frames of a session, for tools that copy them verbatim.
    pub(crate) fn scan_frames(
        &self,
        id: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, &[u8]) -> Result<Visit>,
    ) -> Result<()> {
        self.inner.store.scan(id, from, to, visit)
    }

    /// [`scan_frames`](Self::scan_frames) with frames a reader may keep.
    pub(crate) fn scan_frames_shared(
        &self,
        id: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, crate::format::SharedBytes) -> Result<Visit>,
    ) -> Result<()> {
        self.inner.store.scan_shared(id, from, to, visit)
    }
}
