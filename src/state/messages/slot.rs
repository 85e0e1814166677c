//! One message of [`Messages`](super::Messages): decoded, or its bincode
//! bytes in a shared buffer (a binary snapshot), decoded on first access.

use std::sync::OnceLock;

use bincode::Options;
use chrono::{DateTime, Utc};

use crate::format::SharedBytes;
use crate::format::codec;
use crate::model::{CallId, EvaluationId, InnerMessage, MessageId, Role, ToolStatus};
use crate::state::hash::FastMap;

/// The status of one tool call, as joined from everything known about it.
#[derive(Clone, Debug, Default)]
pub(super) struct CallSlot {
    /// The highest-ranked status seen, from `ToolStatus` events and from the
    /// records of the messages that made the call.
    pub(super) status: ToolStatus,
    /// The messages (by `(sequence, message_id)`) whose `tool_calls` hold the call.
    pub(super) holders: Vec<(u64, MessageId)>,
}

/// The call slots of a message's evaluation, whose statuses a message's
/// tool-call records take when it is decoded (the bytes may hold older
/// ones: a status changes without the bytes being rewritten).
pub(super) type Calls<'a> = Option<&'a FastMap<CallId, CallSlot>>;

/// A message: its bincode bytes, shared (the end of the frame that
/// carried it, or a part of a binary snapshot's buffer), decoded on first
/// access and kept; or a decoded message alone (appended since the state
/// was decoded, or built).
///
/// The bytes were decoded when the slot was made (a `check_body`, or a
/// whole envelope's decode), so decoding them again cannot fail. The
/// statuses of the tool calls in the bytes may be older than the
/// message's: a decode gives each record the status of its call's
/// [`CallSlot`], and a status change forgets the decoded message
/// ([`Slot::forget`]), so the bytes stay the message's whatever happens to
/// its calls.
///
/// 48 bytes (72 with its key in its evaluation's run): the entries of a
/// million-event session's messages are about a fifth of its frames' bytes.
#[derive(Clone, Debug)]
pub(super) struct Slot {
    /// The message's bincode; `None` for a message held decoded only.
    bytes: Option<SharedBytes>,
    /// The message once decoded (always set when `bytes` is `None`).
    cell: OnceLock<Box<InnerMessage>>,
}

/// The options of a message body: the crate's codec with no limit (a body
/// is a slice of a buffer already bounded by the snapshot's limit).
fn body_codec() -> impl Options + Copy {
    codec(u64::MAX)
}

impl Slot {
    /// A decoded message.
    pub(super) fn owned(m: InnerMessage) -> Slot {
        Slot {
            bytes: None,
            cell: OnceLock::from(Box::new(m)),
        }
    }

    /// A message held as bytes that decoded (see the type's doc).
    pub(super) fn shared(bytes: SharedBytes) -> Slot {
        Slot {
            bytes: Some(bytes),
            cell: OnceLock::new(),
        }
    }

    /// The message's bytes, if it is held as bytes.
    pub(super) fn raw_bytes(&self) -> Option<&[u8]> {
        self.bytes.as_deref()
    }

    /// The decoded message, if it was decoded.
    #[cfg(test)]
    pub(super) fn decoded(&self) -> Option<&InnerMessage> {
        self.cell.get().map(|b| &**b)
    }

    /// The message, decoded on first access. `eval` and `key` are where
    /// the slot is (used only if the bytes were unreadable, which the
    /// decode at the slot's making rules out); `calls` gives its tool calls
    /// their statuses.
    pub(super) fn get(
        &self,
        calls: Calls<'_>,
        eval: EvaluationId,
        key: (u64, MessageId),
    ) -> &InnerMessage {
        self.cell
            .get_or_init(|| Box::new(decode(self.raw_bytes(), calls, eval, key)))
    }

    /// After a status change of one of its calls: a message held as bytes
    /// forgets its decoded form (the next read decodes it with the new
    /// status); one held decoded only gives the call's records `status`.
    pub(super) fn forget(&mut self, call_id: &CallId, status: crate::model::ToolStatus) {
        if self.bytes.is_some() {
            self.cell.take();
        } else if let Some(m) = self.cell.get_mut() {
            for r in m.tool_calls.iter_mut().filter(|r| &r.call_id == call_id) {
                r.status = status;
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
        let slot = Slot::shared(SharedBytes::from(vec![1, 2, 3]));
        let m = slot.get(None, eval, (4, id));
        assert_eq!((m.evaluation_id, m.sequence, m.message_id), (eval, 4, id));
        assert!(m.content.starts_with("<undecodable snapshot message"));
    }

    #[test]
    fn a_slot_is_48_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 48);
    }

    #[test]
    fn a_decode_takes_the_statuses_of_the_calls_and_forget_drops_it() {
        let m = sample();
        let mut body = Vec::new();
        encode_body(&m, &mut body);
        let bytes = SharedBytes::from(body.clone());
        let mut slot = Slot::shared(bytes.slice(0..body.len()));
        let key = (m.sequence, m.message_id);
        assert!(slot.decoded().is_none());
        assert_eq!(slot.get(None, m.evaluation_id, key), &m);
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
        let got = slot.get(Some(&calls), m.evaluation_id, key);
        let statuses: Vec<ToolStatus> = got.tool_calls.iter().map(|r| r.status).collect();
        assert_eq!(statuses, [ToolStatus::Completed, ToolStatus::Failed]);
        assert_eq!(slot.raw_bytes(), Some(&body[..]));
        // A message held decoded only takes the status in place.
        let mut owned = Slot::owned(m.clone());
        assert!(owned.raw_bytes().is_none());
        owned.forget(&CallId::from("c2"), ToolStatus::Completed);
        let got = owned.get(None, m.evaluation_id, key);
        assert_eq!(got.tool_calls[1].status, ToolStatus::Completed);
    }
}
