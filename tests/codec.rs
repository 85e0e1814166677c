//! The frame codec under arbitrary events and arbitrary bytes: round trips,
//! damage detection, no panics, re-encoding stability, and the size limit.

use agent_journal::conversation::{Conversation, ConversationEvent, Metadata};
use agent_journal::format::{FRAME_HEADER_LEN, FrameError, decode_frame, encode_frame, seal};
use agent_journal::{
    AdapterStateSnapshot, CallId, Envelope, Error, EvaluationId, Event, InnerMessage, MessageId,
    Outcome, ProviderCallRecord, ProviderOutcome, Role, SessionId, TokenUsage, ToolCallRecord,
    ToolStatus,
};
use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use uuid::Uuid;

pub(crate) mod conversation;

const LIMIT: u64 = 1 << 20;

// ---------------------------------------------------------------- strategies

/// Any Unicode scalar values (NUL, newlines, astral planes), empty included.
pub(crate) fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just(String::new()),
        4 => prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter),
        2 => "[a-z_]{1,10}",
    ]
}

pub(crate) fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(text())
}

fn uuid() -> impl Strategy<Value = Uuid> {
    any::<[u8; 16]>().prop_map(Uuid::from_bytes)
}

fn session_id() -> impl Strategy<Value = SessionId> {
    any::<[u8; 16]>().prop_map(SessionId::from_bytes)
}

fn eval_id() -> impl Strategy<Value = EvaluationId> {
    any::<[u8; 16]>().prop_map(EvaluationId::from_bytes)
}

fn message_id() -> impl Strategy<Value = MessageId> {
    any::<[u8; 16]>().prop_map(MessageId::from_bytes)
}

fn call_id() -> impl Strategy<Value = CallId> {
    text().prop_map(CallId)
}

/// Microsecond-precision timestamps anywhere in chrono's range, with the
/// ends of the range and the recent past weighted in.
fn timestamp() -> impl Strategy<Value = DateTime<Utc>> {
    let min = DateTime::<Utc>::MIN_UTC.timestamp_micros();
    let max = DateTime::<Utc>::MAX_UTC.timestamp_micros();
    prop_oneof![
        1 => Just(min),
        1 => Just(max),
        1 => Just(0i64),
        4 => min..=max,
        4 => 1_600_000_000_000_000i64..1_900_000_000_000_000,
    ]
    .prop_map(|micros| {
        Utc.timestamp_micros(micros)
            .single()
            .expect("in chrono's range")
    })
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![
        Just(Role::System),
        Just(Role::User),
        Just(Role::Assistant),
        Just(Role::Tool),
        Just(Role::Other)
    ]
}

pub(crate) fn tool_status() -> impl Strategy<Value = ToolStatus> {
    prop_oneof![
        Just(ToolStatus::Pending),
        Just(ToolStatus::Started),
        Just(ToolStatus::Completed),
        Just(ToolStatus::Failed)
    ]
}

fn tool_call() -> impl Strategy<Value = ToolCallRecord> {
    (call_id(), text(), text(), tool_status()).prop_map(|(call_id, name, arguments, status)| {
        ToolCallRecord {
            call_id,
            name,
            arguments,
            status,
        }
    })
}

fn inner_message() -> BoxedStrategy<InnerMessage> {
    (
        (role(), text(), eval_id(), any::<u64>()),
        prop::collection::vec(tool_call(), 0..4),
        (prop::option::of(call_id()), opt_text(), any::<u32>()),
        (text(), text(), timestamp(), message_id(), opt_text()),
    )
        .prop_map(
            |(
                (role, content, evaluation_id, sequence),
                tool_calls,
                (tool_call_id, tool_name, turn),
                (prompt_ns, prompt_key, created_at, message_id, provider_payload),
            )| InnerMessage {
                role,
                content,
                evaluation_id,
                sequence,
                tool_calls,
                tool_call_id,
                tool_name,
                turn,
                prompt_ns,
                prompt_key,
                created_at,
                message_id,
                provider_payload,
            },
        )
        .boxed()
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Succeeded),
        text().prop_map(|error| Outcome::Failed { error }),
        Just(Outcome::Cancelled),
    ]
}

