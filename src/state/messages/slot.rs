//! One message of [`Messages`](super::Messages): decoded, or its bincode
//! bytes in a shared buffer (a binary snapshot), decoded on first access.

use std::sync::OnceLock;

use bincode::Options;
use chrono::{DateTime, Utc};

use super::CallSlot;
use crate::format::SharedBytes;
use crate::format::codec;
use crate::model::{CallId, EvaluationId, InnerMessage, MessageId, Role};
use crate::state::hash::FastMap;

/// Where a message's bincode bytes are: in buffer `buf` of its
/// [`Messages`](super::Messages) (a binary snapshot's, or a delta's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) buf: u32,
    pub(super) start: usize,
    pub(super) end: usize,
}

/// The buffers of a [`Messages`](super::Messages) that its slots' spans
/// point into.
pub(super) type Bufs<'a> = &'a [SharedBytes];

/// The call slots of a message's evaluation, whose statuses a message's
/// tool-call records take when it is decoded (the bytes may hold older
/// ones: a status changes without the bytes being rewritten).
pub(super) type Calls<'a> = Option<&'a FastMap<CallId, CallSlot>>;

/// The bytes of `span` in `bufs`.
fn span_bytes<'b>(bufs: Bufs<'b>, span: &Span) -> Option<&'b [u8]> {
    bufs.get(span.buf as usize)?.get(span.start..span.end)
}

/// A message: decoded, or held as bytes and decoded on first access.
///
/// The bytes of a slot decoded when it was made (a `check_body` or a whole
/// envelope's decode), so decoding them again cannot fail. The statuses of
/// the tool calls in the bytes may be older than the message's: a decode
/// gives each record the status of its call's [`CallSlot`], and a status
/// change forgets the decoded message ([`Slot::forget`]), so the bytes
/// stay the message's whatever happens to its calls.
#[derive(Clone, Debug)]
pub(super) enum Slot {
    /// A decoded message (appended since the state was decoded, or changed).
    Owned(Box<InnerMessage>),
    /// The message's bytes in the buffer, and the message once decoded.
    Raw(Span, OnceLock<Box<InnerMessage>>),
    /// The message's bytes of its own (copied from the event that carried
    /// it, when a stream is replayed), and the message once decoded.
    Bytes(Box<[u8]>, OnceLock<Box<InnerMessage>>),
    /// The message's bytes: the end of the frame that carried it (from
    /// `start` on), shared with the store, and the message once decoded.
    Frame(SharedBytes, usize, OnceLock<Box<InnerMessage>>),
}

/// The options of a message body: the crate's codec with no limit (a body
/// is a slice of a buffer already bounded by the snapshot's limit).
fn body_codec() -> impl Options + Copy {
    codec(u64::MAX)
}

impl Slot {
    /// A decoded message.
    pub(super) fn owned(m: InnerMessage) -> Slot {
        Slot::Owned(Box::new(m))
    }

    /// A message held as bytes that passed [`check_body`](super::check::check_body).
    pub(super) fn raw(span: Span) -> Slot {
        Slot::Raw(span, OnceLock::new())
    }

    /// A message held as bytes of its own that passed [`check_body`](super::check::check_body).
    pub(super) fn bytes(bytes: Box<[u8]>) -> Slot {
        Slot::Bytes(bytes, OnceLock::new())
    }

    /// A message held as the end of its frame, from `start` on, that passed
    /// [`check_body`](super::check::check_body).
    pub(super) fn frame(frame: SharedBytes, start: usize) -> Slot {
        Slot::Frame(frame, start, OnceLock::new())
    }

    /// The message's bytes (in `bufs`, or its own), if it is held as bytes.
    pub(super) fn raw_bytes<'b>(&'b self, bufs: Bufs<'b>) -> Option<&'b [u8]> {
        match self {
            Slot::Owned(_) => None,
            Slot::Raw(s, _) => span_bytes(bufs, s),
            Slot::Bytes(b, _) => Some(b),
            Slot::Frame(f, start, _) => f.get(*start..),
        }
    }

    /// The decoded message, if it was decoded.
    #[cfg(test)]
    pub(super) fn decoded(&self) -> Option<&InnerMessage> {
        match self {
            Slot::Owned(m) => Some(m),
            Slot::Raw(_, cell) | Slot::Bytes(_, cell) | Slot::Frame(_, _, cell) => {
                cell.get().map(|b| &**b)
            }
        }
    }

    /// The message, decoded from `bufs` on first access. `eval` and `key`
    /// are where the slot is (used only if the bytes were unreadable, which
    /// [`check_body`](super::check::check_body) rules out).
    pub(super) fn get(
        &self,
        bufs: Bufs<'_>,
        calls: Calls<'_>,
        eval: EvaluationId,
        key: (u64, MessageId),
    ) -> &InnerMessage {
        match self {
            Slot::Owned(m) => m,
            Slot::Raw(_, cell) | Slot::Bytes(_, cell) | Slot::Frame(_, _, cell) => {
                cell.get_or_init(|| Box::new(decode(self.raw_bytes(bufs), calls, eval, key)))
            }
        }
    }

