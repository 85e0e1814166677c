//! One message of [`Messages`](super::Messages): decoded, or its bincode
//! bytes in a shared buffer (a binary snapshot), decoded on first access.

use std::sync::OnceLock;

use bincode::Options;
use chrono::{DateTime, Utc};

use super::bytes::write_varint;
use crate::format::SharedBytes;
use crate::format::codec;
use crate::model::{EvaluationId, InnerMessage, MessageId, Role, ToolStatus};

/// Where a message's bincode bytes are in the buffer of its [`Messages`](super::Messages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
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

/// Encodes a message body, appending to `out`: exactly the bincode of the
/// crate's codec (held to it by the tests), written by hand because a
/// snapshot encodes every message not already held as bytes and serde's
/// pass was most of a snapshot's cost. Keep it in step with `InnerMessage`
/// (and with `check.rs`, its reader).
pub(super) fn encode_body(m: &InnerMessage, out: &mut Vec<u8>) {
    fn string(out: &mut Vec<u8>, s: &str) {
        write_varint(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
    fn uuid(out: &mut Vec<u8>, b: &[u8; 16]) {
        out.push(16);
        out.extend_from_slice(b);
    }
    fn option(out: &mut Vec<u8>, s: Option<&str>) {
        match s {
            None => out.push(0),
            Some(s) => {
                out.push(1);
                string(out, s);
            }
        }
    }
    out.push(role_index(m.role));
    string(out, &m.content);
    uuid(out, m.evaluation_id.as_bytes());
    write_varint(out, m.sequence);
    write_varint(out, m.tool_calls.len() as u64);
    for r in &m.tool_calls {
        string(out, &r.call_id.0);
        string(out, &r.name);
        string(out, &r.arguments);
        out.push(status_index(r.status));
    }
    option(out, m.tool_call_id.as_ref().map(|c| c.0.as_str()));
    option(out, m.tool_name.as_deref());
    write_varint(out, u64::from(m.turn));
    string(out, &m.prompt_ns);
    string(out, &m.prompt_key);
    // bincode's varint of an i64: zigzag.
    let micros = m.created_at.timestamp_micros();
    write_varint(out, ((micros << 1) ^ (micros >> 63)) as u64);
    uuid(out, m.message_id.as_bytes());
    option(out, m.provider_payload.as_deref());
}

/// The variant index of a role (declaration order, as bincode writes it).
fn role_index(r: Role) -> u8 {
    match r {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
    }
}

/// The variant index of a status (declaration order).
fn status_index(s: ToolStatus) -> u8 {
    match s {
        ToolStatus::Pending => 0,
        ToolStatus::Started => 1,
        ToolStatus::Completed => 2,
        ToolStatus::Failed => 3,
    }
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

    /// The message's bytes (in `buf`, or its own), if it is held as bytes.
    pub(super) fn raw_bytes<'b>(&'b self, buf: &'b [u8]) -> Option<&'b [u8]> {
        match self {
            Slot::Owned(_) => None,
            Slot::Raw(s, _) => buf.get(s.start..s.end),
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

    /// The message, decoded from `buf` on first access. `eval` and `key`
    /// are where the slot is (used only if the bytes were unreadable, which
    /// [`check_body`](super::check::check_body) rules out).
    pub(super) fn get(
        &self,
        buf: &[u8],
        eval: EvaluationId,
        key: (u64, MessageId),
    ) -> &InnerMessage {
        match self {
            Slot::Owned(m) => m,
            Slot::Raw(_, cell) | Slot::Bytes(_, cell) | Slot::Frame(_, _, cell) => {
                cell.get_or_init(|| Box::new(decode(self.raw_bytes(buf), eval, key)))
            }
        }
    }

    /// The message for mutation: decoded if it was not, and no longer held
    /// as bytes (they would be stale). Always `Some`.
    pub(super) fn get_mut(
        &mut self,
        buf: &[u8],
        eval: EvaluationId,
        key: (u64, MessageId),
    ) -> Option<&mut InnerMessage> {
        let decoded = match self {
            Slot::Owned(_) => None,
            Slot::Raw(span, cell) => {
                let bytes = buf.get(span.start..span.end);
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
    use crate::model::{CallId, ToolCallRecord, ToolStatus};

    fn sample() -> InnerMessage {
        let mut m = InnerMessage::new(Role::Assistant, "héllo", EvaluationId::new(), 7);
        m.tool_calls = vec![
            ToolCallRecord::new("c1", "ls", "{}"),
            ToolCallRecord::new("c2", "rm", "{\"f\":1}"),
        ];
        m.tool_calls[1].status = ToolStatus::Failed;
        m.tool_call_id = Some(CallId::from("c0"));
        m.tool_name = Some("t".into());
        m.turn = 3;
        m.prompt_ns = "ns".into();
        m.prompt_key = "k".into();
        m.provider_payload = Some("{}".into());
        m
    }

    fn bincode(m: &InnerMessage) -> Vec<u8> {
        body_codec().serialize(m).expect("bincode")
    }

    #[test]
    fn the_hand_encoder_writes_exactly_bincode() {
        let mut m = sample();
        let mut out = Vec::new();
        encode_body(&m, &mut out);
        assert_eq!(out, bincode(&m));
        m.tool_call_id = None;
        m.provider_payload = None;
        m.content = "x".repeat(70_000);
        m.sequence = u64::MAX;
        m.turn = u32::MAX;
        m.created_at = DateTime::<Utc>::MIN_UTC;
        for role in [Role::System, Role::User, Role::Tool] {
            m.role = role;
            out.clear();
            encode_body(&m, &mut out);
            assert_eq!(out, bincode(&m));
        }
    }

    proptest::proptest! {
        #[test]
        fn the_hand_encoder_agrees_with_bincode_on_any_message(
            content in ".{0,300}",
            sequence in proptest::prelude::any::<u64>(),
            turn in proptest::prelude::any::<u32>(),
            micros in -1_000_000_000_000_000i64..1_000_000_000_000_000,
            calls in proptest::collection::vec((".{0,8}", 0u8..4), 0..4),
            options in proptest::prelude::any::<(bool, bool, bool)>(),
        ) {
            let mut m = sample();
            m.content = content;
            m.sequence = sequence;
            m.turn = turn;
            m.created_at = chrono::TimeZone::timestamp_micros(&Utc, micros).single().unwrap_or_default();
            m.tool_calls = calls
                .into_iter()
                .map(|(s, st)| {
                    let mut r = ToolCallRecord::new(s.clone(), s.clone(), s);
                    r.status = [ToolStatus::Pending, ToolStatus::Started, ToolStatus::Completed, ToolStatus::Failed][usize::from(st)];
                    r
                })
                .collect();
            if !options.0 { m.tool_call_id = None; }
            if !options.1 { m.tool_name = None; }
            if !options.2 { m.provider_payload = None; }
            let mut out = Vec::new();
            encode_body(&m, &mut out);
            proptest::prop_assert_eq!(out, bincode(&m));
        }
    }

    #[test]
    fn undecodable_bytes_give_a_placeholder_not_a_panic() {
        let eval = EvaluationId::new();
        let id = MessageId::new();
        let slot = Slot::raw(Span { start: 0, end: 3 });
        let m = slot.get(&[1, 2, 3], eval, (4, id));
        assert_eq!((m.evaluation_id, m.sequence, m.message_id), (eval, 4, id));
        assert!(m.content.starts_with("<undecodable snapshot message"));
        let slot = Slot::raw(Span { start: 0, end: 9 });
        assert!(slot.get(&[], eval, (4, id)).content.contains("no bytes"));
    }

    #[test]
    fn mutation_decodes_and_drops_the_bytes() {
        let m = sample();
        let mut body = Vec::new();
        encode_body(&m, &mut body);
        let mut slot = Slot::raw(Span {
            start: 0,
            end: body.len(),
        });
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