fn provider_call() -> BoxedStrategy<ProviderCallRecord> {
    (
        (eval_id(), any::<u32>(), text(), text()),
        any::<[u64; 4]>(),
        (timestamp(), timestamp()),
        prop_oneof![
            Just(ProviderOutcome::Ok),
            text().prop_map(|message| ProviderOutcome::Error { message }),
        ],
    )
        .prop_map(
            |((evaluation_id, turn, provider, model), u, (started_at, finished_at), outcome)| {
                ProviderCallRecord {
                    evaluation_id,
                    turn,
                    provider,
                    model,
                    usage: TokenUsage {
                        input_tokens: u[0],
                        output_tokens: u[1],
                        cache_read_tokens: u[2],
                        cache_write_tokens: u[3],
                        ..Default::default()
                    },
                    started_at,
                    finished_at,
                    outcome,
                }
            },
        )
        .boxed()
}

fn adapter_state() -> BoxedStrategy<AdapterStateSnapshot> {
    (
        uuid(),
        text(),
        text(),
        any::<bool>(),
        timestamp(),
        prop::option::of(eval_id()),
        prop::option::of(uuid()),
    )
        .prop_map(
            |(
                snapshot_id,
                adapter_type,
                state,
                resumable,
                captured_at,
                evaluation_id,
                supersedes,
            )| {
                AdapterStateSnapshot {
                    snapshot_id,
                    adapter_type,
                    state,
                    resumable,
                    captured_at,
                    evaluation_id,
                    supersedes,
                }
            },
        )
        .boxed()
}

/// Every variant of `Event` (`Conversation` with every variant of
/// `ConversationEvent`, weighted as five).
fn event() -> BoxedStrategy<Event> {
    prop_oneof![
        1 => prop::collection::vec((text(), text()), 0..4)
            .prop_map(|labels| Event::SessionOpened { labels }),
        1 => (eval_id(), text(), text(), text()).prop_map(
            |(evaluation_id, prompt_ns, prompt_key, adapter)| Event::EvaluationStarted {
                evaluation_id,
                prompt_ns,
                prompt_key,
                adapter,
            }
        ),
        1 => inner_message().prop_map(Event::Message),
        1 => (eval_id(), call_id(), tool_status(), opt_text()).prop_map(
            |(evaluation_id, call_id, status, error)| Event::ToolStatus {
                evaluation_id,
                call_id,
                status,
                error,
            }
        ),
        1 => provider_call().prop_map(Event::ProviderCall),
        1 => adapter_state().prop_map(Event::AdapterState),
        1 => (eval_id(), any::<u64>(), opt_text()).prop_map(
            |(evaluation_id, through_sequence, summary)| Event::Compacted {
                evaluation_id,
                through_sequence,
                summary,
            }
        ),
        1 => (eval_id(), outcome()).prop_map(|(evaluation_id, outcome)| Event::EvaluationFinished {
            evaluation_id,
            outcome,
        }),
        1 => (session_id(), any::<u64>()).prop_map(|(parent, at)| Event::ForkPoint { parent, at }),
        1 => (text(), prop::collection::vec(any::<u8>(), 0..64))
            .prop_map(|(kind, payload)| Event::Custom { kind, payload }),
        5 => conversation::conversation_event(&conversation::Domain::any())
            .prop_map(|c| Event::Conversation(Box::new(c))),
    ]
    .boxed()
}

fn envelope() -> BoxedStrategy<Envelope> {
    (session_id(), any::<u64>(), timestamp(), event())
        .prop_map(|(session, seq, at, event)| Envelope {
            session,
            seq,
            at,
            event,
        })
        .boxed()
}

/// One edit of a body: overwrite, insert, delete, or cut it short.
#[derive(Clone, Debug)]
enum Edit {
    Set(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        1 => any::<usize>().prop_map(Edit::Delete),
        1 => any::<usize>().prop_map(Edit::Truncate),
    ]
}

fn apply(body: &mut Vec<u8>, edits: &[Edit]) {
    for e in edits {
        let n = body.len();
        match *e {
            Edit::Set(i, b) if n > 0 => body[i % n] = b,
            Edit::Insert(i, b) => body.insert(i % (n + 1), b),
            Edit::Delete(i) if n > 0 => {
                body.remove(i % n);
            }
            Edit::Truncate(i) => body.truncate(i % (n + 1)),
            _ => {}
        }
    }
}