    /// After a status change of one of its calls: a message held as bytes
    /// forgets its decoded form (the next read decodes it with the new
    /// status); an `Owned` one gives the call's records `status`.
    pub(super) fn forget(&mut self, call_id: &CallId, status: crate::model::ToolStatus) {
        match self {
            Slot::Owned(m) => {
                for r in m.tool_calls.iter_mut().filter(|r| &r.call_id == call_id) {
                    r.status = status;
                }
            }
            Slot::Raw(_, cell) | Slot::Bytes(_, cell) | Slot::Frame(_, _, cell) => {
                cell.take();
            }
        }
    }
}

/// Decodes a body that passed [`check_body`](super::check::check_body),
/// its tool-call records given their calls' statuses from `calls`. Should
/// that ever fail, the result is a placeholder with the slot's ids whose
/// content says so (no panic, and the error is visible where the message
/// is shown).
fn decode(
    bytes: Option<&[u8]>,
    calls: Calls<'_>,
    eval: EvaluationId,
    key: (u64, MessageId),
) -> InnerMessage {
    let err = match bytes.map(|b| body_codec().deserialize::<InnerMessage>(b)) {
        Some(Ok(mut m)) => {
            if let Some(calls) = calls {
                for r in &mut m.tool_calls {
                    if let Some(slot) = calls.get(&r.call_id) {
                        r.status = slot.status;
                    }
                }
            }
            return m;
        }
        Some(Err(e)) => e.to_string(),
        None => "no bytes".to_owned(),
    };
    let mut m = InnerMessage::new(
        Role::System,
        format!("<undecodable snapshot message: {err}>"),
        eval,
        key.0,
    );
    m.message_id = key.1;
    m.created_at = DateTime::<Utc>::UNIX_EPOCH;
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::message::encode_body;
    use crate::model::{CallId, ToolCallRecord, ToolStatus};

    fn sample() -> InnerMessage {
        let mut m = InnerMessage::new(Role::Assistant, "héllo", EvaluationId::new(), 7);
        m.tool_calls = vec![
            ToolCallRecord::new("c1", "ls", "{}"),
            ToolCallRecord::new("c2", "rm", "{\"f\":1}"),
        ];
        m.tool_calls[1].status = ToolStatus::Failed;
        m.tool_call_id = Some(CallId::from("c0"));
        m.provider_payload = Some("{}".into());
        m
    }

    #[test]
    fn undecodable_bytes_give_a_placeholder_not_a_panic() {
        let eval = EvaluationId::new();
        let id = MessageId::new();
        let slot = Slot::raw(Span {
            buf: 0,
            start: 0,
            end: 3,
        });
        let m = slot.get(&[SharedBytes::from(vec![1, 2, 3])], None, eval, (4, id));
        assert_eq!((m.evaluation_id, m.sequence, m.message_id), (eval, 4, id));
        assert!(m.content.starts_with("<undecodable snapshot message"));
        let slot = Slot::raw(Span {
            buf: 0,
            start: 0,
            end: 9,
        });
        assert!(
            slot.get(&[], None, eval, (4, id))
                .content
                .contains("no bytes")
        );
    }

    #[test]
    fn a_decode_takes_the_statuses_of_the_calls_and_forget_drops_it() {
        let m = sample();
        let mut body = Vec::new();
        encode_body(&m, &mut body);
        let mut slot = Slot::raw(Span {
            buf: 0,
            start: 0,
            end: body.len(),
        });
        let body = [SharedBytes::from(body)];
        let key = (m.sequence, m.message_id);
        assert!(slot.decoded().is_none());
        assert_eq!(slot.get(&body, None, m.evaluation_id, key), &m);
        assert_eq!(slot.decoded(), Some(&m));
        // c1 moved to Completed since the bytes were written: forgotten,
        // decoded again with the call's status; c2 has no slot: as written.
        let mut calls = FastMap::default();
        let done = CallSlot {
            status: ToolStatus::Completed,
            holders: vec![key],
        };
        calls.insert(CallId::from("c1"), done);
        slot.forget(&CallId::from("c1"), ToolStatus::Completed);
        assert!(slot.decoded().is_none());
        let got = slot.get(&body, Some(&calls), m.evaluation_id, key);
        let statuses: Vec<ToolStatus> = got.tool_calls.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [ToolStatus::Completed, ToolStatus::Failed]);
        assert_eq!(slot.raw_bytes(&body), Some(&body[0][..]));
        // An owned message takes the status in place.
        let mut owned = Slot::owned(m.clone());
        owned.forget(&CallId::from("c2"), ToolStatus::Completed);
        let got = owned.get(&body, None, m.evaluation_id, key);
        assert_eq!(got.tool_calls[1].status, ToolStatus::Completed);
    }
}
