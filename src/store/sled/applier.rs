//! Inserts of appends into sled, made by a thread of their own.
//!
//! The sled insert is the largest part of an append's own work (about
//! 10-15 us on a cache made cold by a sync; ~13 us per 300-byte value in a
//! raw insert loop), and it is not what makes an append durable: a
//! `Buffered` append is durable at sled's next flush, a `Synced` one once
//! its frames are in the write-ahead log. So the appender queues the insert
//! here and goes on (to encode and fold the next event, or to write and
//! sync the log) while this thread inserts into sled on another core.
//!
//! Everything that reads or removes events, writes a snapshot, or makes sled
//! durable first calls [`Applier::drain`], which returns once every queued
//! insert is in sled; so readers never see the queue, a snapshot never
//! reaches sled before the events it covers, and a rollover's sled flush
//! covers every record of the log. A crash loses the queue, and the next
//! open puts back from the log whatever was acknowledged.
//!
//! The frames of a session's consecutive appends are inserted as one *run*
//! (`runs.rs`) rather than a key each: an append's frames wait here, in a
//! run of at most 7 KiB, until the run is full, older than [`MAX_AGE`], the
//! thread finds no more work, or a drain. An append is always in one sled
//! batch (all or none). Once a session has put [`Shared::block_bytes`] into
//! sled, the sealer (`sled/seal.rs`) is asked to pack its runs into a
//! compressed block.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::poison::Poison;
use crate::store::sled::fault::panic_message;
use crate::store::sled::frame_files::FrameFiles;
use crate::store::sled::keys::key;
use crate::store::sled::runs::{self, RUN_HEADER, RUN_MAX};
use crate::store::sled::snapfiles::INLINE_MAX;

/// Asked to pack a session's runs into a block (the sealer).
pub(crate) type SealRequest = Arc<dyn Fn(SessionId) + Send + Sync>;

/// A run that waited this long goes into sled at the thread's next look
/// (a `Buffered` append reaches sled's buffer at most this much later than
/// it would alone).
const MAX_AGE: Duration = Duration::from_millis(50);

/// Inserts queued beyond this many are made by the appender itself.
const QUEUE_MAX: usize = 4096;

/// While there is work, the thread looks at the queue this often instead
/// of being woken by each append: waking a thread on another core costs the
/// waker an inter-processor interrupt (several microseconds in a VM) on
/// the append's path. An idle thread sleeps until the next append wakes it.
const POLL: std::time::Duration = std::time::Duration::from_millis(1);

/// A queue this long wakes the thread before its next look.
const WAKE_AT: usize = 64;

#[derive(Default)]
struct Queue {
    items: Vec<Insert>,
    /// The thread sleeps until woken (it found no work at its last look).
    sleeping: bool,
}

/// One append: a session, its first seq, its frames.
type Insert = (SessionId, u64, Vec<Vec<u8>>);

/// A session's frames waiting to go into sled as one run.
struct Run {
    first: u64,
    elements: Vec<Vec<u8>>,
    /// The run's bytes so far (header included).
    bytes: usize,
    since: Instant,
}

/// What the insert thread keeps between batches.
#[derive(Default)]
struct Held {
    /// Runs not in sled yet, by session.
    runs: HashMap<SessionId, Run>,
    /// Bytes put into sled per session since the sealer was last asked.
    unsealed: HashMap<SessionId, usize>,
    /// Sessions put into sled since the last rollover's seal.
    touched: std::collections::HashSet<SessionId>,
}

struct Shared {
    events: sled::Tree,
    /// Where frames over [`INLINE_MAX`] go (`frame_files.rs`).
    files: Arc<FrameFiles>,
    queue: Mutex<Queue>,
    /// Held while inserting: a drain waits for the inserts in progress.
    applying: Mutex<Held>,
    /// Bytes a session puts into sled before the sealer is asked to pack
    /// them into a block (0: never).
    block_bytes: usize,
    seal: Option<SealRequest>,
    wake: Condvar,
    stop: AtomicBool,
    /// The journal's: the first failed insert sets it, and later appends
    /// and drains fail with it.
    poison: Poison,
}

