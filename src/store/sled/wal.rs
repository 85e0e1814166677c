//! The write-ahead log of the sled store's `Synced` appends.
//!
//! Making a sled append durable costs two device syncs: sled 0.34's `flush`
//! writes its buffer and waits for it with `sync_file_range`, and only an
//! `fdatasync` of its file commits that to the device. With the log, a
//! `Synced` append's frames are written to `<db>/wal` and one sync of that
//! file makes it durable, while sled gets the insert as a `Buffered` append
//! does. Concurrent appenders share the write and the sync (group commit).
//!
//! The file is preallocated ([`PREALLOCATED`] bytes of zeros, synced once)
//! and written over from the start, so a sync commits the records' blocks
//! and no change of the file's size or block map: the cheapest sync there
//! is (71-89 us here, against 104-128 us for a file that grows).
//!
//! Every record is written twice: once in the file's first half
//! and once at the same place in its second half ([`HALF`] bytes further),
//! both before the one `fdatasync` that makes them durable. The record of an
//! acknowledged append is then the only copy of its events until the next
//! rollover, and nothing after the last record tells damage to it from an
//! append torn by a power cut; with two copies in different blocks, a
//! flipped byte, a damaged block, a zeroed tail or a file cut short loses
//! one copy and the other gives the record back. (A log the disk had no
//! room to preallocate, or one a journal not appending through it keeps,
//! has its records written once, in the whole file, under another magic.)
//!
//! Records carry a *generation*. Emptying the log (a *rollover*: sled
//! flushed and synced first) starts a new generation by writing, at offset
//! 0, a record of it with no frames, synced before the rollover returns;
//! the records after it belong to the generation until the next rollover.
//! Reading the log keeps the valid records of the highest generation found:
//! older ones, still in the file further on, were in sled already. A
//! rollover happens when [`ROLLOVER_BYTES`] were written, when the
//! store closes, and before and after any removal of events, so that a
//! replay can never bring removed events back.
//!
//! Recovery: opening the database reads the log and inserts every frame
//! sled does not have (sled lost its last buffered writes), then
//! rollovers. A record that fails its checksum is skipped and reading goes
//! on at the next magic whose record checks (the last one cut short is an
//! append never acknowledged). Each stream is replayed only while it stays
//! contiguous: a record that starts past the stream's end follows one that
//! was lost, and ends that stream's replay (`SledStore::replay_wal`), so a
//! replay never leaves a gap.
//!
//! Record layout (integers little-endian): magic `AJW1` (`AJS1` for a
//! record written once), body length (u32), crc32 of the body (u32), body = generation (u64),
//! session id (16 B), first seq (u64), frame count (u32), then per frame its
//! length (u32) and its bytes.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::SyncStats;
use crate::store::poison::Poison;
use crate::store::sled::group_commit::GroupCommit;

mod record;
#[cfg(test)]
use record::parse;
use record::{BODY_MIN, MAGIC, MAGIC_ONCE, cut_short, encode, parse_all};
pub(crate) use record::{HALF, PREALLOCATED, Record, all_records};

/// The log is emptied once this many bytes of a half were written.
pub(crate) const ROLLOVER_BYTES: u64 = HALF - (64 << 10);

/// The file name of the log inside the database directory.
pub(crate) const FILE: &str = "wal";

struct Open {
    /// Records queued but not yet written.
    pending: Vec<u8>,
    /// The buffer being written, given back after the write.
    spare: Vec<u8>,
    /// Where the next write goes: the bytes of this generation.
    end: u64,
    /// The generation of the records written now.
    generation: u64,
    /// Records in `pending`.
    pending_records: u64,
    /// The file held records written once: the next rollover of a
    /// mirrored log zeroes it first, so that they are never read again.
    single: bool,
}

/// The log of one database.
pub(crate) struct Wal {
    path: PathBuf,
    file: File,
    /// Records are written twice, else once (a file not preallocated, or
    /// that the disk had no room to preallocate).
    mirrored: bool,
    /// What the open found if the file was cut inside its first half.
    cut: Option<String>,
    open: Mutex<Open>,
    /// Tickets are record numbers, taken as records are queued.
    commit: GroupCommit,
    stats: Mutex<SyncStats>,
}

fn io(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::io(format!("{what} {}", path.display()), e)
}

