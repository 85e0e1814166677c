//! Rebuilding a database that sled cannot open from the journal's own
//! durable records, at open.
//!
//! A power cut that keeps a later unsynced write of sled's log and drops an
//! earlier one (a disk cache may reorder them), or loses sled's snapshot
//! file after its rename, leaves a database sled refuses, or one whose tree
//! lost keys below the acknowledged heads. Every acknowledged event is
//! still whole outside sled's own bookkeeping: in the write-ahead log
//! (`wal`, synced before an append returns), in the sealed segments
//! (`frames/`, synced before sled points to them), or as a whole frame in
//! sled's `db` file. [`rebuild`] reads them all (`raw.rs`, without sled),
//! and when they hold every acknowledged event (the `heads` log says how
//! many) with no gap and no two copies that disagree, writes them into a new
//! database beside the old one, synced, and swaps the two in one atomic
//! exchange (`renameat2(RENAME_EXCHANGE)`): a crash at any moment leaves
//! the old database or the new one at the path, never neither. The old one
//! is kept beside it, as `<name>.damaged-<time>`, for a person to look at.
//! Where the records are not enough, nothing is changed: the open reports
//! the damage as before, and `salvage` gives back what it can.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::raw;
use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::format;
use crate::model::SessionId;
use crate::store::poison::Poison;
use crate::store::sled::{acks, wal};
use crate::store::{Durability, Store};

/// The files of a database directory a rebuild makes anew (sled's own, and
/// the journal's logs and segments, written again by the new database);
/// every other top-level file (the import intent, the record area) is
/// carried over as it is.
fn made_anew(name: &str) -> bool {
    matches!(
        name,
        "conf" | "db" | "blobs" | "frames" | "snapshots" | "agent-journal.creating"
    ) || name == wal::FILE
        || name == acks::FILE
        || name == crate::store::sled::reader::SOCKET
        || name.starts_with("snap.")
}

/// What a rebuild needs to open the new database as the old one was.
pub(crate) struct Settings {
    pub(crate) limit: u64,
    pub(crate) compress: bool,
    pub(crate) cache_bytes: u64,
    pub(crate) block_bytes: usize,
}

/// Rebuilds the database at `path` from its durable records if they hold
/// every acknowledged event; returns where the old database was kept, or
/// `None` if nothing was done (not a journal's database, records
/// incomplete, or no atomic exchange on this system).
///
/// # Errors
/// [`Error::Io`] if the files cannot be read or the new database cannot be
/// written (the old one is then left as it was).
pub(crate) fn rebuild(path: &Path, settings: &Settings) -> Result<Option<PathBuf>> {
    if !cfg!(target_os = "linux") {
        return Ok(None);
    }
    let ours = path.join(wal::FILE).exists() || path.join(acks::FILE).exists();
    if !ours {
        return Ok(None);
    }
    let scan = raw::scan_dir(path, settings.limit)?;
    if !scan.conflicts.is_empty() {
        return Ok(None);
    }
    let acked = std::fs::read(path.join(acks::FILE))
        .map(|b| acks::parse(&b))
        .unwrap_or_default();
    let Some(sessions) = whole_sessions(scan.events, &acked) else {
        return Ok(None);
    };
    let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(None);
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = parent.join(format!(
        ".{name}.rebuild.{}.{}.tmp",
        std::process::id(),
        uuid::Uuid::now_v7().simple()
    ));
    std::fs::create_dir(&tmp).map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    let built = write_new(&tmp, path, sessions, settings);
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    if let Err(e) = exchange(&tmp, path) {
        let _ = std::fs::remove_dir_all(&tmp);
        // No atomic exchange here (an old kernel, a file system that lacks
        // it): leave the database as it is.
        if no_exchange(&e) {
            return Ok(None);
        }
        return Err(Error::io(
            format!("exchanging {} with its rebuilt copy", path.display()),
            e,
        ));
    }
    let kept = parent.join(format!(
        "{name}.damaged-{}",
        chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ")
    ));
    std::fs::rename(&tmp, &kept).map_err(|e| {
        Error::io(
            format!("keeping the damaged database as {}", kept.display()),
            e,
        )
    })?;
    crate::store::fs::sync_dir(parent)?;
    Ok(Some(kept))
}

/// Each session's events in order from seq 0, cut at the first seq not
/// found; `None` if that cut falls below what the acknowledgement log says was
/// acknowledged (an acknowledged event is missing: not for an automatic
/// rebuild).
fn whole_sessions(
    events: BTreeMap<(SessionId, u64), Envelope>,
    acked: &std::collections::HashMap<SessionId, u64>,
) -> Option<BTreeMap<SessionId, Vec<Envelope>>> {
    let mut sessions: BTreeMap<SessionId, Vec<Envelope>> = BTreeMap::new();
    for ((id, seq), env) in events {
        let list = sessions.entry(id).or_default();
        // Past a gap, nothing more of this session: an event after a
        // missing one was never acknowledged (appends are acknowledged in
        // order, each after a sync covering the ones before).
        if seq == list.len() as u64 {
            list.push(env);
        }
    }
    for (id, head) in acked {
        let found = sessions.get(id).map_or(0, |l| l.len() as u64);
        if found < *head {
            return None;
        }
    }
    sessions.retain(|_, l| !l.is_empty());
    Some(sessions)
}

/// Writes `sessions` into a new database in `tmp` (synced), and copies the
/// files of `old` it does not make anew.
fn write_new(
    tmp: &Path,
    old: &Path,
    sessions: BTreeMap<SessionId, Vec<Envelope>>,
    settings: &Settings,
) -> Result<()> {
    {
        let store = super::Guarded::open(
            tmp,
            true,
            settings.cache_bytes.min(64 << 20),
            settings.compress,
            true,
            settings.block_bytes,
            Poison::default(),
        )?;
        for (id, events) in sessions {
            let mut at = 0u64;
            for chunk in events.chunks(4096) {
                let frames = chunk
                    .iter()
                    .map(|e| format::encode_frame(e, settings.limit))
                    .collect::<Result<Vec<_>>>()?;
                store.append(id, at, &frames)?;
                at += frames.len() as u64;
            }
        }
        store.flush(Durability::Synced)?;
    }
    let entries =
        std::fs::read_dir(old).map_err(|e| Error::io(format!("reading {}", old.display()), e))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if made_anew(&name) || !entry.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let to = tmp.join(&name);
        std::fs::copy(entry.path(), &to)
            .and_then(|_| std::fs::File::open(&to)?.sync_all())
            .map_err(|e| Error::io(format!("copying {} into the rebuilt database", name), e))?;
    }
    crate::store::fs::sync_dir(tmp)
}

/// Swaps the directories `a` and `b` in one step (Linux `renameat2` with
/// `RENAME_EXCHANGE`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        std::ffi::CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::other("a path with a NUL byte"))
    };
    let (a, b) = (c(a)?, c(b)?);
    // SAFETY: both paths are NUL-terminated and outlive the call; AT_FDCWD
    // makes them relative to the working directory, as `rename` does.
    let r = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// Whether `e` says the system cannot exchange two paths atomically.
fn no_exchange(e: &std::io::Error) -> bool {
    #[cfg(target_os = "linux")]
    if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) {
        return true;
    }
    e.kind() == std::io::ErrorKind::Unsupported
}