/// Bodies to seal: pure noise, and valid event bodies with a few edits
/// (which get much further into the decoder than noise does).
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..256),
        3 => (envelope(), prop::collection::vec(edit(), 1..4)).prop_map(|(env, edits)| {
            let mut body = encode_frame(&env, LIMIT).expect("encode")[FRAME_HEADER_LEN..].to_vec();
            apply(&mut body, &edits);
            body
        }),
    ]
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_envelope_round_trips(env in envelope()) {
        let frame = encode_frame(&env, LIMIT).expect("encode");
        prop_assert_eq!(frame[0], agent_journal::format::FRAME_VERSION);
        let back: Envelope = decode_frame(&frame, LIMIT).expect("decode");
        prop_assert_eq!(back, env);
    }

    #[test]
    fn a_changed_byte_never_decodes_to_a_different_value(
        env in envelope(),
        pos in any::<usize>(),
        xor in 1u8..=255,
    ) {
        let mut frame = encode_frame(&env, LIMIT).expect("encode");
        let at = pos % frame.len();
        frame[at] ^= xor;
        match decode_frame::<Envelope>(&frame, LIMIT) {
            Err(_) => {}
            Ok(v) => prop_assert_eq!(
                v, env, "byte {} ^ {:#04x} decoded to a different value", at, xor
            ),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_frame::<Envelope>(&bytes, LIMIT);
        // With a valid header too, so the body reaches bincode.
        let mut framed = vec![agent_journal::format::FRAME_VERSION];
        framed.extend_from_slice(&bytes);
        let _ = decode_frame::<Envelope>(&framed, LIMIT);
    }

    #[test]
    fn sealed_bodies_never_panic_and_what_decodes_re_encodes_stably(body in body()) {
        let frame = seal(&body);
        if let Ok(v) = decode_frame::<Envelope>(&frame, LIMIT) {
            let again = encode_frame(&v, LIMIT).expect("a decoded value re-encodes");
            let re_body = &again[FRAME_HEADER_LEN..];
            // bincode's varint decoder accepts non-minimal encodings (see
            // `non_canonical_varints_are_accepted_and_re_encode_shorter`),
            // which re-encode strictly shorter; anything else is byte-exact,
            // except the JSON text of a conversation event's free-form
            // values, which is read as any JSON text that parses and written
            // as serde_json writes it: `1e2` comes back as `100.0`, longer
            // (`non_canonical_json_text_is_accepted_and_re_encodes_canonically`).
            let json_text = matches!(v.event, Event::Conversation(_));
            prop_assert!(
                re_body == body.as_slice() || re_body.len() < body.len() || json_text,
                "re-encoding changed the bytes without shortening them"
            );
            let back: Envelope = decode_frame(&again, LIMIT).expect("re-decode");
            prop_assert_eq!(&back, &v);
            // And the canonical form is a fixed point.
            prop_assert_eq!(encode_frame(&back, LIMIT).expect("encode"), again);
        }
    }
}

// ---------------------------------------------------------------- examples

fn sample() -> Envelope {
    Envelope {
        session: SessionId::from_bytes([7; 16]),
        seq: 5,
        at: Utc
            .timestamp_micros(1_700_000_000_000_001)
            .single()
            .expect("time"),
        event: Event::Custom {
            kind: "k".into(),
            payload: vec![1, 2, 3, 4, 5, 6, 7, 8],
        },
    }
}

#[test]
fn an_envelope_exactly_at_the_limit_encodes_and_one_byte_over_is_too_large() {
    let env = sample();
    let body_len = (encode_frame(&env, LIMIT).expect("encode").len() - FRAME_HEADER_LEN) as u64;
    assert!(body_len > 16, "{body_len}");

    let at = encode_frame(&env, body_len).expect("exactly at the limit");
    assert_eq!(at.len() as u64, body_len + FRAME_HEADER_LEN as u64);
    let back: Envelope = decode_frame(&at, body_len).expect("decodes at the limit");
    assert_eq!(back, env);

    let over = encode_frame(&env, body_len - 1);
    assert!(
        matches!(over, Err(Error::TooLarge { size, limit }) if size == body_len && limit == body_len - 1),
        "{over:?}"
    );
    let msg = over.unwrap_err().to_string();
    assert!(
        msg.contains(&body_len.to_string()) && msg.contains(&(body_len - 1).to_string()),
        "{msg}"
    );
}

