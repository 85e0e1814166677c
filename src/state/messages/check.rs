//! The check a message body passes before it is kept as bytes: that it is
//! exactly the bincode of an [`InnerMessage`](crate::model::InnerMessage),
//! so that decoding it later cannot fail.
//!
//! It is a hand-written reader of bincode 1.3's format as the crate's codec
//! writes it (`DefaultOptions`: varint integers, little endian, no trailing
//! bytes), field by field in the order of `InnerMessage`: it allocates
//! nothing and is several times faster than a serde pass. It may refuse
//! what bincode would accept (a snapshot is then replayed instead), never
//! the reverse; the tests hold it to bincode on every truncation and byte
//! flip of sample bodies. Keep it in step with `InnerMessage`.

use chrono::{DateTime, Utc};

use super::bytes::{Bad, Reader};
use crate::model::{EvaluationId, MessageId, Role, SessionId, ToolStatus};

/// What the indexes need of a checked body.
pub(crate) struct BodyIds {
    pub(crate) evaluation_id: EvaluationId,
    pub(crate) sequence: u64,
    pub(crate) message_id: MessageId,
    pub(crate) role: Role,
    pub(crate) turn: u32,
    /// True when the message has no tool calls and is no tool result: the
    /// only slices that look at it then are the ones the ids above feed.
    pub(super) plain: bool,
}

/// The variants of `Role` and of `ToolStatus`, by index (declaration order).
const ROLES: [Role; 4] = [Role::System, Role::User, Role::Assistant, Role::Tool];
const STATUSES: [ToolStatus; 4] = [
    ToolStatus::Pending,
    ToolStatus::Started,
    ToolStatus::Completed,
    ToolStatus::Failed,
];

/// Checks `body` and returns its ids.
pub(super) fn check_body(body: &[u8]) -> Result<BodyIds, String> {
    let mut r = Reader::new(body);
    read(&mut r).map_err(|Bad(what, why)| {
        let at = r.pos();
        format!("{what}: {why} (at byte {at})")
    })
}

fn read(r: &mut Reader<'_>) -> Result<BodyIds, Bad> {
    let role = r.variant(&ROLES, "role")?;
    r.string("content")?;
    let evaluation_id = EvaluationId::from_bytes(r.uuid("evaluation_id")?);
    let sequence = r.varint("sequence")?;
    let calls = r.len("tool_calls")?;
    let mut plain = calls == 0;
    for _ in 0..calls {
        r.string("tool_calls.call_id")?;
        r.string("tool_calls.name")?;
        r.string("tool_calls.arguments")?;
        r.variant(&STATUSES, "tool_calls.status")?;
    }
    if r.option("tool_call_id")? {
        plain = false;
        r.string("tool_call_id")?;
    }
    if r.option("tool_name")? {
        r.string("tool_name")?;
    }
    let turn = r.u32("turn")?;
    r.string("prompt_ns")?;
    r.string("prompt_key")?;
    timestamp(r)?;
    let message_id = MessageId::from_bytes(r.uuid("message_id")?);
    if r.option("provider_payload")? {
        r.string("provider_payload")?;
    }
    if !r.is_empty() {
        return Err(Bad("message", "trailing bytes"));
    }
    Ok(BodyIds {
        evaluation_id,
        sequence,
        message_id,
        role,
        turn,
        plain,
    })
}

