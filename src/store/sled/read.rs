//! The sled store's read path: the frames of a range of events, out of
//! single values, runs and blocks (`runs.rs`), with a long scan read ahead
//! on a thread of its own.

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::SledStore;
use super::fault::{scanned, sled_panicked};
use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::sled::frame_files;
use crate::store::sled::keys::key;
use crate::store::sled::runs::{self, Kind, RUN_HEADER};
use crate::store::{SharedBytes, Visit};

/// Events a scan reads itself before it hands sled's side to a thread of
/// its own (a short scan is not worth a thread).
const SCAN_PIPELINE_AFTER: usize = 8192;

/// Events the scan thread hands over at a time.
const SCAN_BATCH: usize = 256;

/// The elements of a value: the buffer holding them, each one's range in
/// it, and the index of the first that cannot be read, if one cannot.
type Elements = (SharedBytes, Vec<std::ops::Range<usize>>, Option<usize>);

impl SledStore {
    /// The value holding event `seq` if it starts before it (a run or a
    /// block), with its first seq.
    pub(super) fn covering(
        &self,
        session: SessionId,
        seq: u64,
    ) -> Result<Option<(u64, sled::IVec)>> {
        let Some(item) = self
            .events
            .range(key(session, 0)..=key(session, seq))
            .next_back()
        else {
            return Ok(None);
        };
        let (at, v) = scanned(session, item)?;
        Ok((at < seq && at.saturating_add(runs::span(&v)) > seq).then_some((at, v)))
    }

    /// The elements of a run or block value starting at `at`: the buffer
    /// that holds them, and each one's range in it; `Err` for the first
    /// element that cannot be read (with the ones before it).
    pub(super) fn value_elements(
        &self,
        session: SessionId,
        at: u64,
        from: u64,
        v: &sled::IVec,
    ) -> Result<Elements> {
        let (whole, base, count) = match runs::kind(v) {
            Kind::One => {
                let all = std::iter::once(0..v.len()).collect();
                return Ok((SharedBytes::new(v.clone()), all, None));
            }
            Kind::Run(n) => (SharedBytes::new(v.clone()), RUN_HEADER, n),
            Kind::Block(p) => (
                SharedBytes::from(self.frame_files.read_block(session, from.max(at), &p)?),
                0,
                p.count,
            ),
        };
        let shift = |r: std::ops::Range<usize>| base + r.start..base + r.end;
        Ok(match runs::elements(&whole[base..], count) {
            Ok(rs) => (whole, rs.into_iter().map(shift).collect(), None),
            Err((rs, i)) => (whole, rs.into_iter().map(shift).collect(), Some(i)),
        })
    }

    /// Hands `out` the frames of the value starting at `at` for the events
    /// `lo..to`.
    fn expand(
        &self,
        session: SessionId,
        at: u64,
        v: &sled::IVec,
        lo: u64,
        to: u64,
        out: &mut dyn FnMut(u64, SharedBytes) -> Result<Visit>,
    ) -> Result<Visit> {
        if runs::kind(v) == Kind::One {
            if at < lo || at >= to {
                return Ok(Visit::Continue(()));
            }
            let frame = if frame_files::is_pointer(v) {
                SharedBytes::from(self.frame_files.read(session, at, v)?)
            } else {
                SharedBytes::new(v.clone())
            };
            return out(at, frame);
        }
        let (whole, ranges, failed) = self.value_elements(session, at, lo, v)?;
        for (i, r) in ranges.into_iter().enumerate() {
            let seq = at + i as u64;
            if seq < lo {
                continue;
            }
            if seq >= to {
                return Ok(Visit::Continue(()));
            }
            let frame = if frame_files::is_pointer(&whole[r.clone()]) {
                SharedBytes::from(self.frame_files.read(session, seq, &whole[r])?)
            } else {
                whole.slice(r)
            };
            if out(seq, frame)?.is_break() {
                return Ok(Visit::Break(()));
            }
        }
        let Some(bad) = failed.map(|i| at + i as u64) else {
            return Ok(Visit::Continue(()));
        };
        if bad.max(lo) >= to {
            return Ok(Visit::Continue(()));
        }
        Err(Error::corruption(
            Some(session),
            Some(bad.max(lo)),
            None,
            format!(
                "the run or block of events from seq {at} is damaged at event {bad}: \
                 it and the events after it in it cannot be read"
            ),
        ))
    }

