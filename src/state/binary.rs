//! The binary snapshot of a [`SessionState`].
//!
//! ```text
//! head      bincode (the crate's codec) of: u32 format (3), labels,
//!           forked_from, last_seq, events_applied, tool_calls, evaluations,
//!           adapter_states, usage, app [(name, bytes)]
//! messages  the messages section (`messages/section.rs`): each message as
//!           its own bincode bytes after its ids, then the call statuses
//! u64 LE    length of the messages section
//! ```
//!
//! The conversation-state view is not stored: it is read from the messages
//! when asked for.
//!
//! Decoding keeps the messages as bytes of the snapshot's buffer, decoded
//! on first access; encoding copies a message still held as bytes.

use crate::format::SharedBytes;

use bincode::Options;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::format::codec;
use crate::model::SessionId;
use crate::state::messages::{read_section, write_section};
use crate::state::{AdapterStates, Evaluations, SessionState, SliceRegistry, ToolCalls, Usage};

#[cfg(test)]
mod tests;

/// The binary snapshot body's own format version (inside the frame's):
/// version 1. A snapshot of any other number is refused and the stream
/// replayed (snapshots are a cache).
pub(crate) const SNAPSHOT_FORMAT: u32 = 1;

/// The number of a delta snapshot's body (`delta.rs`), version 1 too. It
/// differs from the whole one's because the first field is what tells a
/// reader following a chain (`delta::builds_on`) a whole snapshot from a
/// delta; the layout of both is read here ([`SessionState::layout`]).
pub(crate) const DELTA_FORMAT: u32 = 2;

/// The name under which the head's `app` list holds the
/// [`ConversationLog`](crate::state::ConversationLog), when the session has
/// a conversation: a snapshot of another session has none.
const CONVERSATIONS: &str = "agent_journal:ConversationLog";

/// Snapshots from this size on are decoded on two threads.
const PARALLEL_MIN: usize = 4 << 20;

/// Bytes of the trailer: the length of the messages section.
const TRAILER: usize = 8;

#[derive(Serialize)]
struct HeadRef<'a> {
    format: u32,
    labels: &'a [(String, String)],
    forked_from: Option<(SessionId, u64)>,
    last_seq: Option<u64>,
    events_applied: u64,
    tool_calls: &'a ToolCalls,
    evaluations: &'a Evaluations,
    adapter_states: &'a AdapterStates,
    usage: &'a Usage,
    app: Vec<(&'a str, Vec<u8>)>,
}

#[derive(Deserialize)]
struct Head {
    #[allow(dead_code)]
    format: u32,
    labels: Vec<(String, String)>,
    forked_from: Option<(SessionId, u64)>,
    last_seq: Option<u64>,
    events_applied: u64,
    tool_calls: ToolCalls,
    evaluations: Evaluations,
    adapter_states: AdapterStates,
    usage: Usage,
    app: Vec<(String, Vec<u8>)>,
}

impl SessionState {
    /// The binary snapshot body: bincode (via [`codec`]) of every slice,
    /// each message as its own bincode bytes. Frame it with
    /// [`crate::format::encode_frame`]'s format ([`crate::format::seal`]) to store it.
    ///
    /// A message still held as bytes (from a decoded snapshot) is copied,
    /// not encoded again.
    ///
    /// # Errors
    /// [`Error::TooLarge`] when the body (or one application slice) would be
    /// over `limit` bytes; [`Error::InvalidInput`] when an application slice
    /// cannot be encoded.
    pub fn encode_snapshot(&self, limit: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_snapshot_into(&mut out, limit)?;
        Ok(out)
    }

