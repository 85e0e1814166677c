//! One message of [`Messages`](super::Messages): decoded, or its bincode
//! bytes in a shared buffer (a binary snapshot), decoded on first access.

use std::sync::OnceLock;

use bincode::Options;
use chrono::{DateTime, Utc};

use crate::format::SharedBytes;
use crate::format::codec;
use crate::model::{EvaluationId, InnerMessage, MessageId, Role};

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

/// The bytes of `span` in `bufs`.
fn span_bytes<'b>(bufs: Bufs<'b>, span: &Span) -> Option<&'b [u8]> {
    bufs.get(span.buf as usize)?.get(span.start..span.end)
}

/// A message: decoded, or held as bytes and decoded on first access.
///
/// `Raw` bytes passed [`check_body`](super::check::check_body) when the slot was made, so decoding
/// them cannot fail. Mutation goes through [`Slot::get_mut`], which turns the
/// slot into `Owned` (the bytes would be stale).
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
        eval: EvaluationId,
        key: (u64, MessageId),
    ) -> &InnerMessage {
        match self {
            Slot::Owned(m) => m,
            Slot::Raw(_, cell) | Slot::Bytes(_, cell) | Slot::Frame(_, _, cell) => {
                cell.get_or_init(|| Box::new(decode(self.raw_bytes(bufs), eval, key)))
            }
        }
    }

    /// The message for mutation: decoded if it was not, and no longer held
    /// as bytes (they would be stale). Always `Some`.
    pub(super) fn get_mut(
        &mut self,
        bufs: Bufs<'_>,
        eval: EvaluationId,
        key: (u64, MessageId),
    ) -> Option<&mut InnerMessage> {
        let decoded = match self {
            Slot::Owned(_) => None,
            Slot::Raw(span, cell) => {
                let bytes = span_bytes(bufs, span);
                Some(
                    cell.take()
                        .unwrap_or_else(|| Box::new(decode(bytes, eval, key))),
                )
            }
            Slot::Bytes(bytes, cell) => Some(
                cell.take()
                    .unwrap_or_else(|| Box::new(decode(Some(bytes), eval, key))),
            ),
            Slot::Frame(frame, start, cell) => {
                let bytes = frame.get(*start..);
                Some(
                    cell.take()
                        .unwrap_or_else(|| Box::new(decode(bytes, eval, key))),
                )
            }
        };
        if let Some(m) = decoded {
            *self = Slot::Owned(m);
        }
        match self {
            Slot::Owned(m) => Some(m),
            Slot::Raw(..) | Slot::Bytes(..) | Slot::Frame(..) => None,
        }
    }
}

/// Decodes a body that passed [`check_body`](super::check::check_body). Should that ever fail, the
/// result is a placeholder with the slot's ids whose content says so (no
/// panic, and the error is visible where the message is shown).
fn decode(bytes: Option<&[u8]>, eval: EvaluationId, key: (u64, MessageId)) -> InnerMessage {
    let err = match bytes.map(|b| body_codec().deserialize::<InnerMessage>(b)) {
        Some(Ok(m)) => return m,
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
        let m = slot.get(&[SharedBytes::from(vec![1, 2, 3])], eval, (4, id));
        assert_eq!((m.evaluation_id, m.sequence, m.message_id), (eval, 4, id));
        assert!(m.content.starts_with("<undecodable snapshot message"));
        let slot = Slot::raw(Span {
            buf: 0,
            start: 0,
            end: 9,
        });
        assert!(slot.get(&[], eval, (4, id)).content.contains("no bytes"));
    }

    #[test]
    fn mutation_decodes_and_drops_the_bytes() {
        let m = sample();
        let mut body = Vec::new();
        encode_body(&m, &mut body);
        let mut slot = Slot::raw(Span {
            buf: 0,
            start: 0,
            end: body.len(),
        });
        let body = [SharedBytes::from(body)];
        assert!(slot.decoded().is_none());
        let key = (m.sequence, m.message_id);
        assert_eq!(slot.get(&body, m.evaluation_id, key), &m);
        assert_eq!(slot.decoded(), Some(&m));
        if let Some(x) = slot.get_mut(&body, m.evaluation_id, key) {
            x.turn = 9;
        }
        assert!(matches!(slot, Slot::Owned(_)));
        assert!(slot.raw_bytes(&body).is_none());
        assert_eq!(slot.decoded().map(|x| x.turn), Some(9));
    }
}
