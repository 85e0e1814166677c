//! Delta snapshots: what changed in a [`SessionState`] since the snapshot
//! it was last written as or read from ([`Marks`](super::Marks), and the
//! changes the tool calls and the conversation engine's log record), as a
//! frame that builds on that snapshot.
//!
//! ```text
//! head      bincode (the crate's codec) of: u32 format (4), u64 prev (the
//!           seq of the snapshot it builds on), labels, forked_from,
//!           last_seq, events_applied, the usage total, the usage and the
//!           record of every evaluation that changed, the tool calls
//!           (count before, changed ones by index, added ones), the adapter
//!           states (count before, added ones), the conversation engine's
//!           log (the same for each of its lists, and its two marks), the
//!           application slices [(name, bytes)] whole
//! messages  a messages section (`messages/section.rs`) of the messages
//!           added since, and the call slots changed since
//! u64 LE    length of the messages section
//! ```
//!
//! A chain of snapshots is a whole one (`SNAPSHOT_FORMAT`, `state/binary.rs`) and
//! the deltas after it, each naming the one before: decoding the whole one
//! and applying each delta in order gives the state at the last delta's
//! seq, the same as folding the stream there
//! (`fold(all) == fold(chain) + fold(tail)` is property-tested).

use bincode::Options;
use serde::{Deserialize, Serialize};

use super::binary::{DELTA_FORMAT, SNAPSHOT_FORMAT, decode_app};
use super::conversation_log::{LogDelta, LogDeltaRef};
use super::list_delta::ListDelta;
use super::messages::{apply_delta_section, write_delta_section};
use crate::error::{Error, Result};
use crate::event::AdapterStateSnapshot;
use crate::format::{FRAME_HEADER_LEN, SharedBytes, codec};
use crate::model::{EvaluationId, SessionId};
use crate::state::{EvaluationInfo, SessionState, SliceRegistry, ToolCallInfo, UsageTotals};

