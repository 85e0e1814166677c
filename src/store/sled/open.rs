//! Opening and creating a sled database: the format marker, the file that
//! marks a creation in progress, sled's file lock, and the write-ahead log
//! replayed at every open.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use super::fault::storage;
use super::{Sealer, SledStore};
use crate::error::{Error, Result};
use crate::store::fs::sync_dir;
use crate::store::poison::Poison;
use crate::store::sled::acks::AckLog;
use crate::store::sled::applier::Applier;
use crate::store::sled::frame_files::FrameFiles;
use crate::store::sled::group_commit::GroupCommit;
use crate::store::sled::keys::key;
use crate::store::sled::snapfiles;
use crate::store::sled::snapfiles::SnapFiles;
use crate::store::sled::wal::Wal;

/// Where the database's layout version is kept, in tree `meta`.
const FORMAT_KEY: &[u8] = b"format";

/// The layout this build reads and writes (runs, blocks and segments;
/// `docs/format.md`). A database marked otherwise is refused.
const FORMAT_VALUE: &[u8] = b"agent-journal 1";

/// The zstd level of a compressed database's pages. Level 1: sled
/// compresses every log write on its own (a new zstd context each time),
/// and at sled's default (5) `Buffered` appends of the benchmark's agent
/// steps ran at 0.82x the rate of level 1 for 3% fewer bytes.
const COMPRESSION_LEVEL: i32 = 1;

/// Whether the sled database at `path` compresses its pages, as its `conf`
/// file says (sled refuses to open it with the other setting); `None`
/// without a `conf` that says (a new database, or one whose `conf` sled
/// writes again).
pub(crate) fn compressed(path: &Path) -> Option<bool> {
    let conf = std::fs::read(path.join("conf")).unwrap_or_default();
    String::from_utf8_lossy(&conf).lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "use_compression").then(|| v.trim() == "true")
    })
}

/// Opens the sled database, retrying the file lock for up to ~1 s: when a
/// handle of this same process was just dropped, sled's thread-pool tasks may
/// hold the database file (and its lock) for a few more milliseconds.
///
/// A database is opened as it was made, compressed or not (its `conf`
/// says); a new one compresses its pages if `compress`.
fn open_db(path: &Path, cache_bytes: u64, compress: bool) -> Result<sled::Db> {
    let compressed = compressed(path).unwrap_or(compress);
    let mut wait = std::time::Duration::from_millis(5);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    loop {
        let r = sled::Config::new()
            .path(path)
            .cache_capacity(cache_bytes)
            .mode(sled::Mode::HighThroughput)
            .use_compression(compressed)
            .compression_factor(COMPRESSION_LEVEL)
            .open();
        match r {
            Ok(db) => return Ok(db),
            Err(sled::Error::Io(io)) if io.to_string().contains("could not acquire lock") => {
                if std::time::Instant::now() >= deadline {
                    return Err(Error::Locked {
                        path: path.to_owned(),
                    });
                }
                std::thread::sleep(wait);
                wait = (wait * 2).min(std::time::Duration::from_millis(100));
            }
            Err(other) => return Err(storage(other, &format!("opening {}", path.display()))),
        }
    }
}

/// Removes the unfinished snapshots of sled's own page cache in `path`
/// (`snap.<lsn>.generating`); returns whether there were any.
///
/// sled 0.34 writes its snapshot to `snap.<lsn>.generating`, syncs it, then
/// renames it to `snap.<lsn>`; a process killed before the rename leaves the
/// `.generating` file, which sorts after every finished snapshot, so the
/// next open picks it, finds its crc wrong, and refuses the whole database
/// (`Corruption`, sled issue #1527). The file is never needed: the previous
/// snapshot is still there (sled removes old ones after the rename) with the
/// log after it. Found by the kill harness (one round in ~2,500).
fn remove_unfinished_sled_snapshots(path: &Path) -> Result<bool> {
    let Ok(entries) = std::fs::read_dir(path) else {
        return Ok(false);
    };
    let mut any = false;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if name.starts_with("snap.") && name.ends_with(".generating") {
            std::fs::remove_file(entry.path())
                .map_err(|e| Error::io(format!("removing {}", entry.path().display()), e))?;
            any = true;
        }
    }
    Ok(any)
}

/// The file that marks a database being created, from before sled writes
/// anything until the format marker is durable. A crash in between leaves a
/// database that sled may open as empty: with this file there, it is a
/// creation to finish; without it, an empty database whose `db` file was
/// already there is one that sled rolled back, and is refused (stamping it
/// would pass off lost events as a new journal).
const CREATING: &str = "agent-journal.creating";

