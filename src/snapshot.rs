//! Snapshots: a session's state folded up to an event and cached, so an open
//! or a time travel replays only what follows. This module decides when to
//! take one ([`CheckpointStrategy`]) and holds the WINK-shaped JSON form
//! ([`SessionState::to_json`](crate::state::SessionState::to_json),
//! [`SessionState::from_json`](crate::state::SessionState::from_json), in
//! `json/`). Snapshots are only a cache of the fold: one that cannot be
//! restored is ignored and the stream is replayed.
//!
//! Everything else about snapshots lives with the layer whose data it
//! touches; this is the index:
//!
//! - the binary body of a whole snapshot: `state/binary.rs`
//!   ([`SessionState::encode_snapshot`](crate::state::SessionState::encode_snapshot),
//!   `decode_snapshot`), the messages' section in `state/messages/section.rs`;
//! - a delta (what changed since the previous link): `state/delta.rs`, with
//!   the list deltas of `state/list_delta.rs` and each slice's own part
//!   (`state/conversation_log.rs`, `state/messages/section.rs`);
//! - when a session writes one, and the chain of whole snapshot and deltas
//!   read back at open and by `state_at`: `session/mod.rs`
//!   (`write_snapshot`), `session/chain.rs`, `session/replay.rs`
//!   (`decode_snapshot`);
//! - where the bytes go: the `Store` trait's `put_snapshot`,
//!   `add_snapshot`, `snapshot_seqs` and `snapshot_at`; for sled, inline in
//!   tree `snapshots` or in files (`store/sled/snapshots.rs`,
//!   `store/sled/snapfiles.rs`); for PostgreSQL, table `snapshots`;
//! - the bytes themselves: `docs/format.md`, "Snapshots" and "Snapshot
//!   chains".

mod json;
#[cfg(test)]
mod lazy_tests;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::event::{Envelope, Event};
use crate::model::SessionId;

/// When to write a snapshot of a session's state (adapter-state spec).
///
/// Whole snapshots replace the session's earlier ones, so what such a
/// strategy costs is the bytes written over the session's life;
/// `Incremental` (the default) keeps a chain of deltas instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointStrategy {
    /// When at least `n` events were appended since the last snapshot
    /// (`EveryEvents(0)` behaves as `EveryEvents(1)`). A state grows with its
    /// events, so this writes O(N^2 / n) bytes over N events.
    EveryEvents(u64),
    /// After a `ToolStatus` event with a terminal status (a tool finished).
    OnToolUse,
    /// After an `EvaluationFinished` event.
    OnComplete,
    /// When more than this long has passed since the last snapshot (or there
    /// is none yet).
    Periodic(Duration),
    /// Never by itself: only when the application asks.
    OnDemand,
    /// Geometric spacing (the default before `Incremental`): a snapshot when the events since the
    /// last one reach `max(first, last_snapshot_seq * (factor - 1))`.
    ///
    /// The math: after a snapshot at seq `L` the next one comes at about
    /// `L * factor`, so the snapshots of a session of `N` events sit at
    /// `first, first*factor, first*factor^2, ... <= N`. A snapshot at seq `s`
    /// is at most `c * s` bytes (the state grows at most linearly with the
    /// events), so all of them together write at most
    /// `c * N * (1 + 1/factor + 1/factor^2 + ...) = c * N * factor / (factor - 1)`
    /// bytes: O(journal bytes) (2x the final state for `factor = 2`), where
    /// snapshotting every `n` events writes O(N^2 / n). Replay after a crash
    /// reads at most the `N * (factor - 1) / factor` events since the last
    /// snapshot. A `factor` below 2 degrades to one snapshot every `first`
    /// events.
    Geometric {
        /// Events before the first snapshot, and the minimum spacing.
        first: u64,
        /// Growth factor of the spacing.
        factor: u64,
    },
    /// A snapshot every `every` events, the first whole and each later one
    /// a delta: what changed since the one before (messages and tool calls
    /// added, records changed; application slices whole). Every snapshot
    /// is kept, so opening a session replays fewer than `every` events
    /// after its latest one and [`Session::state_at`](crate::Session::state_at)
    /// fewer than `every` after the latest at or before its seq, at any
    /// length; the snapshots written over a session's life hold about
    /// its final state once (plus the records that changed, once per
    /// delta that saw them change). In a store that keeps one snapshot per
    /// session (PostgreSQL) this is `Geometric { first: every, factor: 2 }`.
    Incremental {
        /// Events between two snapshots (0 behaves as 1).
        every: u64,
    },
}

impl Default for CheckpointStrategy {
    /// `Incremental { every: 8192 }`.
    fn default() -> Self {
        CheckpointStrategy::Incremental { every: 8192 }
    }
}

