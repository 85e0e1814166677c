//! Baselines without the library: raw sled, a plain file with fdatasync.

use std::fs::File;
use std::hint::black_box;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use agent_journal::format::DEFAULT_MAX_EVENT_BYTES;
use agent_journal::state::SessionState;
use agent_journal::{Envelope, SessionId};

use super::timing::Window;

/// sled configured as the library configures it (`src/store/sled/open.rs`):
/// same cache size, same mode, and a database whose `conf` says its pages
/// are compressed opened so (a new one is not).
pub fn open_sled(path: &Path, cache_bytes: u64) -> sled::Db {
    let conf = std::fs::read(path.join("conf")).unwrap_or_default();
    let compressed = String::from_utf8_lossy(&conf).contains("use_compression: true");
    sled::Config::new()
        .path(path)
        .cache_capacity(cache_bytes)
        .mode(sled::Mode::HighThroughput)
        .use_compression(compressed)
        .compression_factor(1)
        .open()
        .expect("open raw sled")
}

/// The library's key: 16-byte session id ++ u64 big-endian seq.
pub fn key(session: SessionId, seq: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    k[..16].copy_from_slice(session.as_bytes());
    k[16..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// A plain file appended to with `write` + `fdatasync` per record.
pub struct SyncedFile {
    file: File,
}

impl SyncedFile {
    /// A new file at `path`. With `preallocate`, that many bytes are written
    /// (zeros) and synced first and records then overwrite them: the floor of
    /// a synced append, with no block allocation and no size change for the
    /// sync to commit.
    pub fn create(path: &Path, preallocate: Option<u64>) -> SyncedFile {
        let mut file = File::options()
            .create_new(true)
            .read(true)
            .write(true)
            .open(path)
            .expect("create file");
        if let Some(mut left) = preallocate {
            let zeros = vec![0u8; 1 << 20];
            while left > 0 {
                let k = left.min(zeros.len() as u64) as usize;
                file.write_all(&zeros[..k]).expect("write");
                left -= k as u64;
            }
            file.sync_all().expect("fsync");
            file.seek(SeekFrom::Start(0)).expect("seek");
        }
        SyncedFile { file }
    }

    /// Appends `count` copies of `frame`, each followed by `fdatasync`;
    /// returns the time taken.
    pub fn append(&mut self, frame: &[u8], count: u64) -> Duration {
        let t = Instant::now();
        for _ in 0..count {
            self.file.write_all(frame).expect("write");
            self.file.sync_data().expect("fdatasync");
        }
        t.elapsed()
    }
}

/// Raw sled made durable per record as the library does it: insert,
/// `Db::flush` (pwrite + sync_file_range), fdatasync of the `db` file.
pub struct SyncedSled {
    db: sled::Db,
    events: sled::Tree,
    file: File,
}

impl SyncedSled {
    pub fn open(path: &Path, cache_bytes: u64) -> SyncedSled {
        let db = open_sled(path, cache_bytes);
        let events = db.open_tree("events").expect("tree");
        db.flush().expect("flush");
        let file = File::options()
            .read(true)
            .open(path.join("db"))
            .expect("open db file");
        SyncedSled { db, events, file }
    }

    /// Inserts `frame` at seqs `first..first + count`, durably one by one;
    /// returns the time taken.
    pub fn append(&self, session: SessionId, first: u64, count: u64, frame: &[u8]) -> Duration {
        let t = Instant::now();
        for seq in first..first + count {
            self.events
                .insert(key(session, seq), frame)
                .expect("insert");
            self.db.flush().expect("flush");
            self.file.sync_data().expect("fdatasync");
        }
        t.elapsed()
    }

    /// Inserts `frames` at seqs `first..`, then makes them durable together
    /// (one flush and one fdatasync, as one batch); returns the time taken.
    pub fn append_frames(&self, session: SessionId, first: u64, frames: &[Vec<u8>]) -> Duration {
        let t = Instant::now();
        for (seq, frame) in (first..).zip(frames) {
            self.events
                .insert(key(session, seq), &frame[..])
                .expect("insert");
        }
        self.db.flush().expect("flush");
        self.file.sync_data().expect("fdatasync");
        t.elapsed()
    }
}

/// Raw sled inserts of `frame`: a database filled to `late`, then the
/// windows `late..late + width` of it and `early..early + width` of a fresh
/// one, timed insert by insert, taking turns in chunks of `chunk`. Returns
/// the early and the late window.
pub fn sled_paired_windows(
    cache_bytes: u64,
    frame: &[u8],
    early: u64,
    late: u64,
    width: u64,
    chunk: u64,
) -> (Window, Window) {
    let session = SessionId::new();
    let (big_dir, small_dir) = (
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    );
    let big_db = open_sled(&big_dir.path().join("db"), cache_bytes);
    let big = big_db.open_tree("events").expect("tree");
    let small_db = open_sled(&small_dir.path().join("db"), cache_bytes);
    let small = small_db.open_tree("events").expect("tree");
    for seq in 0..late {
        big.insert(key(session, seq), frame).expect("insert");
    }
    for seq in 0..early {
        small.insert(key(session, seq), frame).expect("insert");
    }
    let (mut w_small, mut w_big) = (Window::new(early, width), Window::new(late, width));
    for c in 0..width.div_ceil(chunk) {
        for k in 0..2 {
            for _ in 0..chunk.min(width - c * chunk) {
                let (tree, w) = if (c + k) % 2 == 0 {
                    (&big, &mut w_big)
                } else {
                    (&small, &mut w_small)
                };
                let seq = w.from + w.times.len() as u64;
                let t = Instant::now();
                tree.insert(key(session, seq), frame).expect("insert");
                w.add(seq, t.elapsed(), false);
            }
        }
    }
    (w_small, w_big)
}

/// What reading a stream back costs without the library.
pub struct ScanTimes {
    pub open: Duration,
    pub scan: Duration,
    pub events: u64,
}

/// Opens the database, scans the session's prefix of tree `events`, and
/// verifies (crc) and decodes each frame as an `Envelope`; with `fold`, also
/// folds each into a `SessionState` (the library's reducers, without its
/// session and store layers).
pub fn sled_scan_decode(
    path: &Path,
    cache_bytes: u64,
    session: SessionId,
    fold: bool,
) -> ScanTimes {
    let t = Instant::now();
    let db = open_sled(path, cache_bytes);
    let events = db.open_tree("events").expect("tree");
    let open = t.elapsed();
    let mut state = SessionState::new();
    let mut n = 0u64;
    for item in events.scan_prefix(session.as_bytes()) {
        let (_, v) = item.expect("scan");
        // decode_frame checks the version and the crc32 (verify_frame) first.
        let env: Envelope =
            agent_journal::format::decode_frame(&v, DEFAULT_MAX_EVENT_BYTES).expect("decode");
        if fold {
            state.apply(&env);
        }
        black_box(&env);
        n += 1;
    }
    let scan = t.elapsed() - open;
    black_box(&state);
    drop(state);
    ScanTimes {
        open,
        scan,
        events: n,
    }
}

/// The frames of `session` in the journal at `path`, as the library
/// encodes them (one per event: its events re-encoded, which gives back
/// the bytes it stored): their count and total bytes. With `copy`, each is
/// also inserted into a new raw sled database there under the library's
/// key, one key per event: what the raw baselines scan (the library itself
/// packs events into runs and compressed blocks).
pub fn journal_frames(
    path: &Path,
    session: SessionId,
    cache_bytes: u64,
    copy: Option<&Path>,
) -> (u64, u64) {
    let config = agent_journal::JournalConfig {
        durability: agent_journal::Durability::Buffered,
        serve_readers: false,
        ..agent_journal::JournalConfig::default()
    };
    let journal = agent_journal::Journal::open_with(path, config).expect("open");
    let s = journal.session(session).expect("session");
    let head = s.head();
    let raw = copy.map(|p| open_sled(p, cache_bytes));
    let tree = raw.as_ref().map(|db| db.open_tree("events").expect("tree"));
    let mut bytes = 0u64;
    let mut from = 0;
    while from < head {
        let to = (from + 100_000).min(head);
        for e in s.events(from..to).expect("events") {
            let f =
                agent_journal::format::encode_frame(&e, DEFAULT_MAX_EVENT_BYTES).expect("encode");
            bytes += f.len() as u64;
            if let Some(t) = &tree {
                t.insert(key(session, e.seq), f).expect("insert");
            }
        }
        from = to;
    }
    if let Some(db) = &raw {
        db.flush().expect("flush");
    }
    (head, bytes)
}

/// The length of the frame a value of tree `snapshots` stands for, and
/// of the file it is kept in, if it is a pointer to one (`docs/format.md`,
/// "Snapshot files": `0xFE` then the frame's length, u64 LE; `0xFD`, the
/// frame's length and the (compressed) file's).
fn pointed_len(v: &[u8]) -> Option<(u64, u64)> {
    let n = |at: usize| u64::from_le_bytes(v[at..at + 8].try_into().expect("8 bytes"));
    match (v.len(), v.first()) {
        (9, Some(0xFE)) => Some((n(1), n(1))),
        (17, Some(0xFD)) => Some((n(1), n(9))),
        _ => None,
    }
}

/// The latest snapshot frame of `session` in the database at `path`, read
/// raw (from its file if the tree holds a pointer).
pub fn latest_snapshot(path: &Path, db: &sled::Db, session: SessionId) -> Option<(u64, Vec<u8>)> {
    let t = db.open_tree("snapshots").expect("tree");
    let (k, v) = t
        .scan_prefix(session.as_bytes())
        .next_back()?
        .expect("read");
    let seq = u64::from_be_bytes(k[16..24].try_into().expect("key"));
    if let Some((frame_len, _)) = pointed_len(&v) {
        let file = path
            .join("snapshots")
            .join(format!("{session}-{seq:020}.frame"));
        let bytes = std::fs::read(file).expect("snapshot file");
        if v[0] == 0xFD {
            let frame = zstd::block::decompress(&bytes, frame_len as usize).expect("zstd");
            return Some((seq, frame));
        }
        return Some((seq, bytes));
    }
    Some((seq, v.to_vec()))
}

/// Number of snapshots in the database, their frames' total bytes, and
/// the bytes they take (inline in tree `snapshots`, or their files).
pub fn snapshot_bytes(db: &sled::Db) -> (u64, u64, u64) {
    let t = db.open_tree("snapshots").expect("tree");
    let (mut count, mut bytes, mut stored) = (0, 0, 0);
    for item in t.iter() {
        let (_, v) = item.expect("iter");
        count += 1;
        let (frame, file) = pointed_len(&v).unwrap_or((v.len() as u64, v.len() as u64));
        bytes += frame;
        stored += file;
    }
    (count, bytes, stored)
}