/// The queue of sled inserts and the thread that makes them.
pub(crate) struct Applier {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // The queue is only pushed to or taken whole; `applying` guards nothing.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Puts `run`'s values into `out`: runs of at most [`RUN_MAX`] bytes, an
/// element alone as it is.
fn close(session: SessionId, run: Run, out: &mut Vec<(SessionId, u64, Vec<u8>)>) {
    let refs: Vec<&[u8]> = run.elements.iter().map(Vec::as_slice).collect();
    for (i, value) in runs::pack(&refs) {
        out.push((session, run.first + i as u64, value));
    }
}

impl Shared {
    /// Takes every queued insert and makes it, under `applying`: the runs
    /// that are full or old go into sled, and every run if `all`.
    fn apply_queued(&self, all: bool) -> Result<()> {
        let mut held = relock(&self.applying);
        let mut batch = std::mem::take(&mut relock(&self.queue).items);
        if let Err(e) = self.store_large(&mut batch) {
            self.poison.set(e.to_string());
            return Err(e);
        }
        let now = Instant::now();
        // (session, key seq, value), in order per session.
        let mut out: Vec<(SessionId, u64, Vec<u8>)> = Vec::new();
        for (session, first, frames) in batch {
            let add: usize = frames.iter().map(|f| runs::element_bytes(f)).sum();
            let ends = held.runs.get(&session).is_some_and(|r| {
                r.first + r.elements.len() as u64 != first || r.bytes + add > RUN_MAX
            });
            if ends && let Some(run) = held.runs.remove(&session) {
                close(session, run, &mut out);
            }
            if RUN_HEADER + add > RUN_MAX {
                // More than a run holds: this append's values go in now,
                // in this batch.
                close(
                    session,
                    Run {
                        first,
                        elements: frames,
                        bytes: 0,
                        since: now,
                    },
                    &mut out,
                );
                continue;
            }
            let run = held.runs.entry(session).or_insert_with(|| Run {
                first,
                elements: Vec::new(),
                bytes: RUN_HEADER,
                since: now,
            });
            run.bytes += add;
            run.elements.extend(frames);
        }
        let done: Vec<SessionId> = held
            .runs
            .iter()
            .filter(|(_, r)| all || now.duration_since(r.since) >= MAX_AGE)
            .map(|(s, _)| *s)
            .collect();
        for session in done {
            if let Some(run) = held.runs.remove(&session) {
                close(session, run, &mut out);
            }
        }
        let result = match out.as_slice() {
            [] => return Ok(()),
            [(session, seq, value)] => self
                .events
                .insert(key(*session, *seq), value.as_slice())
                .map(|_| ()),
            many => {
                let mut b = sled::Batch::default();
                for (session, seq, value) in many {
                    b.insert(&key(*session, *seq)[..], value.as_slice());
                }
                self.events.apply_batch(b)
            }
        };
        if let Err(e) = result {
            let (session, first, _) = &out[0];
            let message = format!("inserting session {session} from seq {first} into sled: {e}");
            self.poison.set(message.clone());
            return Err(Error::Storage(message));
        }
        held.touched.extend(out.iter().map(|(s, _, _)| *s));
        if let (Some(seal), true) = (&self.seal, self.block_bytes > 0) {
            for (session, _, value) in &out {
                let n = held.unsealed.entry(*session).or_default();
                *n += value.len();
                if *n >= self.block_bytes {
                    *n = 0;
                    seal(*session);
                }
            }
        }
        Ok(())
    }

    fn check(&self) -> Result<()> {
        self.poison.check()
    }

