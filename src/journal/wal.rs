//! The write-ahead log of the sled store's `Synced` appends.
//!
//! Making a sled append durable costs two device syncs: sled 0.34's `flush`
//! writes its buffer and waits for it with `sync_file_range`, and only an
//! `fdatasync` of its file commits that to the device. With the log, a
//! `Synced` append is inserted into sled (buffered, as `Buffered` is), its
//! frames are written to `<db>/wal`, and one `fdatasync` of that file makes
//! it durable: the cost of a plain `write` + `fdatasync`. Concurrent
//! appenders share the write and the sync (group commit).
//!
//! Recovery: opening the database reads the log and inserts every frame
//! sled does not have (sled lost its last buffered writes), then makes
//! sled durable and empties the log. A record that fails its checksum was
//! never acknowledged when it is the last one (a torn write); one in the
//! middle (damaged media) is skipped and the records after it are still
//! read.
//!
//! The log is emptied (a *checkpoint*: sled flush, `fdatasync` of sled's
//! file, then the log cut to zero and synced) when it passes
//! [`CHECKPOINT_BYTES`], when the store closes, and around every operation
//! that removes events, so that a replay can never bring removed events
//! back.
//!
//! Record layout (integers little-endian): magic `AJW1`, body length (u32),
//! crc32 of the body (u32), body = session id (16 B), first seq (u64),
//! frame count (u32), then per frame its length (u32) and its bytes.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::journal::group_commit::GroupCommit;
use crate::model::SessionId;

/// First bytes of every record.
const MAGIC: [u8; 4] = *b"AJW1";

/// Magic, body length, crc.
const HEADER: usize = 12;

/// The smallest body: session, first seq, count.
const BODY_MIN: usize = 16 + 8 + 4;

/// The log is emptied once it grows past this many bytes.
pub(crate) const CHECKPOINT_BYTES: u64 = 8 << 20;

/// Linux's `O_DSYNC` (the same on x86_64 and aarch64): every `write` to the
/// log returns once its data is durable, as a `write` then an `fdatasync`
/// would, in one system call instead of two.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
const O_DSYNC: i32 = 0o10000;
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
const DSYNC: bool = true;
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
const O_DSYNC: i32 = 0;
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
const DSYNC: bool = false;

/// The file name of the log inside the database directory.
pub(crate) const FILE: &str = "wal";

/// Frames of one append, read back from the log.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub(crate) session: SessionId,
    pub(crate) first_seq: u64,
    pub(crate) frames: Vec<Vec<u8>>,
}

struct Open {
    /// Opened for appending.
    file: File,
    /// Records appended but not yet written.
    pending: Vec<u8>,
    /// The buffer being written, given back after the write.
    spare: Vec<u8>,
    /// Bytes in the file.
    size: u64,
}

/// The log of one database.
pub(crate) struct Wal {
    path: PathBuf,
    open: Mutex<Open>,
    /// The same file, synced outside the lock so that appenders can queue
    /// their records while a sync runs.
    sync_handle: File,
    /// Tickets are record numbers, taken as records are queued.
    commit: GroupCommit,
}

fn io(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", path.display()), e)
}

