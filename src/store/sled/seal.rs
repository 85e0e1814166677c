//! The sealer: a thread that packs a session's runs into compressed blocks
//! (`runs.rs`, `docs/format.md` "Runs and blocks").
//!
//! The insert thread asks for a session once it has put the configured
//! block size into sled. A seal reads the session's values after its last
//! block (newest first, while they follow one another with no gap, at most
//! [`SEAL_MAX_BLOCKS`] blocks' worth), cuts them into blocks of at least
//! the block size at value boundaries (what is left over waits for the next
//! seal), writes the blocks compressed to a segment and syncs it, and only
//! then replaces their values with the block pointers in one sled batch.
//! So no sync of sled makes a pointer durable before its bytes, and a crash
//! at any point leaves the runs or the block, never neither: unsealed bytes
//! in a segment are named by no pointer, and the next append goes after
//! them.
//!
//! A rollover (`sled_durable`) seals every session written to since the
//! last one whole ([`Sealer::seal_all`]: what is left over and the first
//! value too), all with one segment write and sync, before the write-ahead
//! log is emptied: what it made durable then has a copy outside sled's own
//! file (a segment), which `salvage` reads if sled's file is damaged past
//! opening. (Sealed by this thread instead, a power cut that cost sled one
//! write could find the log emptied and the runs only in sled's file: the
//! power-loss harness found such states.)
//!
//! A value that does not read as a run or a single event (damage) ends the
//! values sealed: it stays as it is, and so do the ones before it. So does
//! the session's first value (the one holding seq 0): opening a session
//! reads its first event, which then costs no decompression. A cut
//! (`truncate`) holds [`Sealer::hold`] so that no seal puts back what it
//! removes.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::fault::{panic_message, scanned, storage};
use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::poison::Poison;
use crate::store::sled::frame_files::FrameFiles;
use crate::store::sled::keys::key;
use crate::store::sled::runs::{self, Kind, RUN_HEADER};

/// The most blocks one seal writes (a session whose runs go back further
/// keeps its older values as they are until `compact`).
const SEAL_MAX_BLOCKS: usize = 16;

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Default)]
struct Requests {
    /// Sessions to seal, each with whether to seal it whole.
    sessions: VecDeque<(SessionId, bool)>,
    stop: bool,
}

struct Shared {
    events: sled::Tree,
    files: Arc<FrameFiles>,
    block_bytes: usize,
    /// Held while a seal reads and replaces values, and by a cut.
    lock: Mutex<()>,
    requests: Mutex<Requests>,
    wake: Condvar,
    poison: Poison,
}

/// The sealer thread and its requests.
pub(crate) struct Sealer {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// A block being put together: its first seq, its count, its body, and the
/// keys of the values it replaces.
struct Pack {
    first: u64,
    count: u32,
    body: Vec<u8>,
    keys: Vec<u64>,
}

impl Shared {
    /// Seals each `(session, all)`: its runs after its last block packed
    /// into blocks; with `all`, what is left over too, and the session's
    /// first value into a block of its own if it is not in one. One write
    /// and one sync of a segment for them all, then one sled batch.
    fn seal(&self, sessions: &[(SessionId, bool)]) -> Result<usize> {
        if self.block_bytes == 0 {
            return Ok(0);
        }
        let _sealing = relock(&self.lock);
        let mut packs: Vec<(SessionId, Pack)> = Vec::new();
        for (session, all) in sessions {
            for p in self.packs(*session, *all)? {
                packs.push((*session, p));
            }
        }
        if packs.is_empty() {
            return Ok(0);
        }
        let bodies: Vec<(u32, Vec<u8>)> = packs
            .iter_mut()
            .map(|(_, p)| (p.count, std::mem::take(&mut p.body)))
            .collect();
        let pointers = self.files.write_blocks(&bodies)?;
        let mut batch = sled::Batch::default();
        for ((session, p), pointer) in packs.iter().zip(&pointers) {
            for k in &p.keys[1..] {
                batch.remove(&key(*session, *k)[..]);
            }
            batch.insert(&key(*session, p.first)[..], pointer.encode());
        }
        self.events
            .apply_batch(batch)
            .map_err(|e| storage(e, "sealing runs into blocks"))?;
        Ok(packs.len())
    }