/// The role and turn of a body that [`check_body`] accepts (for any other,
/// what it returns does not matter): read by skipping, unchecked, what
/// comes before them.
pub(super) fn role_and_turn(body: &[u8]) -> Result<(Role, u32), Bad> {
    let mut r = Reader::new(body);
    let role = r.variant(&ROLES, "role")?;
    r.skip_string("content")?;
    r.uuid("evaluation_id")?;
    r.varint("sequence")?;
    for _ in 0..r.len("tool_calls")? {
        r.skip_string("tool_calls.call_id")?;
        r.skip_string("tool_calls.name")?;
        r.skip_string("tool_calls.arguments")?;
        r.byte("tool_calls.status")?;
    }
    if r.option("tool_call_id")? {
        r.skip_string("tool_call_id")?;
    }
    if r.option("tool_name")? {
        r.skip_string("tool_name")?;
    }
    Ok((role, r.u32("turn")?))
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
    let mut r = Reader::new(body);
    let session = SessionId::from_bytes(r.uuid("session").ok()?);
    let seq = r.varint("seq").ok()?;
    timestamp(&mut r).ok()?;
    if r.varint("event").ok()? != MESSAGE_VARIANT {
        return None;
    }
    let start = r.pos();
    let ids = read(&mut r).ok()?;
    ids.plain.then(|| PeekedMessage {
        session,
        seq,
        body: &body[start..],
        start,
        ids,
    })
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

#[cfg(test)]
mod tests {
    use bincode::Options;
    use chrono::TimeZone;
    use proptest::prelude::*;

    use super::*;
    use crate::format::codec;
    use crate::model::{CallId, InnerMessage, ToolCallRecord};

    fn sample(content: &str, calls: usize, options: bool, micros: i64) -> InnerMessage {
        let role = ROLES[calls % ROLES.len()];
        let mut m = InnerMessage::new(role, content, EvaluationId::new(), 300);
        m.tool_calls = (0..calls)
            .map(|i| {
                let mut r = ToolCallRecord::new(format!("c{i}"), "ls", "{\"a\":[1,2]}");
                r.status = ToolStatus::Failed;
                r
            })
            .collect();
        if options {
            m.tool_call_id = Some(CallId::from("c0"));
            m.tool_name = Some("tøøl".into());
            m.provider_payload = Some("{}".into());
        }
        m.turn = 70_000;
        m.prompt_ns = "ns".into();
        m.prompt_key = "k".into();
        m.created_at = Utc.timestamp_micros(micros).single().unwrap_or_default();
        m
    }

    fn encode(m: &InnerMessage) -> Vec<u8> {
        codec(u64::MAX).serialize(m).expect("encode")
    }

    /// The check accepts only bodies bincode decodes, and every body it
    /// decodes that our encoder could write (here: all it accepts).
    fn agree(b: &[u8]) {
        let decoded = codec(u64::MAX).deserialize::<InnerMessage>(b);
        let checked = check_body(b);
        assert_eq!(checked.is_ok(), decoded.is_ok(), "{b:?}: {decoded:?}");
        if let (Ok(ids), Ok(m)) = (checked, decoded) {
            assert_eq!(
                (ids.evaluation_id, ids.sequence, ids.message_id),
                (m.evaluation_id, m.sequence, m.message_id)
            );
            assert_eq!((ids.role, ids.turn), (m.role, m.turn));
            assert_eq!((ids.role, ids.turn), (m.role, m.turn));
        }
    }

    /// On every body the check accepts, the quick read of role and turn
    /// agrees with it.
    fn agree_on_role_and_turn(b: &[u8]) {
        if let Ok(ids) = check_body(b) {
            let quick = role_and_turn(b).map_err(|Bad(w, y)| format!("{w}: {y}"));
            assert_eq!(quick, Ok((ids.role, ids.turn)), "{b:?}");
        }
    }

    fn mangle(body: &[u8]) {
        agree_on_role_and_turn(body);
        agree(body);
        for cut in 0..body.len() {
            agree(&body[..cut]);
        }
        let mut longer = body.to_vec();
        longer.push(0);
        agree(&longer);
        for i in 0..body.len() {
            for x in [0x01, 0x02, 0x80, 0xff, 0x5a, 0xfb, 0xfc, 0xfd, 0xfe] {
                let mut b = body.to_vec();
                b[i] ^= x;
                agree(&b);
                agree_on_role_and_turn(&b);
                b[i] = x;
                agree(&b);
                agree_on_role_and_turn(&b);
            }
        }
    }

    #[test]
    fn agrees_with_bincode_on_every_truncation_and_byte_change() {
        mangle(&encode(&sample("héllo", 2, true, 1_700_000_000_000_000)));
        mangle(&encode(&sample(&"x".repeat(300), 0, false, -5)));
    }

    /// `peek_message` takes exactly the envelopes bincode decodes to a
    /// plain message, with the same session, seq and ids.
    fn peek_agrees(b: &[u8]) {
        let decoded = codec(u64::MAX).deserialize::<crate::event::Envelope>(b);
        let plain = match &decoded {
            Ok(env) => match &env.event {
                crate::event::Event::Message(m)
                    if m.tool_calls.is_empty() && m.tool_call_id.is_none() =>
                {
                    Some((env.session, env.seq, m))
                }
                _ => None,
            },
            Err(_) => None,
        };
        match (peek_message(b), plain) {
            (None, None) => {}
            (Some(p), Some((session, seq, m))) => {
                assert_eq!((p.session, p.seq), (session, seq));
                assert_eq!(
                    (p.ids.evaluation_id, p.ids.sequence, p.ids.message_id),
                    (m.evaluation_id, m.sequence, m.message_id)
                );
                assert_eq!((p.ids.role, p.ids.turn), (m.role, m.turn));
                assert_eq!(p.body, &b[p.start..]);
                assert_eq!(
                    codec(u64::MAX)
                        .deserialize::<InnerMessage>(p.body)
                        .ok()
                        .as_ref(),
                    Some(m)
                );
            }
            (p, d) => panic!("peek {:?} vs decode {d:?} on {b:?}", p.map(|p| p.seq)),
        }
    }

    #[test]
    fn peeking_an_envelope_agrees_with_bincode_on_every_truncation_and_byte_change() {
        use crate::event::{Envelope, Event};
        let envelope = |event| Envelope {
            session: crate::model::SessionId::new(),
            seq: 70_000,
            at: chrono::Utc
                .timestamp_micros(1_700_000_000_000_000)
                .single()
                .unwrap_or_default(),
            event,
        };
        let mut with_result = sample("r", 0, true, 5);
        with_result.tool_calls.clear();
        for env in [
            envelope(Event::Message(sample("plain", 0, false, 1))),
            envelope(Event::Message(sample("calls", 2, false, 1))),
            envelope(Event::Message(with_result)),
            envelope(Event::Custom {
                kind: "k".into(),
                payload: vec![2; 3],
            }),
        ] {
            let b = codec(u64::MAX).serialize(&env).expect("encode");
            peek_agrees(&b);
            for cut in 0..b.len() {
                peek_agrees(&b[..cut]);
            }
            for i in 0..b.len() {
                for x in [0x01, 0x02, 0x80, 0xff, 0xfb, 0xfc, 0xfd] {
                    let mut m = b.clone();
                    m[i] ^= x;
                    peek_agrees(&m);
                    m[i] = x;
                    peek_agrees(&m);
                }
            }
        }
    }

    #[test]
    fn timestamps_at_the_edges_of_the_range() {
        // With `created_at` at 0 its varint is one byte, before the
        // message id (1 + 16 bytes) and the payload's option tag.
        let base = encode(&sample("", 0, false, 0));
        let at = base.len() - 1 - 17 - 1;
        assert_eq!(base[at], 0);
        let min = DateTime::<Utc>::MIN_UTC.timestamp_micros();
        let max = DateTime::<Utc>::MAX_UTC.timestamp_micros();
        for micros in [min - 1, min, max, max + 1, i64::MIN, i64::MAX, -1, 1] {
            let mut b = base[..at].to_vec();
            b.extend(codec(u64::MAX).serialize(&micros).expect("i64"));
            b.extend_from_slice(&base[at + 1..]);
            agree(&b);
            assert_eq!(check_body(&b).is_ok(), (min..=max).contains(&micros));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn agrees_on_random_messages_and_flips(
            content in ".{0,40}",
            calls in 0usize..5,
            options in any::<bool>(),
            micros in any::<i64>(),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        ) {
            let body = encode(&sample(&content, calls, options, micros));
            agree(&body);
            let mut b = body.clone();
            for (i, x) in flips {
                let i = i.index(b.len());
                b[i] = x;
            }
            agree(&b);
        }
    }
}