#[derive(Serialize)]
struct HeadRef<'a> {
    format: u32,
    prev: u64,
    labels: &'a [(String, String)],
    forked_from: Option<(SessionId, u64)>,
    last_seq: Option<u64>,
    events_applied: u64,
    usage_total: &'a UsageTotals,
    usage: Vec<(EvaluationId, &'a UsageTotals)>,
    evaluations: Vec<&'a EvaluationInfo>,
    tool_calls: ListDelta<&'a ToolCallInfo>,
    adapter_states_before: u64,
    adapter_states: &'a [AdapterStateSnapshot],
    conversations: LogDeltaRef<'a>,
    app: Vec<(&'a str, Vec<u8>)>,
}

#[derive(Deserialize)]
struct Head {
    #[allow(dead_code)]
    format: u32,
    prev: u64,
    labels: Vec<(String, String)>,
    forked_from: Option<(SessionId, u64)>,
    last_seq: Option<u64>,
    events_applied: u64,
    usage_total: UsageTotals,
    usage: Vec<(EvaluationId, UsageTotals)>,
    evaluations: Vec<EvaluationInfo>,
    tool_calls: ListDelta<ToolCallInfo>,
    adapter_states_before: u64,
    adapter_states: Vec<AdapterStateSnapshot>,
    conversations: LogDelta,
    app: Vec<(String, Vec<u8>)>,
}

fn undecodable(e: impl std::fmt::Display) -> Error {
    Error::SnapshotRestore(format!("undecodable delta snapshot: {e}"))
}

/// The seq of the snapshot the snapshot `frame` builds on: `None` for a
/// whole one, the delta's `prev` for a delta.
///
/// # Errors
/// [`Error::SnapshotRestore`] when the frame is too short or of another
/// format.
pub(crate) fn builds_on(frame: &[u8]) -> Result<Option<u64>> {
    let body = frame
        .get(FRAME_HEADER_LEN..)
        .ok_or_else(|| undecodable("shorter than a frame header"))?;
    let opts = bincode::DefaultOptions::new()
        .with_limit(64)
        .allow_trailing_bytes();
    let format: u32 = opts.deserialize(body).map_err(undecodable)?;
    match format {
        SNAPSHOT_FORMAT => Ok(None),
        DELTA_FORMAT => {
            let (_, prev): (u32, u64) = opts.deserialize(body).map_err(undecodable)?;
            Ok(Some(prev))
        }
        other => Err(Error::SnapshotRestore(format!(
            "unknown snapshot format {other}"
        ))),
    }
}

impl SessionState {
    /// The delta snapshot of this state on the snapshot at the seq its
    /// marks count from ([`mark`](Self::mark)), as a whole frame in a
    /// buffer of `capacity` bytes to start with.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] if no changes are recorded or an application
    /// slice cannot be encoded; [`Error::TooLarge`] past `limit`.
    pub(crate) fn encode_delta_frame(&self, limit: u64, capacity: usize) -> Result<Vec<u8>> {
        let cannot =
            |e: String| Error::InvalidInput(format!("cannot encode a delta snapshot: {e}"));
        let prev = self
            .marks
            .at
            .ok_or_else(|| cannot("no changes are recorded".into()))?;
        let mut evals = self.marks.evaluations.clone();
        evals.sort_unstable();
        evals.dedup();
        let app = self
            .app
            .iter()
            .map(|s| Ok((s.name(), s.encode(limit)?)))
            .collect::<Result<Vec<_>>>()?;
        let head = HeadRef {
            format: DELTA_FORMAT,
            prev,
            labels: &self.labels,
            forked_from: self.forked_from,
            last_seq: self.last_seq,
            events_applied: self.events_applied,
            usage_total: self.usage.total(),
            usage: evals
                .iter()
                .filter_map(|e| Some((*e, self.usage.for_evaluation(*e)?)))
                .collect(),
            evaluations: evals
                .iter()
                .filter_map(|e| self.evaluations.get(*e))
                .collect(),
            tool_calls: self.tool_calls.delta(),
            adapter_states_before: self.marks.adapter_states as u64,
            adapter_states: self.adapter_states.since(self.marks.adapter_states),
            conversations: self.conversations.delta(),
            app,
        };
        let mut out = Vec::with_capacity(capacity.max(FRAME_HEADER_LEN + 64));
        out.extend_from_slice(&[0; FRAME_HEADER_LEN]);
        bincode::DefaultOptions::new()
            .serialize_into(&mut out, &head)
            .map_err(|e| cannot(e.to_string()))?;
        let start = out.len();
        write_delta_section(
            &self.messages,
            &self.marks.messages,
            &self.tool_calls.changed_keys(),
            &mut out,
        )
        .map_err(cannot)?;
        let section = (out.len() - start) as u64;
        out.extend_from_slice(&section.to_le_bytes());
        let size = (out.len() - FRAME_HEADER_LEN) as u64;
        if size > limit {
            return Err(Error::TooLarge { size, limit });
        }
        crate::format::seal_in_place(&mut out);
        Ok(out)
    }

    /// Applies the delta snapshot `frame` (its crc checked) to this state,
    /// which must be the state of the snapshot it builds on. Its messages
    /// stay as bytes of `frame`.
    ///
    /// # Errors
    /// [`Error::SnapshotRestore`] when the frame is damaged, not a delta,
    /// builds on another seq than this state's, or does not fit it; the
    /// state is then half changed: drop it.
    pub(crate) fn apply_delta_frame(
        &mut self,
        frame: SharedBytes,
        registry: &SliceRegistry,
        limit: u64,
    ) -> Result<()> {
        crate::format::verify_frame(&frame).map_err(|e| Error::SnapshotRestore(e.to_string()))?;
        let (body, head_len, section_len) =
            Self::layout(&frame, FRAME_HEADER_LEN, limit, DELTA_FORMAT)?;
        let head: Head = codec(limit)
            .deserialize(&body[..head_len])
            .map_err(undecodable)?;
        if Some(head.prev) != self.last_seq {
            return Err(Error::SnapshotRestore(format!(
                "the delta builds on seq {}, the state is at {:?}",
                head.prev, self.last_seq
            )));
        }
        self.labels = head.labels;
        self.forked_from = head.forked_from;
        self.last_seq = head.last_seq;
        self.events_applied = head.events_applied;
        self.usage.set_total(head.usage_total);
        for (eval, totals) in head.usage {
            self.usage.put(eval, totals);
        }
        for info in head.evaluations {
            self.evaluations.put(info).map_err(undecodable)?;
        }
        self.tool_calls
            .apply_delta(head.tool_calls)
            .map_err(undecodable)?;
        self.adapter_states
            .extend_after(head.adapter_states_before, head.adapter_states)
            .map_err(undecodable)?;
        self.conversations
            .apply_delta(head.conversations)
            .map_err(undecodable)?;
        apply_delta_section(
            &mut self.messages,
            &frame,
            FRAME_HEADER_LEN + head_len,
            section_len,
        )
        .map_err(undecodable)?;
        self.app = decode_app(&head.app, registry, limit)?;
        Ok(())
    }
}