    /// The blocks a seal of `session` writes (see [`seal`](Self::seal)).
    fn packs(&self, session: SessionId, all: bool) -> Result<Vec<Pack>> {
        let budget = self.block_bytes.saturating_mul(SEAL_MAX_BLOCKS);
        let mut values: Vec<(u64, sled::IVec)> = Vec::new();
        let (mut bytes, mut end) = (0usize, None::<u64>);
        let values_of_session = self.events.range(key(session, 0)..=key(session, u64::MAX));
        for item in values_of_session.rev() {
            let (seq, v) = scanned(session, item)?;
            // The session's first value stays as it is: every open of the
            // session reads its first event (is it a fork?), and one event
            // should not cost a block's decompression.
            if seq == 0 {
                break;
            }
            let n = match runs::kind(&v) {
                Kind::Block(_) => break,
                Kind::Run(n) if runs::elements(&v[RUN_HEADER..], n).is_err() => break,
                Kind::Run(n) => u64::from(n),
                Kind::One => 1,
            };
            if end.is_some_and(|e| seq.checked_add(n) != Some(e)) {
                break;
            }
            end = Some(seq);
            bytes += v.len();
            values.push((seq, v));
            if bytes >= budget {
                break;
            }
        }
        values.reverse();
        let mut packs: Vec<Pack> = Vec::new();
        let mut open: Option<Pack> = None;
        for (seq, v) in &values {
            let p = open.get_or_insert_with(|| Pack {
                first: *seq,
                count: 0,
                body: Vec::with_capacity(self.block_bytes + runs::RUN_MAX),
                keys: Vec::new(),
            });
            match runs::kind(v) {
                // A run's body is its elements as a block holds them (each
                // checked to read, above): copied as it is.
                Kind::Run(n) => {
                    p.body.extend_from_slice(&v[RUN_HEADER..]);
                    p.count += n;
                }
                _ => {
                    runs::push_element(&mut p.body, v);
                    p.count += 1;
                }
            }
            p.keys.push(*seq);
            if p.body.len() >= self.block_bytes
                && let Some(full) = open.take()
            {
                packs.push(full);
            }
        }
        if all {
            packs.extend(open.take());
            if let Some(first) = self.first_value(session)? {
                packs.push(first);
            }
        }
        Ok(packs)
    }
}

impl Shared {
    /// The session's first value as a pack of its own, if it is a run or
    /// an event alone (not a block, and readable).
    fn first_value(&self, session: SessionId) -> Result<Option<Pack>> {
        let v = self
            .events
            .get(key(session, 0))
            .map_err(|e| storage(e, "reading a session's first value"))?;
        let Some(v) = v else { return Ok(None) };
        let mut body = Vec::with_capacity(v.len());
        let count = match runs::kind(&v) {
            Kind::Block(_) => return Ok(None),
            Kind::Run(n) => {
                let b = &v[RUN_HEADER..];
                if runs::elements(b, n).is_err() {
                    return Ok(None);
                }
                body.extend_from_slice(b);
                n
            }
            Kind::One => {
                runs::push_element(&mut body, &v);
                1
            }
        };
        Ok(Some(Pack {
            first: 0,
            count,
            body,
            keys: vec![0],
        }))
    }
}

impl Sealer {
    /// Starts the thread that seals `events`' runs into blocks of about
    /// `block_bytes` in `files`; a failure poisons `poison`.
    pub(crate) fn start(
        events: sled::Tree,
        files: Arc<FrameFiles>,
        block_bytes: usize,
        poison: Poison,
    ) -> Result<Sealer> {
        let shared = Arc::new(Shared {
            events,
            files,
            block_bytes,
            lock: Mutex::new(()),
            requests: Mutex::new(Requests::default()),
            wake: Condvar::new(),
            poison,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("agent-journal-seal".into())
            .spawn(move || {
                loop {
                    // Every request queued, sealed together.
                    let asked: Vec<(SessionId, bool)> = {
                        let mut q = relock(&s.requests);
                        loop {
                            if !q.sessions.is_empty() {
                                break q.sessions.drain(..).collect();
                            }
                            if q.stop {
                                return;
                            }
                            q = s.wake.wait(q).unwrap_or_else(|p| p.into_inner());
                        }
                    };
                    // A failure poisons the journal and stops the thread (the
                    // runs stay as they are); so does a panic of sled.
                    let sealed =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.seal(&asked)));
                    let failed = match sealed {
                        Ok(Ok(_)) => continue,
                        Ok(Err(e)) => e.to_string(),
                        Err(p) => format!("sled failed while sealing ({})", panic_message(&*p)),
                    };
                    let first = asked.first().map(|(id, _)| *id);
                    s.poison.set(format!(
                        "sealing runs into blocks (session {}): {failed}",
                        first.map_or_else(String::new, |id| id.to_string())
                    ));
                    return;
                }
            })
            .map_err(|e| Error::io("starting the sealer thread".to_owned(), e))?;
        Ok(Sealer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Asks for `session` to be sealed (once, however often asked before
    /// the thread gets to it).
    pub(crate) fn request(&self, session: SessionId) {
        self.ask(session, false);
    }

    fn ask(&self, session: SessionId, all: bool) -> bool {
        let mut q = relock(&self.shared.requests);
        if q.stop {
            return false;
        }
        match q.sessions.iter_mut().find(|(s, _)| *s == session) {
            Some(queued) => queued.1 |= all,
            None => {
                q.sessions.push_back((session, all));
                self.shared.wake.notify_one();
            }
        }
        true
    }

    /// Seals every value of `session` after its last block, and its first
    /// value, on this thread (a rollover does, so that every event it
    /// makes durable has a copy outside sled's file).
    pub(crate) fn seal_all(&self, sessions: &[SessionId]) -> Result<usize> {
        let asked: Vec<(SessionId, bool)> = sessions.iter().map(|s| (*s, true)).collect();
        self.shared.seal(&asked)
    }

    /// Holds off seals while the guard lives (a cut takes it).
    pub(crate) fn hold(&self) -> MutexGuard<'_, ()> {
        relock(&self.shared.lock)
    }

    /// Seals what was asked for, then stops the thread; idempotent.
    pub(crate) fn stop(&self) {
        let Some(thread) = relock(&self.thread).take() else {
            return;
        };
        relock(&self.shared.requests).stop = true;
        self.shared.wake.notify_all();
        let _ = thread.join();
    }
}

impl Drop for Sealer {
    fn drop(&mut self) {
        self.stop();
    }
}
