//! The hand-written bincode held to bincode itself: varints, the writer on
//! any message, the reader on every truncation and byte flip.

use bincode::Options;
use chrono::TimeZone;
use proptest::prelude::*;

use super::*;
use crate::format::codec;
use crate::model::{CallId, ToolCallRecord};

// --- varints
#[test]
fn varints_match_bincode() {
    for v in [
        0u64,
        1,
        250,
        251,
        255,
        65_535,
        65_536,
        u32::MAX.into(),
        u64::MAX,
    ] {
        let mut out = Vec::new();
        write_varint(&mut out, v);
        assert_eq!(out, codec(u64::MAX).serialize(&v).expect("u64"));
        let mut r = Reader::new(&out);
        assert!(matches!(r.varint("v"), Ok(x) if x == v));
        assert!(r.is_empty());
    }
}

// --- the writer

fn sample_message() -> InnerMessage {
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
    codec(u64::MAX).serialize(m).expect("bincode")
}

#[test]
fn the_hand_encoder_writes_exactly_bincode() {
    let mut m = sample_message();
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
        repeats in proptest::prelude::any::<bool>(),
    ) {
        let mut m = sample_message();
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
        if options.2 && repeats {
            // A payload repeating the fields: stored cut.
            let args: Vec<String> = m.tool_calls.iter().map(|c| format!("{:?}", c.arguments)).collect();
            m.provider_payload = Some(format!("{{\"content\":{:?},\"args\":[{}]}}", m.content, args.join(",")));
        }
        let mut out = Vec::new();
        encode_body(&m, &mut out);
        proptest::prop_assert_eq!(out, bincode(&m));
    }
}

// --- the reader

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
        assert_eq!(ids.turn, m.turn);
    }
}

fn mangle(body: &[u8]) {
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
            b[i] = x;
            agree(&b);
        }
    }
}

#[test]
fn agrees_with_bincode_on_every_truncation_and_byte_change() {
    mangle(&encode(&sample("héllo", 2, true, 1_700_000_000_000_000)));
    mangle(&encode(&sample(&"x".repeat(300), 0, false, -5)));
    // A payload stored cut (tag 2), repeating the content and arguments.
    let mut m = sample("héllo wörld, twice", 2, true, 7);
    m.provider_payload = Some(format!(
        r#"{{"text":"héllo wörld, twice","input":{}}}"#,
        m.tool_calls[1].arguments
    ));
    let body = encode(&m);
    assert_eq!(body.windows(5).filter(|w| w == b"twice").count(), 1, "cut");
    mangle(&body);
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
            assert_eq!(p.ids.turn, m.turn);
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