/// Creates the database directory if needed and the [`CREATING`] file in
/// it, both durable before sled writes its first byte there.
fn mark_creating(path: &Path, creating: &Path) -> Result<()> {
    std::fs::create_dir_all(path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    File::create(creating).map_err(|e| Error::io(format!("creating {}", creating.display()), e))?;
    sync_dir(path)?;
    // The directory's own entry, where it was just made: best effort (a
    // parent we may write in but not open for reading is no reason to
    // refuse a new database).
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = sync_dir(parent);
    }
    Ok(())
}

/// Makes the stamped database durable (sled's file synced), then removes
/// the [`CREATING`] file.
fn finish_creating(path: &Path, creating: &Path) -> Result<()> {
    File::open(path.join("db"))
        .and_then(|f| f.sync_data())
        .map_err(|e| Error::io(format!("fdatasync of {}/db", path.display()), e))?;
    sync_conf(path)?;
    match std::fs::remove_file(creating) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(format!("removing {}", creating.display()), e)),
    }
    sync_dir(path)
}

/// Syncs sled's `conf` file, which sled writes (at creation, and again when
/// it finds it empty) and never syncs: a power loss could leave it cut
/// short, and sled then refuses the database.
fn sync_conf(path: &Path) -> Result<()> {
    match File::open(path.join("conf")).and_then(|f| f.sync_all()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("fsync of {}/conf", path.display()), e)),
    }
}