    /// Writes the frames of `batch` over [`INLINE_MAX`] to a segment (one
    /// sync for them all) and puts each one's pointer in its place: sled
    /// then holds no value large enough to make it write a blob.
    fn store_large(&self, batch: &mut [Insert]) -> Result<()> {
        let large = |f: &Vec<u8>| f.len() > INLINE_MAX;
        let pointers = {
            let frames: Vec<&[u8]> = batch
                .iter()
                .flat_map(|(_, _, fs)| fs.iter().filter(|f| large(f)))
                .map(Vec::as_slice)
                .collect();
            if frames.is_empty() {
                return Ok(());
            }
            self.files.write(&frames)?
        };
        let mut pointers = pointers.into_iter();
        for f in batch.iter_mut().flat_map(|(_, _, fs)| fs.iter_mut()) {
            if large(f)
                && let Some(p) = pointers.next()
            {
                *f = p;
            }
        }
        Ok(())
    }
}

impl Applier {
    /// Starts the thread that inserts into `events`; a failed insert
    /// poisons `poison`.
    pub(crate) fn start(
        events: sled::Tree,
        files: Arc<FrameFiles>,
        block_bytes: usize,
        seal: Option<SealRequest>,
        poison: Poison,
    ) -> Result<Applier> {
        let shared = Arc::new(Shared {
            events,
            files,
            queue: Mutex::new(Queue::default()),
            applying: Mutex::new(Held::default()),
            block_bytes,
            seal,
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            poison,
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("agent-journal-apply".into())
            .spawn(move || {
                // Whether the last look found work: then look again after
                // `POLL`, else sleep until woken.
                let mut busy = false;
                loop {
                    // No more work found after some: every run goes in.
                    let mut idle = false;
                    {
                        let mut q = relock(&s.queue);
                        while q.items.is_empty() {
                            if s.stop.load(Ordering::Acquire) {
                                return;
                            }
                            if busy {
                                let (g, waited) = s
                                    .wake
                                    .wait_timeout(q, POLL)
                                    .unwrap_or_else(|p| p.into_inner());
                                q = g;
                                if waited.timed_out() && q.items.is_empty() {
                                    idle = true;
                                    break;
                                }
                            } else {
                                q.sleeping = true;
                                q = s.wake.wait(q).unwrap_or_else(|p| p.into_inner());
                                q.sleeping = false;
                            }
                        }
                    }
                    busy = !idle;
                    // A failure poisons the journal; the thread stops. So
                    // does a panic of sled (damaged pages): contained here,
                    // it would otherwise leave every drain waiting.
                    let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        s.apply_queued(idle)
                    }));
                    match applied {
                        Ok(Ok(())) => {}
                        Ok(Err(_)) => return,
                        Err(p) => {
                            s.poison.set(format!(
                                "sled failed while inserting ({})",
                                panic_message(&*p)
                            ));
                            return;
                        }
                    }
                }
            })
            .map_err(|e| Error::io("starting the sled insert thread".to_owned(), e))?;
        Ok(Applier {
            shared,
            thread: Some(thread),
        })
    }

    /// Returns an error if an insert failed.
    pub(crate) fn check(&self) -> Result<()> {
        self.shared.check()
    }

    /// Queues the insert of `frames` at `first, first + 1, ...`.
    pub(crate) fn push(&self, session: SessionId, first: u64, frames: &[Vec<u8>]) -> Result<()> {
        let (len, wake) = {
            let mut q = relock(&self.shared.queue);
            q.items.push((session, first, frames.to_vec()));
            let wake = q.sleeping || q.items.len() == WAKE_AT;
            q.sleeping = false;
            (q.items.len(), wake)
        };
        if len > QUEUE_MAX {
            // The thread is behind: help it rather than grow the queue.
            return self.drain();
        }
        if wake {
            self.shared.wake.notify_one();
        }
        Ok(())
    }

    /// Drains the queue; returns the sessions put into sled since the last
    /// call (or [`touch`](Self::touch)ed), forgetting them.
    pub(crate) fn take_touched(&self) -> Result<Vec<SessionId>> {
        self.drain()?;
        let mut held = relock(&self.shared.applying);
        let mut v: Vec<SessionId> = held.touched.drain().collect();
        v.sort_unstable();
        Ok(v)
    }

    /// Counts `session` as put into sled (by a write that did not go
    /// through the queue: a replay of the log, a cut).
    pub(crate) fn touch(&self, session: SessionId) {
        relock(&self.shared.applying).touched.insert(session);
    }

    /// Returns once every insert queued so far is in sled.
    pub(crate) fn drain(&self) -> Result<()> {
        self.shared.check()?;
        self.shared.apply_queued(true)
    }
}

impl Applier {
    /// Stops the thread and makes what it left; idempotent.
    pub(crate) fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        {
            // Under the queue's lock, where the thread looks at it: the
            // thread cannot miss it between its look and its wait.
            let _q = relock(&self.shared.queue);
            self.shared.stop.store(true, Ordering::Release);
        }
        self.shared.wake.notify_all();
        let _ = thread.join();
        // What the thread left (it stops at a failure) is made here, or
        // replayed from the log at the next open.
        let _ = self.shared.apply_queued(true);
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Arc<FrameFiles> {
        // Each test's frames are small: nothing is written here.
        Arc::new(FrameFiles::new(
            &std::env::temp_dir().join("agent-journal-no-such-db"),
        ))
    }