#[test]
fn the_decoder_refuses_a_body_over_its_limit() {
    let env = sample();
    let frame = encode_frame(&env, LIMIT).expect("encode");
    let body_len = (frame.len() - FRAME_HEADER_LEN) as u64;
    let r = decode_frame::<Envelope>(&frame, body_len);
    assert_eq!(r, Ok(env));
    for limit in [0, 1, body_len / 2, body_len - 1] {
        let r = decode_frame::<Envelope>(&frame, limit);
        assert!(
            matches!(r, Err(FrameError::Decode(_))),
            "limit {limit} < body {body_len}: {r:?}"
        );
    }
}

#[test]
fn non_canonical_varints_are_accepted_and_re_encode_shorter() {
    // bincode 1.3.3 reads `251, lo, hi` as a u16 even for values under 251.
    // Harmless behind the CRC (only a deliberate writer produces it), but it
    // means two different frames can hold the same event; pinned here.
    let env = sample();
    let frame = encode_frame(&env, LIMIT).expect("encode");
    let mut body = frame[FRAME_HEADER_LEN..].to_vec();
    // session: varint 16 then 16 bytes; seq follows at offset 17.
    assert_eq!((body[0], body[17]), (16, 5));
    body.splice(17..18, [251, 5, 0]);
    let v: Envelope = decode_frame(&seal(&body), LIMIT).expect("decodes");
    assert_eq!(v, env);
    let again = encode_frame(&v, LIMIT).expect("encode");
    assert_eq!(again, frame);
    assert!(again.len() - FRAME_HEADER_LEN < body.len());
}

#[test]
fn non_canonical_json_text_is_accepted_and_re_encodes_canonically() {
    // A conversation event's free-form JSON is stored as JSON text (a
    // bincode string); any text serde_json parses is accepted. Harmless
    // behind the CRC, like the varints above, but two frames of different
    // lengths can hold the same event; pinned here.
    let mut metadata = Metadata::new();
    metadata.insert("n".into(), serde_json::json!(100.0));
    let mut env = sample();
    env.event = Event::Conversation(Box::new(ConversationEvent::Updated(Conversation {
        id: env.session,
        agent: "a".into(),
        subject_id: None,
        title: None,
        created_at: env.at,
        updated_at: env.at,
        metadata,
    })));
    let frame = encode_frame(&env, LIMIT).expect("encode");
    let body = &frame[FRAME_HEADER_LEN..];
    let canonical = br#"{"n":100.0}"#;
    let at = body
        .windows(canonical.len())
        .position(|w| w == canonical)
        .expect("the JSON text is in the body");
    // The string's length (one varint byte) and its text.
    assert_eq!(body[at - 1] as usize, canonical.len());
    let other = br#"{"n":1e2}"#;
    let mut edited = body[..at - 1].to_vec();
    edited.push(other.len() as u8);
    edited.extend_from_slice(other);
    edited.extend_from_slice(&body[at + canonical.len()..]);
    let v: Envelope = decode_frame(&seal(&edited), LIMIT).expect("decodes");
    assert_eq!(v, env);
    let again = encode_frame(&v, LIMIT).expect("encode");
    assert_eq!(again, frame);
    assert!(again.len() - FRAME_HEADER_LEN > edited.len());
}

#[test]
fn every_single_bit_flip_of_an_event_frame_is_detected() {
    // Exhaustive over one frame (cheap): the CRC catches every 1-bit error.
    let env = sample();
    let frame = encode_frame(&env, LIMIT).expect("encode");
    for byte in 0..frame.len() {
        for bit in 0..8 {
            let mut f = frame.clone();
            f[byte] ^= 1 << bit;
            assert!(
                decode_frame::<Envelope>(&f, LIMIT).is_err(),
                "flip of byte {byte} bit {bit} went undetected"
            );
        }
    }
}