    /// The snapshot as a whole frame (header, then the body of
    /// [`encode_snapshot`](Self::encode_snapshot)), written in place in a
    /// buffer of `capacity` bytes to start with: no copy of the body.
    pub(crate) fn encode_snapshot_frame(&self, limit: u64, capacity: usize) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(capacity);
        out.extend_from_slice(&[0; crate::format::FRAME_HEADER_LEN]);
        self.encode_snapshot_into(&mut out, limit)?;
        crate::format::seal_in_place(&mut out);
        Ok(out)
    }

    /// Appends the snapshot body to `out`.
    fn encode_snapshot_into(&self, out: &mut Vec<u8>, limit: u64) -> Result<()> {
        let base = out.len();
        let mut app = self
            .app
            .iter()
            .map(|s| Ok((s.name(), s.encode(limit)?)))
            .collect::<Result<Vec<_>>>()?;
        if !self.conversations.is_empty() {
            let bytes = codec(limit)
                .serialize(&self.conversations)
                .map_err(|e| Error::InvalidInput(format!("cannot encode snapshot: {e}")))?;
            app.push((CONVERSATIONS, bytes));
        }
        let head = HeadRef {
            format: SNAPSHOT_FORMAT,
            labels: &self.labels,
            forked_from: self.forked_from,
            last_seq: self.last_seq,
            events_applied: self.events_applied,
            tool_calls: &self.tool_calls,
            evaluations: &self.evaluations,
            adapter_states: &self.adapter_states,
            usage: &self.usage,
            app,
        };
        // Encoded once, with no size pass first (bincode makes one when it
        // has a limit), then checked against the limit.
        bincode::DefaultOptions::new()
            .serialize_into(&mut *out, &head)
            .map_err(|e| Error::InvalidInput(format!("cannot encode snapshot: {e}")))?;
        let start = out.len();
        write_section(&self.messages, out)
            .map_err(|e| Error::InvalidInput(format!("cannot encode snapshot: {e}")))?;
        let section = (out.len() - start) as u64;
        out.extend_from_slice(&section.to_le_bytes());
        let size = (out.len() - base) as u64;
        if size > limit {
            return Err(Error::TooLarge { size, limit });
        }
        Ok(())
    }

    /// Decodes a binary snapshot body written by [`encode_snapshot`](Self::encode_snapshot).
    /// Application slices in the snapshot that `registry` does not name are
    /// dropped. Copies `body` and calls [`decode_snapshot_shared`](Self::decode_snapshot_shared).
    ///
    /// # Errors
    /// As [`decode_snapshot_shared`](Self::decode_snapshot_shared).
    pub fn decode_snapshot(
        body: &[u8],
        registry: &SliceRegistry,
        limit: u64,
    ) -> Result<SessionState> {
        Self::decode_snapshot_shared(SharedBytes::from(body.to_vec()), 0, registry, limit)
    }

    /// Decodes the binary snapshot body `buf[start..]` (so a whole frame can
    /// be passed, with `start` the length of its header) without decoding
    /// its messages: they stay as bytes of `buf`, which the state keeps
    /// alive, and each is decoded on first access. Every message is checked
    /// here to decode (a parse that allocates nothing), so a later access
    /// cannot fail. Application slices in the snapshot that `registry` does
    /// not name are dropped.
    ///
    /// # Errors
    /// [`Error::SnapshotRestore`] when the body is undecodable, of an unknown
    /// format, or lacks a slice of `registry`: replay the stream instead.
    pub fn decode_snapshot_shared(
        buf: SharedBytes,
        start: usize,
        registry: &SliceRegistry,
        limit: u64,
    ) -> Result<SessionState> {
        Self::decode_inner(buf, start, registry, limit, false)
    }

    /// Decodes a whole snapshot frame: checks its header and crc (as
    /// [`crate::verify_frame`]) and decodes its body as
    /// [`decode_snapshot_shared`](Self::decode_snapshot_shared) does.
    pub(crate) fn decode_snapshot_frame(
        frame: SharedBytes,
        registry: &SliceRegistry,
        limit: u64,
    ) -> Result<SessionState> {
        Self::decode_inner(
            frame,
            crate::format::FRAME_HEADER_LEN,
            registry,
            limit,
            true,
        )
    }

    /// A big snapshot is decoded on two threads: the crc (if `verify`) and
    /// the head (tool calls, evaluations, ...) on one, the messages section
    /// on the other. A damaged frame is refused all the same: the crc's
    /// verdict is read first, and the parsers refuse any bytes safely.
    fn decode_inner(
        buf: SharedBytes,
        start: usize,
        registry: &SliceRegistry,
        limit: u64,
        verify: bool,
    ) -> Result<SessionState> {
        let parallel = buf.len() >= PARALLEL_MIN;
        let crc = || {
            if verify {
                crate::format::verify_frame(&buf)
                    .map_err(|e| Error::SnapshotRestore(e.to_string()))?;
            }
            Ok(())
        };
        if !parallel {
            crc()?;
        }
        // A big frame's crc is checked on the head's thread below; should a
        // check before fail, the crc's verdict still comes first.
        let (body, head_len, section_len) = match Self::layout(&buf, start, limit, SNAPSHOT_FORMAT)
        {
            Ok(layout) => layout,
            Err(e) => {
                if parallel {
                    crc()?;
                }
                return Err(e);
            }
        };
        let undecodable =
            |e| Error::SnapshotRestore(format!("undecodable snapshot: messages: {e}"));
        // On two threads: the crc and the head on one, the messages
        // section on the other.
        let head = || -> Result<Head> {
            if parallel {
                crc()?;
            }
            codec(limit)
                .deserialize(&body[..head_len])
                .map_err(|e| Error::SnapshotRestore(format!("undecodable snapshot: {e}")))
        };
        let section = || read_section(&buf, start + head_len, section_len).map_err(undecodable);
        let (s, messages) = if parallel {
            std::thread::scope(|scope| {
                let s = scope.spawn(head);
                let messages = section();
                let s = s.join().unwrap_or_else(|_| {
                    Err(Error::SnapshotRestore(
                        "the snapshot decoder's thread panicked".into(),
                    ))
                });
                (s, messages)
            })
        } else {
            (head(), section())
        };
        Self::assemble(s?, messages?, registry, limit)
    }

    /// The body of the snapshot at `buf[start..]`, its format checked, and
    /// the lengths of its head and of its messages section.
    pub(super) fn layout(
        buf: &[u8],
        start: usize,
        limit: u64,
        want: u32,
    ) -> Result<(&[u8], usize, usize)> {
        let body = buf.get(start..).ok_or_else(|| {
            Error::SnapshotRestore(format!(
                "snapshot body starts at {start}, past the buffer's {} bytes",
                buf.len()
            ))
        })?;
        let format: u32 = bincode::DefaultOptions::new()
            .with_limit(limit)
            .allow_trailing_bytes()
            .deserialize(body)
            .map_err(|e| Error::SnapshotRestore(format!("undecodable snapshot format: {e}")))?;
        if format != want {
            return Err(Error::SnapshotRestore(format!(
                "snapshot format {format} where {want} is expected (this build reads {SNAPSHOT_FORMAT} \
                 and deltas of format {})",
                DELTA_FORMAT
            )));
        }
        if body.len() as u64 > limit {
            return Err(Error::SnapshotRestore(format!(
                "snapshot of {} bytes is over the limit of {limit}",
                body.len()
            )));
        }
        let (head_len, section_len) = split(body).ok_or_else(|| {
            Error::SnapshotRestore("undecodable snapshot: bad messages section length".into())
        })?;
        Ok((body, head_len, section_len))
    }

    /// The state from its decoded parts; decodes the application slices.
    fn assemble(
        s: Head,
        messages: crate::state::Messages,
        registry: &SliceRegistry,
        limit: u64,
    ) -> Result<SessionState> {
        let app = decode_app(&s.app, registry, limit)?;
        let conversations = match s.app.iter().find(|(name, _)| name == CONVERSATIONS) {
            Some((_, bytes)) => codec(limit).deserialize(bytes).map_err(|e| {
                Error::SnapshotRestore(format!("undecodable snapshot: conversation: {e}"))
            })?,
            None => crate::state::ConversationLog::default(),
        };
        Ok(SessionState {
            conversations,
            messages,
            tool_calls: s.tool_calls,
            evaluations: s.evaluations,
            adapter_states: s.adapter_states,
            usage: s.usage,
            labels: s.labels,
            forked_from: s.forked_from,
            last_seq: s.last_seq,
            events_applied: s.events_applied,
            app,
            marks: crate::state::Marks::default(),
        })
    }
}

/// The application slices of `registry` from a snapshot's `(name, bytes)`
/// list.
pub(super) fn decode_app(
    app: &[(String, Vec<u8>)],
    registry: &SliceRegistry,
    limit: u64,
) -> Result<Vec<Box<dyn crate::state::DynSlice>>> {
    let mut out = Vec::with_capacity(registry.len());
    for f in registry.factories() {
        let bytes = app
            .iter()
            .find(|(name, _)| name == f.name)
            .map(|(_, b)| b)
            .ok_or_else(|| {
                Error::SnapshotRestore(format!("application slice {:?} is missing", f.name))
            })?;
        out.push(
            (f.decode)(bytes, limit).map_err(|e| {
                Error::SnapshotRestore(format!("application slice {:?}: {e}", f.name))
            })?,
        );
    }
    Ok(out)
}

/// The lengths of the head and of the messages section of a body.
fn split(body: &[u8]) -> Option<(usize, usize)> {
    let rest = body.len().checked_sub(TRAILER)?;
    let trailer = <[u8; TRAILER]>::try_from(body.get(rest..)?).ok()?;
    let section = usize::try_from(u64::from_le_bytes(trailer)).ok()?;
    Some((rest.checked_sub(section)?, section))
}