impl Wal {
    /// Opens (creating and preallocating it if needed) the log in `dir` and
    /// returns it with the records of its current generation. Call
    /// [`roll_over`](Self::roll_over) once they are in sled, before the
    /// first [`commit`](Self::commit).
    ///
    /// With `preallocate` (the journal appends through the log), a file
    /// shorter than [`PREALLOCATED`] is filled with zeros up to it, as far as
    /// the disk has room: on a full disk the log grows as it is written.
    /// A failed write or sync of the log poisons `poison`.
    pub(crate) fn open(
        dir: &Path,
        preallocate: bool,
        poison: Poison,
    ) -> Result<(Wal, Vec<Record>)> {
        let path = dir.join(FILE);
        let created = !path.exists();
        let mut options = File::options();
        options.read(true).write(true).create(true);
        let mut file = options
            .open(&path)
            .map_err(|e| io(&path, "opening the write-ahead log", e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io(&path, "reading the write-ahead log", e))?;
        let cut = cut_short(&bytes).then(|| {
            format!(
                "the write-ahead log {} was cut at byte {} while it held records (it is {PREALLOCATED} bytes then): \
                 records past the cut lost both their copies, if there were any",
                path.display(),
                bytes.len()
            )
        });
        if preallocate && (bytes.len() as u64) < PREALLOCATED {
            // Zeros, written (not a hole): later writes then allocate no
            // block.
            let zeros = vec![0u8; 256 << 10];
            let mut at = bytes.len() as u64;
            while at < PREALLOCATED {
                let n = (PREALLOCATED - at).min(zeros.len() as u64) as usize;
                match file.write_all_at(&zeros[..n], at) {
                    Ok(()) => at += n as u64,
                    // No room: the log grows as it is written instead.
                    Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                    Err(e) => return Err(io(&path, "preallocating the write-ahead log", e)),
                }
            }
            file.sync_all()
                .map_err(|e| io(&path, "syncing the write-ahead log", e))?;
            // Read what the file now holds: a record that ended in zeros
            // at the old end is whole again. (A short write past the last
            // whole block left at most zeros beyond `at`.)
            bytes.resize(at as usize, 0);
        }
        if created {
            // The file's name must survive power loss before any record in
            // it is acknowledged.
            crate::store::fs::sync_dir(dir)?;
        }
        let (generation, records, single) = parse_all(&bytes);
        // A file the disk had no room to preallocate has no second half:
        // its records are written once, and it grows as it is written.
        let mirrored = bytes.len() as u64 >= PREALLOCATED;
        let wal = Wal {
            cut,
            mirrored,
            path,
            file,
            open: Mutex::new(Open {
                pending: Vec::new(),
                spare: Vec::new(),
                // Nothing is written before the rollover that follows the
                // replay, which starts a new generation at offset 0.
                end: 0,
                generation,
                pending_records: 0,
                single,
            }),
            commit: GroupCommit::new(poison),
            stats: Mutex::new(SyncStats::default()),
        };
        Ok((wal, records))
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        // Only ever appended to or emptied as a whole: a panic cannot leave
        // a half-updated state worth refusing.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues the record of an append. Call after its sled insert is
    /// queued and before the append's seqs can be reused (under the
    /// session's lock).
    pub(crate) fn enqueue(&self, session: SessionId, first_seq: u64, frames: &[Vec<u8>]) {
        let mut o = self.lock();
        let generation = o.generation;
        encode(
            &mut o.pending,
            self.magic(),
            generation,
            session,
            first_seq,
            frames,
        );
        o.pending_records += 1;
        // Under the lock: every ticket up to the one read by a writer of
        // `pending` is in what it writes.
        self.commit.ticket();
    }

    /// Returns an error if the log cannot take a record of these frames.
    pub(crate) fn check_len(frames: &[Vec<u8>]) -> Result<()> {
        let body: u64 = BODY_MIN as u64 + frames.iter().map(|f| 4 + f.len() as u64).sum::<u64>();
        // The body bounds every frame's length too.
        if body > u32::MAX as u64 {
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
    /// when the log is full and is emptied.
    pub(crate) fn commit(&self, sled_durable: &dyn Fn() -> Result<()>) -> Result<()> {
        let target = self.commit.requested();
        self.commit
            .commit_upto(target, || self.write_and_sync(sled_durable))
    }

    /// The magic of the records this log writes.
    fn magic(&self) -> [u8; 4] {
        if self.mirrored { MAGIC } else { MAGIC_ONCE }
    }

    /// Where a generation ends: the records of a mirrored log fill a half.
    fn capacity(&self) -> (u64, u64) {
        if self.mirrored {
            (HALF, ROLLOVER_BYTES)
        } else {
            (u64::MAX, PREALLOCATED - (64 << 10))
        }
    }

    /// Writes `buf` at `at` in both halves (once if the log is not
    /// mirrored), then syncs: durable when it returns. In a mirrored log,
    /// `at + buf.len()` must fit in a half.
    fn write_at(&self, buf: &[u8], at: u64) -> Result<()> {
        debug_assert!(!self.mirrored || at + buf.len() as u64 <= HALF);
        let copies = if self.mirrored { 2 } else { 1 };
        for copy in [at, HALF + at].into_iter().take(copies) {
            self.file
                .write_all_at(buf, copy)
                .map_err(|e| io(&self.path, "writing the write-ahead log", e))?;
        }
        self.file
            .sync_data()
            .map_err(|e| io(&self.path, "fdatasync of the write-ahead log", e))
    }

    /// Writes the queued records and syncs them; returns the last ticket
    /// written. Only one caller at a time (the group commit's leader).
    fn write_and_sync(&self, sled_durable: &dyn Fn() -> Result<()>) -> Result<u64> {
        let mut guard = self.lock();
        let o = &mut *guard;
        let upto = self.commit.requested();
        if o.pending.is_empty() {
            // Everything queued was written and synced by earlier leaders,
            // or dropped by a rollover that made it durable in sled.
            return Ok(upto);
        }
        let (room, full) = self.capacity();
        if o.end.saturating_add(o.pending.len() as u64) > room {
            // The records do not fit in what is left of a half: a
            // rollover makes their events durable in sled instead (their
            // inserts were queued before them), and drops them.
            self.roll_over_locked(o, sled_durable)?;
            return Ok(upto);
        }
        let spare = std::mem::take(&mut o.spare);
        let buf = std::mem::replace(&mut o.pending, spare);
        let records = std::mem::take(&mut o.pending_records);
        let at = o.end;
        o.end += buf.len() as u64;
        if o.end > full {
            // Rare: write under the lock, then empty the log.
            let written = self.timed_write(&buf, at, records);
            o.spare = buf;
            o.spare.clear();
            written?;
            self.roll_over_locked(o, sled_durable)?;
            return Ok(upto);
        }
        // Appenders queue their records while the write and sync run. A
        // rollover meanwhile is harmless: these records are queued for
        // sled already, so its flush covers them, and their generation is
        // then an old one.
        drop(guard);
        let result = self.timed_write(&buf, at, records);
        let mut buf = buf;
        buf.clear();
        self.lock().spare = buf;
        result.map(|()| upto)
    }

    /// [`Self::write_at`] of `records` queued records, counted in the stats.
    fn timed_write(&self, buf: &[u8], at: u64, records: u64) -> Result<()> {
        let start = std::time::Instant::now();
        self.write_at(buf, at)?;
        let took = start.elapsed();
        let mut stats = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        stats.log_writes += 1;
        stats.log_records += records;
        stats.log_bytes += buf.len() as u64;
        stats.log_write_time += took;
        Ok(())
    }

    /// Empties the log: `sled_durable` first (it must make every insert
    /// queued so far durable), then a new generation starts, synced. Records
    /// queued and not yet written are dropped too: their sled inserts were
    /// queued before this call and are durable now.
    pub(crate) fn roll_over(&self, sled_durable: &dyn Fn() -> Result<()>) -> Result<()> {
        let mut o = self.lock();
        self.roll_over_locked(&mut o, sled_durable)
    }

    fn roll_over_locked(&self, o: &mut Open, sled_durable: &dyn Fn() -> Result<()>) -> Result<()> {
        sled_durable()?;
        o.pending.clear();
        o.pending_records = 0;
        if o.single && self.mirrored {
            // Records written once fill the whole file: zeroed, once, so
            // that they are never read again.
            let len = self.file_size();
            let zeros = vec![0u8; 256 << 10];
            let mut at = 0;
            while at < len {
                let n = (len - at).min(zeros.len() as u64) as usize;
                self.file
                    .write_all_at(&zeros[..n], at)
                    .map_err(|e| io(&self.path, "writing the write-ahead log", e))?;
                at += n as u64;
            }
            o.single = false;
        }
        let generation = o.generation + 1;
        let mut start = Vec::new();
        encode(
            &mut start,
            self.magic(),
            generation,
            SessionId::from_bytes([0; 16]),
            0,
            &[],
        );
        self.write_at(&start, 0)?;
        o.generation = generation;
        o.end = start.len() as u64;
        self.stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .rollovers += 1;
        Ok(())
    }

    /// Gives the file's preallocated bytes back after a rollover, when the
    /// store closes: a closed database keeps no empty log. The next open
    /// that appends through the log preallocates it again. Not synced: a
    /// power cut that undoes it leaves the rollover's record, which holds
    /// nothing to replay.
    pub(crate) fn release(&self) -> Result<()> {
        let _o = self.lock();
        self.file
            .set_len(0)
            .map_err(|e| io(&self.path, "truncating the write-ahead log", e))
    }

    /// If the file was found cut inside its first half while it held
    /// records written twice (see [`cut_short`]), what to report.
    pub(crate) fn damage(&self) -> Option<&str> {
        self.cut.as_deref()
    }

    /// The log's writes and rollovers so far.
    pub(crate) fn stats(&self) -> SyncStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes of the current generation.
    #[cfg(test)]
    pub(crate) fn size(&self) -> u64 {
        self.lock().end
    }

    /// Bytes the file occupies.
    pub(crate) fn file_size(&self) -> u64 {
        self.file
            .metadata()
            .map(|m| m.len())
            .unwrap_or(PREALLOCATED)
    }
}

#[cfg(test)]
mod tests;
