//! The hand-written bincode of an [`InnerMessage`]: bincode 1.3's encoding
//! as the crate's codec writes it (`DefaultOptions`: varint integers, little
//! endian, no trailing bytes), field by field in the order of
//! `InnerMessage`, read and written without serde.
//!
//! Why by hand: a snapshot encodes every message not already held as bytes,
//! and serde's pass was most of a snapshot's cost; a decoded snapshot keeps
//! each message as its bytes, checked here (allocating nothing, several
//! times faster than a serde pass) so that decoding it later cannot fail.
//! The reader may refuse what bincode would accept (a snapshot is then
//! replayed instead), never the reverse.
//!
//! **Keep it in step with `InnerMessage`.** The tests (`message/tests.rs`)
//! hold the writer to bincode on any message (proptest) and the reader to
//! bincode on every truncation and byte flip of sample bodies: a field added
//! to `InnerMessage` without a change here fails them.

use chrono::{DateTime, Utc};

use crate::format::splice::{self, Splice};
use crate::model::{EvaluationId, InnerMessage, MessageId, Role, SessionId, ToolStatus};

#[cfg(test)]
mod tests;

/// Why bytes are refused: the field, and what is wrong.
pub(crate) struct Bad(pub(crate) &'static str, pub(crate) &'static str);