    fn frames(session: u8, seq: u64) -> Vec<Vec<u8>> {
        vec![
            [session]
                .iter()
                .chain(&seq.to_le_bytes())
                .copied()
                .collect(),
        ]
    }

    /// The elements sled holds for `session`, runs opened, with the seq
    /// of each; every value at most [`RUN_MAX`] bytes.
    fn stored(events: &sled::Tree, session: SessionId) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        for item in events.scan_prefix(session.as_bytes()) {
            let (k, v) = item.expect("item");
            let seq = u64::from_be_bytes(k[16..].try_into().expect("seq"));
            assert!(v.len() <= RUN_MAX, "a value of {} bytes", v.len());
            match runs::kind(&v) {
                runs::Kind::Run(n) => {
                    let body = &v[RUN_HEADER..];
                    for (i, r) in runs::elements(body, n)
                        .expect("run")
                        .into_iter()
                        .enumerate()
                    {
                        out.push((seq + i as u64, body[r].to_vec()));
                    }
                }
                _ => out.push((seq, v.to_vec())),
            }
        }
        out
    }

    fn start(events: &sled::Tree) -> Applier {
        Applier::start(events.clone(), files(), 0, None, Poison::default()).expect("start")
    }

    #[test]
    fn every_queued_insert_is_in_sled_after_a_drain_in_order() {
        let db = sled::Config::new()
            .temporary(true)
            .open()
            .expect("temporary sled");
        let events = db.open_tree("events").expect("tree");
        let applier = std::sync::Arc::new(start(&events));
        let per = (QUEUE_MAX as u64) * 2;
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let applier = applier.clone();
                std::thread::spawn(move || {
                    let session = SessionId::from_bytes([t; 16]);
                    for seq in 0..per {
                        applier.push(session, seq, &frames(t, seq)).expect("push");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
        applier.drain().expect("drain");
        for t in 0..4u8 {
            let session = SessionId::from_bytes([t; 16]);
            let want: Vec<(u64, Vec<u8>)> = (0..per)
                .flat_map(|seq| frames(t, seq).into_iter().map(move |f| (seq, f)))
                .collect();
            assert_eq!(stored(&events, session), want, "session {t}");
        }
        // Consecutive appends share runs: far fewer keys than events.
        assert!(
            events.len() < (4 * per / 10) as usize,
            "{} keys",
            events.len()
        );
    }

    #[test]
    fn a_batch_is_inserted_whole_and_dropping_the_applier_inserts_what_is_left() {
        let db = sled::Config::new()
            .temporary(true)
            .open()
            .expect("temporary sled");
        let events = db.open_tree("events").expect("tree");
        let session = SessionId::from_bytes([9; 16]);
        let applier = start(&events);
        let batch: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 10]).collect();
        applier.push(session, 0, &batch).expect("push");
        applier.push(session, 5, &frames(9, 5)).expect("push");
        drop(applier);
        let got = stored(&events, session);
        assert_eq!(got.len(), 6);
        assert_eq!(got[3], (3, vec![3u8; 10]));
    }

    #[test]
    fn an_append_larger_than_a_run_goes_in_as_runs_in_one_batch_and_order_holds() {
        let db = sled::Config::new()
            .temporary(true)
            .open()
            .expect("temporary sled");
        let events = db.open_tree("events").expect("tree");
        let session = SessionId::from_bytes([3; 16]);
        let applier = start(&events);
        let mut want = Vec::new();
        let mut seq = 0u64;
        for n in [1usize, 3, 40, 2, 100, 1] {
            let batch: Vec<Vec<u8>> = (0..n).map(|i| vec![(seq + i as u64) as u8; 700]).collect();
            applier.push(session, seq, &batch).expect("push");
            want.extend(
                batch
                    .into_iter()
                    .enumerate()
                    .map(|(i, f)| (seq + i as u64, f)),
            );
            seq += n as u64;
        }
        applier.drain().expect("drain");
        assert_eq!(stored(&events, session), want);
    }
}