impl CheckpointStrategy {
    /// True when a snapshot should be written right after `envelope` was
    /// appended, given the seq of the last event the previous snapshot covers
    /// (`None`: no snapshot yet) and when it was written.
    ///
    /// Pure except for `Periodic`, which reads the monotonic clock.
    pub fn should_checkpoint(
        &self,
        last_snapshot_seq: Option<u64>,
        last_snapshot_time: Option<Instant>,
        envelope: &Envelope,
    ) -> bool {
        let since = match last_snapshot_seq {
            Some(last) => envelope.seq.saturating_sub(last),
            None => envelope.seq.saturating_add(1),
        };
        match *self {
            CheckpointStrategy::EveryEvents(n) => since >= n.max(1),
            CheckpointStrategy::OnToolUse => matches!(
                &envelope.event,
                Event::ToolStatus { status, .. } if status.is_terminal()
            ),
            CheckpointStrategy::OnComplete => {
                matches!(envelope.event, Event::EvaluationFinished { .. })
            }
            CheckpointStrategy::Periodic(d) => last_snapshot_time.is_none_or(|t| t.elapsed() > d),
            CheckpointStrategy::OnDemand => false,
            CheckpointStrategy::Geometric { first, factor } => {
                let last = last_snapshot_seq.unwrap_or(0);
                since
                    >= first
                        .max(1)
                        .max(last.saturating_mul(factor.saturating_sub(1)))
            }
            CheckpointStrategy::Incremental { every } => since >= every.max(1),
        }
    }

    /// The strategy for a store that keeps chains of snapshots or not
    /// (`chains`): `Incremental` becomes `Geometric { first: every,
    /// factor: 2 }` where only whole snapshots can be written.
    pub(crate) fn for_store(&self, chains: bool) -> CheckpointStrategy {
        match *self {
            CheckpointStrategy::Incremental { every } if !chains => CheckpointStrategy::Geometric {
                first: every,
                factor: 2,
            },
            other => other,
        }
    }

    /// True for `Incremental`: snapshots after the first are deltas.
    pub(crate) fn is_incremental(&self) -> bool {
        matches!(self, CheckpointStrategy::Incremental { .. })
    }
}

/// The type names a JSON snapshot's slices carry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SliceNames {
    /// Every slice of the state under the crate's own names
    /// (`agent_journal:InnerMessage`, `agent_journal:ToolCall`, ...). The
    /// default.
    #[default]
    Journal,
    /// The specs' names, so that WINK's `Snapshot.from_json` reads the
    /// document: `weakincentives.runtime.inner_messages:InnerMessage`,
    /// `weakincentives.runtime.conversation:ConversationState` (the
    /// conversation-state spec's items, messages embedded) and
    /// `weakincentives.runtime.adapter_state:AdapterStateSnapshot` (LOG);
    /// as WINK does, a slice with no items is left out (so a reader needs
    /// the module of a type only when the session has such items). What the specs have no slice for (tool-call and evaluation
    /// records, usage, labels, the conversation engine's records,
    /// application slices) travels as JSON text in the `tags` entries
    /// `agent_journal.slices` and `agent_journal.policies`, which WINK keeps
    /// through `from_json` and `to_json`; reading such a document gives back
    /// the whole state. See `docs/spec-conformance.md`.
    Wink {
        /// Replaces the module of every spec type (`MODULE:InnerMessage`,
        /// `MODULE:ConversationState`, `MODULE:AdapterStateSnapshot`).
        /// Default: `None`, the specs' modules.
        module: Option<String>,
    },
}

/// Options of [`SessionState::to_json`](crate::state::SessionState::to_json).
/// Default: no logs, no parent, no tags, `created_at` now, the crate's slice
/// names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonOptions {
    /// The slices' type names. Default: [`SliceNames::Journal`].
    pub names: SliceNames,
    /// Include the application's LOG slices. Default: `false`, as WINK's
    /// snapshots omit LOG slices. The adapter states, a LOG slice too, are
    /// always written: the specs' recovery flow (restore a checkpoint, find
    /// the adapter state, resume with it) needs them in a checkpoint written
    /// with the defaults.
    pub include_logs: bool,
    /// `parent_id` of the document. Default: `None`, which writes the session
    /// this one was forked from, if any.
    pub parent_id: Option<SessionId>,
    /// `tags` of the document (a later duplicate key wins). Default: none.
    pub tags: Vec<(String, String)>,
    /// `created_at` of the document. Default: `None`, which writes the time
    /// of the call.
    pub created_at: Option<DateTime<Utc>>,
}