/// Appends bincode's varint of `v`: one byte below 251, else a marker (251,
/// 252, 253) and 2, 4 or 8 little-endian bytes.
pub(crate) fn write_varint(out: &mut Vec<u8>, v: u64) {
    if v < 251 {
        out.push(v as u8);
    } else if let Ok(v) = u16::try_from(v) {
        out.push(251);
        out.extend_from_slice(&v.to_le_bytes());
    } else if let Ok(v) = u32::try_from(v) {
        out.push(252);
        out.extend_from_slice(&v.to_le_bytes());
    } else {
        out.push(253);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

pub(crate) struct Reader<'a> {
    b: &'a [u8],
    len: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Self {
        Reader { b, len: b.len() }
    }

    /// Bytes read so far.
    pub(crate) fn pos(&self) -> usize {
        self.len - self.b.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.b.is_empty()
    }

    #[inline]
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Bad> {
        match self.b.split_at_checked(n) {
            Some((head, tail)) => {
                self.b = tail;
                Ok(head)
            }
            None => Err(Bad(what, "unexpected end")),
        }
    }

    #[inline]
    pub(crate) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Bad> {
        <[u8; N]>::try_from(self.take(N, what)?).map_err(|_| Bad(what, "unexpected end"))
    }

    #[inline]
    pub(crate) fn byte(&mut self, what: &'static str) -> Result<u8, Bad> {
        match self.b.split_first() {
            Some((&b, tail)) => {
                self.b = tail;
                Ok(b)
            }
            None => Err(Bad(what, "unexpected end")),
        }
    }

    /// bincode's varint: one byte below 251, else a marker and 2, 4 or 8
    /// little-endian bytes (a 16-byte one never fits a `u64`).
    #[inline]
    pub(crate) fn varint(&mut self, what: &'static str) -> Result<u64, Bad> {
        Ok(match self.byte(what)? {
            b @ 0..=250 => u64::from(b),
            251 => u64::from(u16::from_le_bytes(self.array(what)?)),
            252 => u64::from(u32::from_le_bytes(self.array(what)?)),
            253 => u64::from_le_bytes(self.array(what)?),
            _ => return Err(Bad(what, "invalid varint marker")),
        })
    }

    #[inline]
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, Bad> {
        u32::try_from(self.varint(what)?).map_err(|_| Bad(what, "out of range for u32"))
    }

    #[inline]
    pub(crate) fn i64(&mut self, what: &'static str) -> Result<i64, Bad> {
        let n = self.varint(what)?;
        // Zigzag.
        Ok(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    #[inline]
    pub(crate) fn len(&mut self, what: &'static str) -> Result<usize, Bad> {
        usize::try_from(self.varint(what)?).map_err(|_| Bad(what, "length out of range"))
    }

    #[inline]
    pub(crate) fn string(&mut self, what: &'static str) -> Result<(), Bad> {
        let n = self.len(what)?;
        let bytes = self.take(n, what)?;
        // ASCII (the common case, checked a word at a time) is UTF-8.
        if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
            Ok(())
        } else {
            Err(Bad(what, "invalid UTF-8"))
        }
    }

    /// A string, checked.
    #[inline]
    pub(crate) fn str(&mut self, what: &'static str) -> Result<&'a str, Bad> {
        let n = self.len(what)?;
        let bytes = self.take(n, what)?;
        std::str::from_utf8(bytes).map_err(|_| Bad(what, "invalid UTF-8"))
    }

    /// A string's bytes, skipped unchecked.
    #[inline]
    pub(crate) fn skip_string(&mut self, what: &'static str) -> Result<(), Bad> {
        let n = self.len(what)?;
        self.take(n, what).map(|_| ())
    }

    /// A UUID: bytes, which must be 16.
    #[inline]
    pub(crate) fn uuid(&mut self, what: &'static str) -> Result<[u8; 16], Bad> {
        if self.len(what)? != 16 {
            return Err(Bad(what, "a UUID has 16 bytes"));
        }
        self.array(what)
    }

    /// A unit variant's index.
    #[inline]
    pub(crate) fn variant<T: Copy>(
        &mut self,
        variants: &[T],
        what: &'static str,
    ) -> Result<T, Bad> {
        let i = self.u32(what)?;
        usize::try_from(i)
            .ok()
            .and_then(|i| variants.get(i).copied())
            .ok_or(Bad(what, "unknown variant"))
    }

    #[inline]
    pub(crate) fn option(&mut self, what: &'static str) -> Result<bool, Bad> {
        match self.byte(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Bad(what, "invalid option tag")),
        }
    }
}

/// Encodes a message body, appending to `out`: exactly the bincode of the
/// crate's codec (held to it by the tests), written by hand because a
/// snapshot encodes every message not already held as bytes and serde's
/// pass was most of a snapshot's cost. Keep it in step with `InnerMessage`
/// (and with [`check_body`], its reader).
pub(crate) fn encode_body(m: &InnerMessage, out: &mut Vec<u8>) {
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
    // Cut as serde cuts it (src/format/splice.rs).
    let payload = m.provider_payload.as_deref();
    match payload.and_then(|p| splice::cut(&splice::Fields::of(m), p)) {
        Some((rest, splices)) => {
            out.push(2);
            string(out, &rest);
            write_varint(out, splices.len() as u64);
            for s in splices {
                write_varint(out, s.at);
                write_varint(out, s.what);
            }
        }
        None => option(out, payload),
    }
}

/// The variant index of a role (declaration order, as bincode writes it).
fn role_index(r: Role) -> u8 {
    match r {
        Role::System => 0,
        Role::User => 1,
        Role::Assistant => 2,
        Role::Tool => 3,
        Role::Other => 4,
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

/// What the indexes need of a checked body.
pub(crate) struct BodyIds {
    pub(crate) evaluation_id: EvaluationId,
    pub(crate) sequence: u64,
    pub(crate) message_id: MessageId,
    pub(crate) turn: u32,
    /// True when the message has no tool calls and is no tool result: the
    /// only slices that look at it then are the ones the ids above feed.
    pub(crate) plain: bool,
}

/// The variants of `Role` and of `ToolStatus`, by index (declaration order).
const ROLES: [Role; 5] = [
    Role::System,
    Role::User,
    Role::Assistant,
    Role::Tool,
    Role::Other,
];
const STATUSES: [ToolStatus; 4] = [
    ToolStatus::Pending,
    ToolStatus::Started,
    ToolStatus::Completed,
    ToolStatus::Failed,
];

/// Checks `body` and returns its ids.
pub(crate) fn check_body(body: &[u8]) -> Result<BodyIds, String> {
    let mut r = Reader::new(body);
    read(&mut r).map_err(|Bad(what, why)| {
        let at = r.pos();
        format!("{what}: {why} (at byte {at})")
    })
}

fn read(r: &mut Reader<'_>) -> Result<BodyIds, Bad> {
    r.variant(&ROLES, "role")?;
    let content = r.str("content")?;
    let evaluation_id = EvaluationId::from_bytes(r.uuid("evaluation_id")?);
    let sequence = r.varint("sequence")?;
    let calls = r.len("tool_calls")?;
    let mut plain = calls == 0;
    // The fields a cut payload's splices may name.
    let mut fields = splice::Fields {
        content,
        tool_call_id: None,
        tool_name: None,
        calls: Vec::new(),
    };
    for _ in 0..calls {
        let call_id = r.str("tool_calls.call_id")?;
        let name = r.str("tool_calls.name")?;
        let arguments = r.str("tool_calls.arguments")?;
        fields.calls.push([arguments, call_id, name]);
        r.variant(&STATUSES, "tool_calls.status")?;
    }
    if r.option("tool_call_id")? {
        plain = false;
        fields.tool_call_id = Some(r.str("tool_call_id")?);
    }
    if r.option("tool_name")? {
        fields.tool_name = Some(r.str("tool_name")?);
    }
    let turn = r.u32("turn")?;
    r.string("prompt_ns")?;
    r.string("prompt_key")?;
    timestamp(r)?;
    let message_id = MessageId::from_bytes(r.uuid("message_id")?);
    match r.byte("provider_payload")? {
        0 => {}
        1 => r.string("provider_payload")?,
        2 => {
            // Cut (src/format/splice.rs): the rest, then the splices, which
            // must fit it and the fields read above.
            let rest = r.str("provider_payload")?;
            let n = r.len("provider_payload.splices")?;
            let mut splices = Vec::with_capacity(n.min(r.b.len() / 2));
            for _ in 0..n {
                splices.push(Splice {
                    at: r.varint("provider_payload.splices")?,
                    what: r.varint("provider_payload.splices")?,
                });
            }
            splice::check(&fields, rest, &splices)
                .map_err(|_| Bad("provider_payload", "splices do not fit"))?;
        }
        _ => return Err(Bad("provider_payload", "invalid option tag")),
    }
    if !r.is_empty() {
        return Err(Bad("message", "trailing bytes"));
    }
    Ok(BodyIds {
        evaluation_id,
        sequence,
        message_id,
        turn,
        plain,
    })
}

/// The status bytes of the tool-call records of `body` (a message's
/// bincode that [`check_body`] accepts) that differ from what `status_of`
/// gives for their call: `(offset, byte)` pairs to write for the bytes
/// [`encode_body`] makes of the message with those statuses (a status is
/// one byte). Empty when the bytes are up to date.
pub(crate) fn stale_statuses(
    body: &[u8],
    status_of: impl Fn(&str) -> Option<ToolStatus>,
) -> Result<Vec<(usize, u8)>, Bad> {
    let mut r = Reader::new(body);
    r.byte("role")?;
    r.skip_string("content")?;
    r.uuid("evaluation_id")?;
    r.varint("sequence")?;
    let mut out = Vec::new();
    for _ in 0..r.len("tool_calls")? {
        let call_id = r.str("tool_calls.call_id")?;
        r.skip_string("tool_calls.name")?;
        r.skip_string("tool_calls.arguments")?;
        let at = r.pos();
        let byte = r.byte("tool_calls.status")?;
        if let Some(status) = status_of(call_id).map(status_index)
            && status != byte
        {
            out.push((at, status));
        }
    }
    Ok(out)
}

/// A plain message (see [`BodyIds::plain`]) found in the frame body of an
/// envelope, checked as [`check_body`] checks a snapshot's.
pub(crate) struct PeekedMessage<'a> {
    pub(crate) session: SessionId,
    pub(crate) seq: u64,
    /// The message's bincode: the end of the envelope's.
    pub(crate) body: &'a [u8],
    /// Where `body` starts in the envelope's bytes.
    pub(crate) start: usize,
    pub(crate) ids: BodyIds,
}

/// The variant index of `Event::Message` in bincode (declaration order).
const MESSAGE_VARIANT: u64 = 2;

/// Reads `body` (a frame body: the bincode of an `Envelope`) as far as
/// needed to tell whether it holds a plain message, and checks all of it
/// if so. `None` for anything else (another event, a message with tool
/// calls, bytes bincode would refuse): decode it as usual.
pub(crate) fn peek_message(body: &[u8]) -> Option<PeekedMessage<'_>> {
    let (session, seq, start) = envelope_head(body)?;
    let mut r = Reader::new(body.get(start..)?);
    let ids = read(&mut r).ok()?;
    ids.plain.then(|| PeekedMessage {
        session,
        seq,
        body: &body[start..],
        start,
        ids,
    })
}

/// The session and seq of an envelope's frame body, and where its
/// message's bincode starts: `None` unless the event is a `Message` (read
/// as far as the event's variant; the message itself is not looked at).
fn envelope_head(body: &[u8]) -> Option<(SessionId, u64, usize)> {
    let mut r = Reader::new(body);
    let session = SessionId::from_bytes(r.uuid("session").ok()?);
    let seq = r.varint("seq").ok()?;
    timestamp(&mut r).ok()?;
    if r.varint("event").ok()? != MESSAGE_VARIANT {
        return None;
    }
    Some((session, seq, r.pos()))
}

/// Where the message of an envelope's frame body starts, if the envelope
/// holds a `Message` event. For a body that decoded as an envelope, the
/// bytes from there to the end are that message's bincode (the message
/// is the envelope's last field, and a decode refuses trailing bytes).
pub(crate) fn message_start(body: &[u8]) -> Option<usize> {
    envelope_head(body).map(|(_, _, start)| start)
}

/// A timestamp in microseconds, within what the decoder accepts.
fn timestamp(r: &mut Reader<'_>) -> Result<i64, Bad> {
    let micros = r.i64("timestamp")?;
    // What `Utc.timestamp_micros(micros).single()` (the decoder) accepts:
    // the representable range, an interval (held to it by the tests).
    let range =
        DateTime::<Utc>::MIN_UTC.timestamp_micros()..=DateTime::<Utc>::MAX_UTC.timestamp_micros();
    if !range.contains(&micros) {
        return Err(Bad("timestamp", "out of range"));
    }
    Ok(micros)
}
