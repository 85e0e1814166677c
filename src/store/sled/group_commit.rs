//! Group commit: concurrent writers share one flush.
//!
//! A writer that needs durability takes a ticket *after* its write (or, for
//! the write-ahead log, a ticket per record as it queues it). If no flush
//! is running it becomes the leader: it flushes, which covers every ticket
//! taken before the flush started, and wakes the others. If a flush is
//! running, it waits for the one that covers its ticket. N writers arriving
//! together cost about two flushes, not N.
//!
//! A failed flush poisons the journal ([`Poison`]): the error is returned
//! to every waiter and every later caller gets `Poisoned`, because the
//! durability of what was acknowledged can no longer be promised.

use std::sync::{Mutex, MutexGuard};

use crate::error::Result;
use crate::store::poison::Poison;

#[derive(Default)]
struct State {
    /// Tickets handed out.
    requested: u64,
    /// Every ticket `<= completed` is durable.
    completed: u64,
    flushing: bool,
    flushes: u64,
    /// Writers waiting for a flush right now.
    waiting: u32,
    /// Tickets the last flush covered.
    last_batch: u64,
    /// The waiting writers: the ticket each waits for, and its thread.
    /// A flush wakes those it covered and, if others wait, the one with
    /// the smallest ticket to lead the next flush; the rest sleep on.
    /// (A condition variable would wake them all, for most of them to go
    /// back to sleep: context switches that cost more than the flush's
    /// own work at 16 writers on 2 cores.)
    parked: Vec<(u64, std::thread::Thread)>,
}

impl State {
    /// Wakes the writers `self.completed` covers and one more to lead, if
    /// any waits; removes them from the list.
    fn wake(&mut self) {
        let completed = self.completed;
        self.parked.retain(|(t, thread)| {
            let done = *t <= completed;
            if done {
                thread.unpark();
            }
            !done
        });
        if let Some(i) = (0..self.parked.len()).min_by_key(|&i| self.parked[i].0) {
            self.parked.swap_remove(i).1.unpark();
        }
    }

    /// Wakes every waiting writer (after a failure).
    fn wake_all(&mut self) {
        for (_, thread) in self.parked.drain(..) {
            thread.unpark();
        }
    }
}

/// Shares flushes between concurrent writers.
#[derive(Default)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    /// The journal's: set by a failed flush, checked before every commit.
    poison: Poison,
}

impl GroupCommit {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counters
        // inconsistent (they are only ever advanced), so recover the guard.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A committer whose failures poison `poison`.
    pub(crate) fn new(poison: Poison) -> Self {
        GroupCommit {
            poison,
            ..GroupCommit::default()
        }
    }

    /// Returns an error if an earlier write or flush failed.
    pub(crate) fn check(&self) -> Result<()> {
        self.poison.check()
    }

    /// Number of flushes actually performed (for tests and benchmarks).
    pub(crate) fn flushes(&self) -> u64 {
        self.lock().flushes
    }

    /// Yields the processor while new tickets keep arriving, for at most
    /// 1 ms: writers that were appending when the flush was due join it.
    fn gather(&self) {
        let start = std::time::Instant::now();
        let mut seen = self.lock().requested;
        loop {
            std::thread::yield_now();
            let now = self.lock().requested;
            if now == seen || start.elapsed() > std::time::Duration::from_millis(1) {
                return;
            }
            seen = now;
        }
    }

    /// Takes the next ticket (a writer's record number) without waiting.
    pub(crate) fn ticket(&self) -> u64 {
        let mut s = self.lock();
        s.requested += 1;
        s.requested
    }

    /// The last ticket handed out.
    pub(crate) fn requested(&self) -> u64 {
        self.lock().requested
    }

    /// Waits until a flush that started after this call has completed,
    /// running it with `flush` if no one else is.
    pub(crate) fn commit(&self, flush: impl Fn() -> Result<()>) -> Result<()> {
        let ticket = self.ticket();
        self.commit_upto(ticket, || {
            let covered = self.requested();
            flush()?;
            Ok(covered)
        })
    }

    /// Waits until every ticket up to `target` is durable, running `flush`
    /// if no one else is; `flush` returns the last ticket it made durable.
    pub(crate) fn commit_upto(&self, target: u64, flush: impl Fn() -> Result<u64>) -> Result<()> {
        let mut s = self.lock();
        loop {
            self.poison.check()?;
            if s.completed >= target {
                return Ok(());
            }
            if !s.flushing {
                s.flushing = true;
                // When writers are arriving together, let the ones that are
                // mid-append take their tickets before flushing: otherwise
                // flushes alternate between one writer and all the others.
                // A lone writer never waits.
                let concurrent = s.waiting > 0 || s.last_batch > 1;
                drop(s);
                if concurrent {
                    self.gather();
                }
                let result = flush();
                s = self.lock();
                s.flushing = false;
                s.flushes += 1;
                match result {
                    Ok(covered) => {
                        s.last_batch = covered.saturating_sub(s.completed);
                        s.completed = s.completed.max(covered);
                    }
                    Err(e) => {
                        self.poison.set(e.to_string());
                        s.wake_all();
                        return Err(e);
                    }
                }
                s.wake();
            } else {
                let me = std::thread::current();
                let id = me.id();
                s.parked.push((target, me));
                s.waiting += 1;
                drop(s);
                // A wake-up before the park is kept: `park` returns at once.
                std::thread::park();
                s = self.lock();
                s.waiting -= 1;
                // Still listed after a spurious wake-up: listed again below
                // if it must wait on.
                s.parked.retain(|(_, t)| t.id() != id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    #[test]
    fn concurrent_writers_share_flushes() {
        let gc = Arc::new(GroupCommit::default());
        let calls = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let gc = gc.clone();
                let calls = calls.clone();
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        gc.commit(|| {
                            calls.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(2));
                            Ok(())
                        })
                        .expect("commit");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("join");
        }
        let n = calls.load(Ordering::SeqCst);
        assert!(
            n < 16 * 20 / 2,
            "expected shared flushes, got {n} for 320 commits"
        );
        assert_eq!(gc.flushes(), n);
    }

    #[test]
    fn a_failed_flush_poisons_every_later_commit() {
        let gc = GroupCommit::default();
        let r = gc.commit(|| Err(Error::io("syncing", std::io::Error::other("disk full"))));
        assert!(matches!(r, Err(Error::Io { .. })));
        assert!(matches!(gc.commit(|| Ok(())), Err(Error::Poisoned(m)) if m.contains("disk full")));
        assert!(matches!(gc.check(), Err(Error::Poisoned(_))));
    }
}