impl Wal {
    /// Opens (creating it if needed) the log in `dir` and returns it with
    /// the records it holds.
    pub(crate) fn open(dir: &Path) -> Result<(Wal, Vec<Record>)> {
        let path = dir.join(FILE);
        let created = !path.exists();
        let mut options = File::options();
        options.read(true).append(true).create(true);
        if DSYNC {
            use std::os::unix::fs::OpenOptionsExt;
            options.custom_flags(O_DSYNC);
        }
        let mut file = options
            .open(&path)
            .map_err(|e| io(&path, "opening the write-ahead log", e))?;
        if created {
            // The file's name must survive power loss before any record in
            // it is acknowledged.
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| io(dir, "syncing directory", e))?;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io(&path, "reading the write-ahead log", e))?;
        let records = parse(&bytes);
        let sync_handle = file
            .try_clone()
            .map_err(|e| io(&path, "opening the write-ahead log", e))?;
        let wal = Wal {
            path,
            open: Mutex::new(Open {
                file,
                pending: Vec::new(),
                spare: Vec::new(),
                size: bytes.len() as u64,
            }),
            sync_handle,
            commit: GroupCommit::default(),
        };
        Ok((wal, records))
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        // Only ever appended to or emptied as a whole: a panic cannot leave
        // a half-updated state worth refusing.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues the record of an append. Call after the frames are in sled and
    /// before the append's seqs can be reused (under the session's lock).
    pub(crate) fn enqueue(&self, session: SessionId, first_seq: u64, frames: &[Vec<u8>]) {
        let body_len = BODY_MIN + frames.iter().map(|f| 4 + f.len()).sum::<usize>();
        let mut o = self.lock();
        let buf = &mut o.pending;
        buf.reserve(HEADER + body_len);
        buf.extend_from_slice(&MAGIC);
        // Frames are at most the event size limit (u32 range), and an append
        // holds few of them; a batch past 4 GiB is refused by `check_len`.
        buf.extend_from_slice(&(body_len as u32).to_le_bytes());
        let crc_at = buf.len();
        buf.extend_from_slice(&[0; 4]);
        let body_at = buf.len();
        buf.extend_from_slice(session.as_bytes());
        buf.extend_from_slice(&first_seq.to_le_bytes());
        buf.extend_from_slice(&(frames.len() as u32).to_le_bytes());
        for f in frames {
            buf.extend_from_slice(&(f.len() as u32).to_le_bytes());
            buf.extend_from_slice(f);
        }
        let crc = crc32fast::hash(&buf[body_at..]);
        buf[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
        // Under the lock: every ticket up to the one read by a writer of
        // `pending` is in what it writes.
        self.commit.ticket();
    }

    /// Returns an error if the log cannot take a record of these frames.
    pub(crate) fn check_len(frames: &[Vec<u8>]) -> Result<()> {
        let body: u64 = BODY_MIN as u64 + frames.iter().map(|f| 4 + f.len() as u64).sum::<u64>();
        if body > u32::MAX as u64 || frames.iter().any(|f| f.len() as u64 > u32::MAX as u64) {
            return Err(Error::InvalidInput(format!(
                "an append of {body} bytes is too large for one write-ahead log record (4 GiB)"
            )));
        }
        Ok(())
    }

    /// Returns an error if an earlier write or sync of the log failed.
    pub(crate) fn check(&self) -> Result<()> {
        self.commit.check()
    }

    /// Makes every record queued so far durable, sharing the work with
    /// concurrent callers. `sled_durable` makes sled durable; it is called
    /// when the log has grown past [`CHECKPOINT_BYTES`] and is emptied.
    pub(crate) fn commit(&self, sled_durable: &dyn Fn() -> Result<()>) -> Result<()> {
        let target = self.commit.requested();
        self.commit
            .commit_upto(target, || self.write_and_sync(sled_durable))
    }

    /// Writes the queued records and syncs them; returns the last ticket
    /// written. Only one caller at a time (the group commit's leader).
    fn write_and_sync(&self, sled_durable: &dyn Fn() -> Result<()>) -> Result<u64> {
        let mut guard = self.lock();
        let o = &mut *guard;
        let upto = self.commit.requested();
        let spare = std::mem::take(&mut o.spare);
        let buf = std::mem::replace(&mut o.pending, spare);
        o.size += buf.len() as u64;
        if o.size > CHECKPOINT_BYTES {
            // Rare: write under the lock, then empty the log.
            let written = o.file.write_all(&buf);
            o.spare = buf;
            o.spare.clear();
            written.map_err(|e| io(&self.path, "writing the write-ahead log", e))?;
            self.checkpoint_locked(o, sled_durable)?;
            return Ok(upto);
        }
        // Appenders queue their records while the write and sync run. A
        // checkpoint meanwhile is harmless: these records are in sled
        // already, so its flush covers them.
        drop(guard);
        let result = (&self.sync_handle)
            .write_all(&buf)
            .map_err(|e| io(&self.path, "writing the write-ahead log", e))
            .and_then(|()| {
                if DSYNC || buf.is_empty() {
                    Ok(())
                } else {
                    self.sync_handle
                        .sync_data()
                        .map_err(|e| io(&self.path, "fdatasync of the write-ahead log", e))
                }
            });
        let mut buf = buf;
        buf.clear();
        self.lock().spare = buf;
        result.map(|()| upto)
    }

    /// Empties the log: `sled_durable` first (it must make every insert made
    /// so far durable), then the log is cut to zero and synced. Records
    /// queued and not yet written are dropped too: they were inserted into
    /// sled before this call and are durable there now.
    pub(crate) fn checkpoint(&self, sled_durable: &dyn Fn() -> Result<()>) -> Result<()> {
        let mut o = self.lock();
        self.checkpoint_locked(&mut o, sled_durable)
    }

    fn checkpoint_locked(&self, o: &mut Open, sled_durable: &dyn Fn() -> Result<()>) -> Result<()> {
        sled_durable()?;
        o.pending.clear();
        // Cut whatever the file holds: a leader's write may have landed
        // after the size was last counted.
        o.file
            .set_len(0)
            .and_then(|()| o.file.sync_data())
            .map_err(|e| io(&self.path, "emptying the write-ahead log", e))?;
        o.size = 0;
        Ok(())
    }

    /// Bytes in the log file.
    pub(crate) fn size(&self) -> u64 {
        self.lock().size
    }

    /// Syncs performed (for tests and benchmarks).
    #[allow(dead_code)]
    pub(crate) fn sync_count(&self) -> u64 {
        self.commit.flushes()
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The record starting at `at`, if it is whole and its crc matches, and the
/// offset after it.
fn record_at(bytes: &[u8], at: usize) -> Option<(Record, usize)> {
    if bytes.get(at..at + 4)? != MAGIC {
        return None;
    }
    let len = u32_at(bytes, at + 4)? as usize;
    let crc = u32_at(bytes, at + 8)?;
    let start = at + HEADER;
    let body = bytes.get(start..start.checked_add(len)?)?;
    if len < BODY_MIN || crc32fast::hash(body) != crc {
        return None;
    }
    let session = SessionId::from_bytes(body[..16].try_into().ok()?);
    let first_seq = u64::from_le_bytes(body[16..24].try_into().ok()?);
    let count = u32_at(body, 24)? as usize;
    let mut frames = Vec::with_capacity(count.min(body.len() / 4));
    let mut p = BODY_MIN;
    for _ in 0..count {
        let n = u32_at(body, p)? as usize;
        frames.push(body.get(p + 4..(p + 4).checked_add(n)?)?.to_vec());
        p += 4 + n;
    }
    if p != body.len() {
        return None;
    }
    Some((
        Record {
            session,
            first_seq,
            frames,
        },
        start + len,
    ))
}

/// Every valid record of a log, in order. Damage is skipped: the search
/// goes on at the next magic whose record checks.
pub(crate) fn parse(bytes: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + HEADER <= bytes.len() {
        match record_at(bytes, at) {
            Some((r, next)) => {
                out.push(r);
                at = next;
            }
            None => {
                // Resynchronize on the next magic.
                match bytes[at + 1..].windows(4).position(|w| w == MAGIC) {
                    Some(i) => at += 1 + i,
                    None => break,
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sid(n: u8) -> SessionId {
        SessionId::from_bytes([n; 16])
    }

    fn written(records: &[(SessionId, u64, Vec<Vec<u8>>)]) -> Vec<u8> {
        let dir = tempfile_dir();
        let (wal, old) = Wal::open(&dir).expect("open");
        assert!(old.is_empty());
        for (s, seq, frames) in records {
            wal.enqueue(*s, *seq, frames);
        }
        wal.commit(&|| Ok(())).expect("commit");
        let bytes = std::fs::read(dir.join(FILE)).expect("read");
        std::fs::remove_dir_all(&dir).expect("cleanup");
        bytes
    }

    fn tempfile_dir() -> PathBuf {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "aj-wal-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("mkdir");
        dir
    }

    fn sample() -> Vec<(SessionId, u64, Vec<Vec<u8>>)> {
        vec![
            (sid(1), 0, vec![b"one".to_vec()]),
            (sid(2), 5, vec![b"two".to_vec(), vec![], b"three".to_vec()]),
            (sid(1), 1, vec![vec![7; 300]]),
        ]
    }

    #[test]
    fn records_read_back_as_written() {
        let bytes = written(&sample());
        let got = parse(&bytes);
        let want: Vec<Record> = sample()
            .into_iter()
            .map(|(session, first_seq, frames)| Record {
                session,
                first_seq,
                frames,
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_torn_tail_loses_only_the_last_record() {
        let bytes = written(&sample());
        for cut in 0..bytes.len() {
            let got = parse(&bytes[..cut]);
            let whole = parse(&bytes);
            assert!(got.len() < 3, "cut at {cut}");
            assert_eq!(got[..], whole[..got.len()], "cut at {cut}");
        }
    }

    #[test]
    fn a_flipped_byte_loses_at_most_its_record() {
        let bytes = written(&sample());
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x40;
            let got = parse(&b);
            assert!(got.len() >= 2, "flip at {at}: {} records", got.len());
            for r in &got {
                assert!(parse(&bytes).contains(r), "flip at {at} invented {r:?}");
            }
        }
    }

    #[test]
    fn a_checkpoint_empties_the_log_after_sled_is_durable() {
        let dir = tempfile_dir();
        let (wal, _) = Wal::open(&dir).expect("open");
        wal.enqueue(sid(1), 0, &[b"x".to_vec()]);
        wal.commit(&|| Ok(())).expect("commit");
        assert!(wal.size() > 0);
        wal.enqueue(sid(1), 1, &[b"y".to_vec()]);
        let failed = wal.checkpoint(&|| Err(Error::Storage("no".into())));
        assert!(failed.is_err());
        assert!(wal.size() > 0, "a failed sled flush must keep the log");
        wal.checkpoint(&|| Ok(())).expect("checkpoint");
        assert_eq!(wal.size(), 0);
        wal.commit(&|| Ok(())).expect("commit");
        drop(wal);
        let (_, records) = Wal::open(&dir).expect("reopen");
        assert!(records.is_empty(), "{records:?}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn concurrent_appenders_share_syncs_and_every_record_is_written() {
        let dir = tempfile_dir();
        let (wal, _) = Wal::open(&dir).expect("open");
        let wal = std::sync::Arc::new(wal);
        let threads: Vec<_> = (0..16u8)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    for seq in 0..20 {
                        wal.enqueue(sid(t), seq, &[vec![t; 100]]);
                        wal.commit(&|| Ok(())).expect("commit");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
        let syncs = wal.sync_count();
        assert!(syncs < 16 * 20 / 2, "{syncs} syncs for 320 appends");
        let records = parse(&std::fs::read(dir.join(FILE)).expect("read"));
        assert_eq!(records.len(), 320);
        for t in 0..16u8 {
            let seqs: Vec<u64> = records
                .iter()
                .filter(|r| r.session == sid(t))
                .map(|r| r.first_seq)
                .collect();
            assert_eq!(seqs, (0..20).collect::<Vec<_>>(), "thread {t}");
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn garbage_is_no_record() {
        assert!(parse(b"").is_empty());
        assert!(parse(&[0xAA; 100]).is_empty());
        let mut fake = MAGIC.to_vec();
        fake.extend_from_slice(&u32::MAX.to_le_bytes());
        fake.extend_from_slice(&[0; 40]);
        assert!(parse(&fake).is_empty());
    }
}
