//! Snapshots: when to take them ([`CheckpointStrategy`]) and the WINK-shaped
//! JSON form of a [`SessionState`] ([`SessionState::to_json`],
//! [`SessionState::from_json`]).
//!
//! The binary form is [`SessionState::encode_snapshot`]. Snapshots are only a
//! cache of the fold: one that cannot be restored is ignored and the stream
//! is replayed.

mod json;
#[cfg(test)]
mod lazy_tests;
#[cfg(test)]
mod tests;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::error::Result;
use crate::event::{Envelope, Event};
use crate::model::SessionId;
use crate::state::{SessionState, SliceRegistry};

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

/// Options of [`SessionState::to_json`]. Default: no logs, no parent, no
/// tags, `created_at` now, the crate's slice names.
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

impl SessionState {
    /// The state as a WINK-shaped JSON snapshot, every object's keys sorted:
    ///
    /// ```text
    /// {"children_ids":[],"created_at":"...","parent_id":null,
    ///  "policies":{"agent_journal:InnerMessage":"state",...},
    ///  "slices":[{"item_type":"agent_journal:InnerMessage","items":[...],
    ///             "slice_type":"agent_journal:InnerMessage"},...],
    ///  "tags":{},"version":"1"}
    /// ```
    ///
    /// Slices: `agent_journal:InnerMessage` (the messages, as serde writes
    /// [`InnerMessage`](crate::InnerMessage)), `agent_journal:ToolCall`,
    /// `agent_journal:Evaluation`, `agent_journal:ConversationState` (message
    /// ids by turn), `agent_journal:AdapterStateSnapshot` (LOG, always), `agent_journal:Usage`, `agent_journal:SessionInfo`
    /// (labels, fork origin, seq), then each application slice under its
    /// name, with its JSON as the only item. With [`SliceNames::Wink`] the
    /// document carries the specs' names instead (see there).
    ///
    /// An application slice serde cannot write as JSON (a map with non-string
    /// keys) is written with no items, which [`from_json`](Self::from_json) rejects.
    pub fn to_json(&self, opts: &JsonOptions) -> String {
        match &opts.names {
            SliceNames::Journal => json::to_value(self, opts).to_string(),
            SliceNames::Wink { module } => {
                json::to_wink_value(self, opts, module.as_deref()).to_string()
            }
        }
    }

    /// Reads a JSON snapshot written by [`to_json`](Self::to_json) under
    /// either kind of [`SliceNames`], or by WINK itself from the specs'
    /// `InnerMessage` items (with `ConversationState` and
    /// `AdapterStateSnapshot` items beside them, if any): then the state is
    /// the fold of the messages in sequence order per evaluation, each
    /// call's status as its record gives it; an `evaluation_id` that is not
    /// a UUID gets a UUID derived from it (v5), and the session label
    /// `agent_journal.wink_evaluation_ids` keeps the originals, so a WINK
    /// export writes them back. The application slices are those of
    /// `registry`. LOG slices may be absent (they start empty); every STATE
    /// slice must be there. Indexes are rebuilt from the items, so
    /// `from_json(to_json(s))` equals `s` when `include_logs` was set (or
    /// the application has no LOG slice).
    ///
    /// # Errors
    /// [`Error::SnapshotRestore`](crate::Error::SnapshotRestore) naming what
    /// is wrong and where (`slices[0].items[3]: invalid timestamp
    /// "yesterday"`): not JSON, not an object, a missing or unknown key, a
    /// version other than `"1"`, a bad timestamp or id, an item of the wrong
    /// shape, an unknown or repeated slice type, a policy that disagrees with
    /// the slice's, a missing STATE slice. Never panics.
    pub fn from_json(text: &str, registry: &SliceRegistry) -> Result<SessionState> {
        json::from_str(text, registry)
    }

    /// Reads a document from `reader` as [`from_json`](Self::from_json)
    /// reads its text, parsed straight into JSON (the text is never held
    /// whole), each item's JSON dropped as soon as it is parsed: a document
    /// of one long message costs about twice the message, where reading it
    /// as text first costs the text as well.
    ///
    /// # Errors
    /// As [`from_json`](Self::from_json); a read that fails is an
    /// [`Error::SnapshotRestore`](crate::Error::SnapshotRestore) saying
    /// "not read".
    pub fn from_json_reader(
        reader: impl std::io::Read,
        registry: &SliceRegistry,
    ) -> Result<SessionState> {
        json::from_reader(reader, registry)
    }
}