impl SledStore {
    /// Opens (or creates, if `create`) the database directory at `path`;
    /// a database it creates compresses its pages if `compress`.
    ///
    /// With `wal_appends`, appends are also written to the write-ahead log
    /// and a `Synced` flush syncs only the log (the journal's durability is
    /// `Synced`). Whatever it is, a log left by an earlier process is
    /// replayed into sled. Every failed write or sync poisons `poison` (the
    /// journal's).
    pub(crate) fn open(
        path: &Path,
        create: bool,
        cache_bytes: u64,
        compress: bool,
        wal_appends: bool,
        block_bytes: usize,
        poison: Poison,
    ) -> Result<Self> {
        let existed = path.exists();
        // A creation that a crash interrupted: the file says so (see
        // `CREATING`), and the database may be stamped now.
        let creating = path.join(CREATING);
        let interrupted = creating.is_file();
        // Whether sled's data file was there before we opened it: a database
        // that sled rolls back to empty (damage at the start of its log) must
        // not be mistaken for a new one and stamped.
        let had_db_file = path.join("db").is_file()
            && std::fs::metadata(path.join("db"))
                .map(|m| m.len() > 0)
                .unwrap_or(false);
        if existed {
            if !path.is_dir() {
                return Err(Error::NotAJournal {
                    path: path.to_owned(),
                    reason: "a file that is not an exported journal (.ajournal)".into(),
                });
            }
            // Another user who may write into the folder could swap a file
            // sled or the journal is about to write for a link to one of
            // ours: such a database is not opened for writing.
            crate::store::private::check_private_dir(path)?;
            let has_db = path.join("db").is_file() && path.join("conf").is_file();
            // Empty, or only what sled writes before its `db` file: a process
            // killed while creating the database leaves `blobs/` and `conf`.
            let empty = std::fs::read_dir(path)
                .map_err(|e| Error::io(format!("reading {}", path.display()), e))?
                .flatten()
                .all(|entry| {
                    let name = entry.file_name();
                    name == CREATING
                        || (name == "conf" && !has_db)
                        || (name == "blobs"
                            && std::fs::read_dir(entry.path())
                                .map(|mut d| d.next().is_none())
                                .unwrap_or(false))
                });
            if !has_db && !empty {
                return Err(Error::NotAJournal {
                    path: path.to_owned(),
                    reason: "a non-empty directory without a database in it".into(),
                });
            }
            if !has_db && !create {
                return Err(Error::NotAJournal {
                    path: path.to_owned(),
                    reason: "no database here".into(),
                });
            }
        } else if !create {
            return Err(Error::NotAJournal {
                path: path.to_owned(),
                reason: "no such file or directory".into(),
            });
        }
        let new = !existed || !path.join("db").is_file();
        if new {
            mark_creating(path, &creating)?;
        }
        let db = match open_db(path, cache_bytes, compress) {
            Err(Error::Corruption { .. }) if remove_unfinished_sled_snapshots(path)? => {
                open_db(path, cache_bytes, compress)?
            }
            other => other?,
        };
        // sled rewrites `conf` when it finds it empty, and never syncs it.
        sync_conf(path)?;
        // Look before touching: a database that is not ours must be left
        // exactly as it was, so no tree is opened before the marker is checked.
        let names: Vec<Vec<u8>> = db.tree_names().into_iter().map(|n| n.to_vec()).collect();
        let has = |name: &[u8]| names.iter().any(|n| n.as_slice() == name);
        let default_only = names.iter().all(|n| n.as_slice() == b"__sled__default");
        // Files only the journal writes: a database that has them and lacks
        // the marker is ours, and sled lost part of it (a power cut that
        // kept a later write of its log and not an earlier one).
        let ours = path.join(crate::store::sled::wal::FILE).exists()
            || path.join(crate::store::sled::acks::FILE).exists();
        let foreign = |reason: String| {
            if ours {
                Error::corruption(
                    None,
                    None,
                    None,
                    format!(
                        "{}: {reason}, but its write-ahead log and heads are the journal's: \
                         sled lost part of its files; `salvage` recovers what they still hold",
                        path.display()
                    ),
                )
            } else {
                Error::NotAJournal {
                    path: path.to_owned(),
                    reason,
                }
            }
        };
        // (Or one whose creation was interrupted: sled had written its file,
        // and nothing of ours was durable yet.)
        let fresh = (!had_db_file || interrupted) && default_only && db.is_empty();
        if !fresh && !has(b"meta") {
            return Err(foreign(
                "a sled database without the agent-journal format marker".into(),
            ));
        }
        let meta = db
            .open_tree("meta")
            .map_err(|e| storage(e, "opening tree meta"))?;
        match meta
            .get(FORMAT_KEY)
            .map_err(|e| storage(e, "reading meta"))?
        {
            Some(v) if v.as_ref() == FORMAT_VALUE => {}
            // Another layout version (a later build's): refused, never
            // misread, and left as it is.
            Some(v) => {
                return Err(Error::Unsupported(format!(
                    "{}: unknown format marker {:?} (this build reads {:?}): \
                     a database of another agent-journal version",
                    path.display(),
                    String::from_utf8_lossy(&v),
                    String::from_utf8_lossy(FORMAT_VALUE)
                )));
            }
            // New, or created by a process that died before stamping it.
            None if fresh || (meta.is_empty() && !has(b"events")) => {
                meta.insert(FORMAT_KEY, FORMAT_VALUE)
                    .map_err(|e| storage(e, "writing meta"))?;
                db.flush()
                    .map_err(|e| storage(e, "flushing a new database"))?;
            }
            None => {
                return Err(foreign(
                    "a sled database without the agent-journal format marker".into(),
                ));
            }
        }
        if new || interrupted {
            finish_creating(path, &creating)?;
        }
        let events = db
            .open_tree("events")
            .map_err(|e| storage(e, "opening tree events"))?;
        let snapshots = db
            .open_tree("snapshots")
            .map_err(|e| storage(e, "opening tree snapshots"))?;
        let db_file = File::options()
            .read(true)
            .open(path.join("db"))
            .map_err(|e| Error::io(format!("opening {}/db for syncing", path.display()), e))?;
        let (wal, records) = Wal::open(path, wal_appends, poison.clone())?;
        // What was acknowledged: the heads recorded, raised by the log's
        // records (each one a `Synced` append that may have been
        // acknowledged since the last record).
        let acked = AckLog::open(path)?;
        for r in &records {
            acked.raise(r.session, r.first_seq.saturating_add(r.frames.len() as u64));
        }
        // Large frames compressed too, whatever sled's pages are.
        let frame_files = Arc::new(FrameFiles::new(path));
        let sealer = Arc::new(Sealer::start(
            events.clone(),
            frame_files.clone(),
            block_bytes,
            poison.clone(),
        )?);
        let asks = sealer.clone();
        let applier = Applier::start(
            events.clone(),
            frame_files.clone(),
            block_bytes,
            Some(Arc::new(move |session| asks.request(session))),
            poison.clone(),
        )?;
        let store = Self {
            path: path.to_owned(),
            db,
            events,
            snapshots,
            // Always compressed: a snapshot of messages is mostly text.
            snap_files: SnapFiles::new(path),
            frame_files,
            heads: RwLock::new(HashMap::new()),
            db_file,
            synced_blobs: Mutex::new(std::collections::HashSet::new()),
            flushed: GroupCommit::new(poison.clone()),
            synced: GroupCommit::new(poison),
            wal,
            wal_appends,
            applier,
            sealer,
            acked,
            losses: Mutex::new(HashMap::new()),
            records: crate::store::records::RecordFile::writer(path),
        };
        store.replay_wal(records)?;
        store.find_losses()?;
        // Blobs that exist at open were written by an earlier process: sync them once.
        store.sync_blobs()?;
        // Snapshot files no pointer names: left by a crash mid-snapshot, or
        // replaced before the process ended.
        store.snap_files.clean(|session, seq| {
            let v = store
                .snapshots
                .get(key(session, seq))
                .map_err(|e| storage(e, "reading a snapshot pointer"))?;
            Ok(v.is_some_and(|v| snapfiles::is_pointer(&v)))
        })?;
        Ok(store)
    }
}