    /// Hands `out` the frames of events `from..to` of `session`, in order,
    /// until it returns `Break` (then returns `Break`).
    ///
    /// A value that starts past the next event wanted, or the end of the
    /// values before `to`, is looked at once more from that event: a seal
    /// may have just moved the events before it into a block under an
    /// earlier key. Then it is a gap, which the reader above reports.
    fn read_range(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        out: &mut dyn FnMut(u64, SharedBytes) -> Result<Visit>,
    ) -> Result<Visit> {
        let mut next = from;
        let mut looked_again = None;
        'seek: while next < to {
            let start = self.covering(session, next)?.map_or(next, |(at, _)| at);
            for item in self.events.range(key(session, start)..key(session, to)) {
                let (seq, v) = scanned(session, item)?;
                let end = seq.saturating_add(runs::span(&v));
                if end <= next {
                    continue;
                }
                if seq > next && looked_again != Some(next) {
                    looked_again = Some(next);
                    continue 'seek;
                }
                if self
                    .expand(session, seq, &v, next.max(seq), to, out)?
                    .is_break()
                {
                    return Ok(Visit::Break(()));
                }
                next = end;
            }
            // Ended short of `to`: the same look, for the events a seal
            // may have moved behind the last value read.
            if next < to && looked_again != Some(next) {
                looked_again = Some(next);
                continue 'seek;
            }
            break;
        }
        Ok(Visit::Continue(()))
    }

    /// Calls `visit(seq, frame)` for the events `from <= seq < to` of
    /// `session`, in order, until it returns `Break`.
    ///
    /// A long scan reads sled on a thread of its own after its first
    /// [`SCAN_PIPELINE_AFTER`] events, a batch ahead of `visit`: walking
    /// sled's tree, reading and decompressing blocks, and folding the events
    /// then run on two cores at once.
    pub(super) fn scan_values(
        &self,
        session: SessionId,
        from: u64,
        to: u64,
        visit: &mut dyn FnMut(u64, SharedBytes) -> Result<Visit>,
    ) -> Result<()> {
        if from >= to {
            return Ok(());
        }
        self.drain()?;
        let (mut next, mut seen, mut handed_on) = (from, 0, false);
        // (`Break`: the visitor stopped, or the rest is handed on.)
        let _ = self.read_range(session, from, to, &mut |seq, frame| {
            if seen == SCAN_PIPELINE_AFTER {
                handed_on = true;
                return Ok(Visit::Break(()));
            }
            (next, seen) = (seq.saturating_add(1), seen + 1);
            visit(seq, frame)
        })?;
        if !handed_on {
            return Ok(());
        }
        let path = self.path.as_path();
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Vec<(u64, SharedBytes)>>>(4);
            let reader = move || {
                // A panic of sled on this thread is reported to the caller.
                let guarded_tx = tx.clone();
                let read = move || {
                    let mut batch = Vec::with_capacity(SCAN_BATCH);
                    let read = self.read_range(session, next, to, &mut |seq, frame| {
                        batch.push((seq, frame));
                        if batch.len() == SCAN_BATCH {
                            let full =
                                std::mem::replace(&mut batch, Vec::with_capacity(SCAN_BATCH));
                            // Err: the visitor stopped (the receiver is gone).
                            if tx.send(Ok(full)).is_err() {
                                return Ok(Visit::Break(()));
                            }
                        }
                        Ok(Visit::Continue(()))
                    });
                    if !batch.is_empty() {
                        let _ = tx.send(Ok(batch));
                    }
                    if let Err(e) = read {
                        let _ = tx.send(Err(e));
                    }
                };
                if let Err(p) = catch_unwind(AssertUnwindSafe(read)) {
                    let _ = guarded_tx.send(Err(sled_panicked(path, "reading events", &*p)));
                }
            };
            std::thread::Builder::new()
                .name("agent-journal-scan".into())
                .spawn_scoped(scope, reader)
                .map_err(|e| Error::io("starting a scan thread", e))?;
            for batch in rx {
                for (seq, frame) in batch? {
                    if visit(seq, frame)?.is_break() {
                        return Ok(());
                    }
                }
            }
            Ok(())
        })
    }
}
