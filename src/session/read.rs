//! Reading a session back: events in a range (a fork's prefix from its
//! parent) and the state at any seq.

use std::ops::RangeBounds;

use super::replay::{check_frame, replay};
use super::{LoadStats, Session, bounds};
use crate::error::{Error, Result};
use crate::event::Envelope;
use crate::state::conversation_log::inner::InnerLoopLog;
use crate::state::{ConversationLog, SessionState};
use crate::store::Visit;

impl Session {
    /// The conversation this session holds right after event `seq`, as the
    /// conversation engine's records, whichever door its messages came in
    /// by: a conversation the engine wrote is its own log; a session of
    /// the inner loop (a run, an imported chat) is read from its events
    /// 0..=seq, each evaluation a turn with the same id, each provider
    /// round trip a call of it (see
    /// [`ConversationLog::of_inner_loop`]). `None` when the session holds
    /// no message and no turn.
    ///
    /// Cost: a clone of the log for the engine's conversations; one pass
    /// over the events 0..=seq for the inner loop's, holding only the
    /// records.
    ///
    /// # Errors
    /// [`Error::SeqOutOfRange`] past the head; [`Error::Corruption`] for a
    /// damaged frame.
    pub fn conversation_at(&self, seq: u64) -> Result<Option<ConversationLog>> {
        let state = self.state_at(seq)?;
        let own = state.conversation_log();
        if own.is_conversation() {
            return Ok(Some(own.clone()));
        }
        let mut b = InnerLoopLog::new(self.id());
        self.for_each_event(..=seq, |env| {
            b.push(&env);
            Ok(())
        })?;
        let log = b.finish();
        Ok((!log.messages().is_empty() || !log.turns().is_empty()).then_some(log))
    }

    /// The state right after event `seq`: the fold of events `0..=seq`,
    /// from the latest snapshot at or before it (with the default
    /// `Incremental` strategy, fewer than its spacing of events are
    /// replayed, at any seq).
    ///
    /// # Errors
    /// [`Error::SeqOutOfRange`] past the head.
    pub fn state_at(&self, seq: u64) -> Result<SessionState> {
        self.state_at_with_stats(seq).map(|(s, _)| s)
    }

    /// [`state_at`](Self::state_at), and what it read: the snapshot it
    /// started from (and the deltas on it) and the events it replayed.
    ///
    /// # Errors
    /// As [`state_at`](Self::state_at).
    pub fn state_at_with_stats(&self, seq: u64) -> Result<(SessionState, LoadStats)> {
        let mut stats = LoadStats::default();
        let (head, last_snapshot) = {
            // Decide under one lock: an append between two would make "the
            // state at the head" a later state.
            let core = self.core();
            if seq >= core.head {
                return Err(Error::SeqOutOfRange {
                    session: self.id(),
                    seq,
                    len: core.head,
                });
            }
            if seq + 1 == core.head {
                return Ok(((*core.state).clone(), stats));
            }
            (core.head, core.last_snapshot)
        };
        let offset = self.offset();
        if let Some(b) = self.shared.base
            && seq <= b.at
        {
            // Inside the prefix: the parent's state there.
            return self.journal.session(b.parent)?.state_at_with_stats(seq);
        }
        let config = &self.journal.inner.config;
        let mut state = None;
        let mut from = offset;
        // The latest snapshot at or before `seq`, from its chain: a
        // session keeps its delta snapshots, so this replays fewer events
        // than their spacing.
        if last_snapshot.is_some() {
            let chain = super::chain::read_chain(&self.journal, self.id(), offset, seq + 1, head);
            stats.snapshot_rejected = chain.rejected;
            if let Some((s, sseq)) = chain.state {
                state = Some(s);
                from = sseq + 1;
                stats.snapshot_seq = Some(sseq);
                stats.snapshot_deltas = chain.deltas;
            }
        }
        let mut state = match (state, self.shared.base) {
            (Some(s), _) => s,
            (None, Some(b)) => self.prefix_state(b)?,
            (None, None) => SessionState::with_slices(&config.slices),
        };
        replay(
            &self.journal,
            self.id(),
            from - offset,
            seq + 1 - offset,
            &mut state,
            &mut stats.events_replayed,
            offset,
        )?;
        Ok((state, stats))
    }

    /// Events with seq in `range`, verified and decoded.
    ///
    /// # Errors
    /// [`Error::SeqOutOfRange`] if the range starts or ends past the head;
    /// [`Error::Corruption`] for a damaged frame.
    pub fn events(&self, range: impl RangeBounds<u64>) -> Result<Vec<Envelope>> {
        let mut out = Vec::new();
        self.for_each_event(range, |env| {
            out.push(env);
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `f` for each event with seq in `range`, in order, streaming.
    pub fn for_each_event(
        &self,
        range: impl RangeBounds<u64>,
        mut f: impl FnMut(Envelope) -> Result<()>,
    ) -> Result<()> {
        let head = self.head();
        let (from, to) = bounds(range, head);
        if from > to || to > head {
            // The start of a range that starts past the head (or after its
            // own end), else the range's last seq.
            let seq = if from >= head || from > to {
                from
            } else {
                to - 1
            };
            return Err(Error::SeqOutOfRange {
                session: self.id(),
                seq,
                len: head,
            });
        }
        self.each_event(from, to, &mut f)
    }

    /// [`for_each_event`](Self::for_each_event) of a checked range.
    fn each_event(
        &self,
        from: u64,
        to: u64,
        f: &mut dyn FnMut(Envelope) -> Result<()>,
    ) -> Result<()> {
        let id = self.id();
        let offset = self.offset();
        // A fork's prefix: its parent's events, as they are.
        if let Some(b) = self.shared.base
            && from < offset
        {
            let parent = self.journal.session(b.parent)?;
            parent.each_event(from, to.min(offset), f)?;
        }
        let (from, to) = (from.max(offset) - offset, to.max(offset) - offset);
        let limit = self.journal.inner.config.max_event_bytes;
        let mut expect = from;
        self.journal.scan_frames(id, from, to, &mut |seq, frame| {
            let mut env = check_frame(id, seq, expect, frame, limit)?;
            expect += 1;
            env.seq += offset;
            f(env)?;
            Ok(Visit::Continue(()))
        })?;
        let (expect, to) = (expect + offset, to + offset);
        if expect != to {
            return Err(Error::corruption(
                Some(id),
                Some(expect),
                None,
                "event missing from the stream (a gap)",
            ));
        }
        Ok(())
    }
}
