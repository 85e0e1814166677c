//! Helpers shared by the fuzz targets: the frame round-trip property, small
//! structured events for the `arbitrary`-driven targets, and an in-memory
//! `.ajournal` writer.

pub mod adapters;

use agent_journal::{AdapterStateSnapshot, CallId, Envelope, EvaluationId, Event, InnerMessage, MessageId, Outcome, ProviderCallRecord, ProviderOutcome, Role, SessionId, TokenUsage, ToolCallRecord, ToolStatus};
use agent_journal::state::SessionState;
use agent_journal::format::{FRAME_HEADER_LEN, decode_frame, encode_frame};
use arbitrary::Arbitrary;
use chrono::{DateTime, Utc};

/// The event size limit the byte-level targets decode with.
pub const LIMIT: u64 = 1 << 16;

/// The property every decoded envelope must have: it re-encodes (within the
/// limit it was decoded with and within exactly its canonical size, but not
/// one byte less), and the re-encoded frame decodes to an equal envelope
/// whose encoding is the same bytes (a fixed point).
///
/// `body_len` is the length of the body it was decoded from: decoding the
/// same frame with `limit = body_len` must succeed as well.
pub fn check_decoded(env: &Envelope, frame: &[u8], body_len: usize) {
    let again: Envelope = decode_frame(frame, body_len as u64).unwrap_or_else(|e| {
        panic!("decodes with limit {LIMIT} but not with limit = its body length {body_len}: {e}")
    });
    assert_eq!(&again, env, "decoding depends on the limit");

    let re = encode_frame(env, LIMIT).expect("a decoded envelope must re-encode within the limit");
    let canonical = re.len() - FRAME_HEADER_LEN;
    assert!(
        canonical <= body_len,
        "re-encoding grew the body from {body_len} to {canonical} bytes"
    );
    let back: Envelope = decode_frame(&re, LIMIT).expect("a re-encoded envelope must decode");
    assert_eq!(&back, env, "decode(encode(env)) != env");
    let re2 = encode_frame(&back, LIMIT).expect("re-encode");
    assert_eq!(re, re2, "encoding is not a fixed point");

    // The limit is exact: the canonical size fits, one byte less does not.
    assert!(
        encode_frame(env, canonical as u64).is_ok(),
        "canonical size {canonical} refused"
    );
    if canonical > 0 {
        assert!(
            matches!(
                encode_frame(env, canonical as u64 - 1),
                Err(agent_journal::Error::TooLarge { .. })
            ),
            "a limit one byte under the size was not refused"
        );
    }
}

/// The fold of envelopes from an empty state.
pub fn fold<'a>(envs: impl IntoIterator<Item = &'a Envelope>) -> SessionState {
    let mut s = SessionState::new();
    for e in envs {
        s.apply(e);
    }
    s
}

/// An exported journal holding `records` in this order.
pub fn ajournal_bytes<'a>(records: impl IntoIterator<Item = &'a Envelope>) -> (Vec<u8>, Vec<u64>) {
    let mut out = agent_journal::format::ajournal::MAGIC.to_vec();
    let mut starts = Vec::new();
    for env in records {
        starts.push(out.len() as u64);
        let frame = encode_frame(env, LIMIT).expect("encode");
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    // The trailer, as the writer ends a file: mark, record count, CRC-32.
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&agent_journal::format::ajournal::TRAILER_MARK.to_le_bytes());
    out.extend_from_slice(&(starts.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc.to_le_bytes());
    (out, starts)
}

/// A fixed, microsecond-precision timestamp near 2023.
pub fn ts(offset: u32) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp_micros(1_700_000_000_000_000 + i64::from(offset))
        .expect("in range")
}

/// A string of at most 12 characters.
#[derive(Debug, Clone)]
pub struct SmallStr(pub String);

impl<'a> Arbitrary<'a> for SmallStr {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        const WORDS: [&str; 6] = ["", "hi", "ls /tmp", "{\"a\":1}", "é\u{0}\n", "call"];
        if u.ratio(1, 2)? {
            Ok(SmallStr(u.choose(&WORDS)?.to_string()))
        } else {
            let s: String = String::arbitrary(u)?;
            Ok(SmallStr(s.chars().take(12).collect()))
        }
    }
}

/// Evaluation `i` of a small pool (4), so events of the same evaluation meet.
pub fn eval(i: u8) -> EvaluationId {
    EvaluationId::from_bytes([
        0x01,
        0x90,
        0,
        0,
        0,
        0,
        0x70,
        0,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        i % 4,
    ])
}

/// Message id `i` of a small pool (8), so duplicates happen.
pub fn message_id(i: u8) -> MessageId {
    MessageId::from_bytes([
        0x02,
        0x90,
        0,
        0,
        0,
        0,
        0x70,
        0,
        0x80,
        0,
        0,
        0,
        0,
        0,
        0,
        i % 8,
    ])
}

/// Call id `i` of a small pool (4).
pub fn call_id(i: u8) -> CallId {
    CallId(format!("call_{}", i % 4))
}

fn role(i: u8) -> Role {
    [Role::System, Role::User, Role::Assistant, Role::Tool, Role::Other][usize::from(i % 5)]
}

fn status(i: u8) -> ToolStatus {
    [
        ToolStatus::Pending,
        ToolStatus::Started,
        ToolStatus::Completed,
        ToolStatus::Failed,
    ][usize::from(i % 4)]
}

/// A small event: every variant, with fields drawn from small pools.
#[derive(Debug, Clone, Arbitrary)]
pub enum SmallEvent {
    /// `SessionOpened` (normally only at seq 0; the API accepts it anywhere).
    Opened(Vec<(SmallStr, SmallStr)>),
    /// `EvaluationStarted`.
    Started { eval: u8, ns: SmallStr },
    /// `Message`.
    Message {
        role: u8,
        content: SmallStr,
        eval: u8,
        sequence: u8,
        turn: u8,
        id: u8,
        tool_calls: Vec<(u8, u8)>,
        tool_call_id: Option<u8>,
        created: u16,
    },
    /// `ToolStatus`.
    ToolStatus {
        eval: u8,
        call: u8,
        status: u8,
        error: Option<SmallStr>,
    },
    /// `ProviderCall`.
    ProviderCall {
        eval: u8,
        input: u16,
        output: u16,
        error: Option<SmallStr>,
    },
    /// `AdapterState`.
    AdapterState {
        id: u8,
        eval: Option<u8>,
        supersedes: Option<u8>,
        resumable: bool,
    },
    /// `Compacted`.
    Compacted {
        eval: u8,
        through: u8,
        summary: Option<SmallStr>,
    },
    /// `EvaluationFinished`.
    Finished { eval: u8, outcome: u8 },
    /// `ForkPoint` (normally written only by `fork`).
    ForkPoint { parent: u8, at: u8 },
    /// `Custom`.
    Custom { kind: SmallStr, payload: Vec<u8> },
}

impl SmallEvent {
    /// The event it stands for.
    pub fn to_event(&self) -> Event {
        match self {
            SmallEvent::Opened(labels) => Event::SessionOpened {
                labels: labels
                    .iter()
                    .take(3)
                    .map(|(k, v)| (k.0.clone(), v.0.clone()))
                    .collect(),
            },
            SmallEvent::Started { eval: e, ns } => Event::EvaluationStarted {
                evaluation_id: eval(*e),
                prompt_ns: ns.0.clone(),
                prompt_key: "key".into(),
                adapter: "fuzz".into(),
            },
            SmallEvent::Message {
                role: r,
                content,
                eval: e,
                sequence,
                turn,
                id,
                tool_calls,
                tool_call_id,
                created,
            } => {
                let mut m = InnerMessage::new(
                    role(*r),
                    content.0.clone(),
                    eval(*e),
                    u64::from(*sequence % 16),
                );
                m.turn = u32::from(*turn % 4);
                m.message_id = message_id(*id);
                m.created_at = ts(u32::from(*created));
                m.tool_calls = tool_calls
                    .iter()
                    .take(3)
                    .map(|(c, s)| ToolCallRecord {
                        call_id: call_id(*c),
                        name: "tool".into(),
                        arguments: "{}".into(),
                        status: status(*s),
                    })
                    .collect();
                m.tool_call_id = tool_call_id.map(call_id);
                m.tool_name = tool_call_id.map(|_| "tool".to_owned());
                Event::Message(m)
            }
            SmallEvent::ToolStatus {
                eval: e,
                call,
                status: s,
                error,
            } => Event::ToolStatus {
                evaluation_id: eval(*e),
                call_id: call_id(*call),
                status: status(*s),
                error: error.as_ref().map(|e| e.0.clone()),
            },
            SmallEvent::ProviderCall {
                eval: e,
                input,
                output,
                error,
            } => Event::ProviderCall(ProviderCallRecord {
                evaluation_id: eval(*e),
                turn: 1,
                provider: "scripted".into(),
                model: "m".into(),
                usage: TokenUsage {
                    input_tokens: u64::from(*input),
                    output_tokens: u64::from(*output),
                    cache_read_tokens: u64::from(*input / 2),
                    cache_write_tokens: 0, ..Default::default() },
                started_at: ts(1),
                finished_at: ts(2),
                outcome: match error {
                    None => ProviderOutcome::Ok,
                    Some(m) => ProviderOutcome::Error {
                        message: m.0.clone(),
                    },
                },
            }),
            SmallEvent::AdapterState {
                id,
                eval: e,
                supersedes,
                resumable,
            } => Event::AdapterState(AdapterStateSnapshot {
                snapshot_id: uuid::Uuid::from_bytes([*id % 4; 16]),
                adapter_type: "claude_agent_sdk".into(),
                state: "{}".into(),
                resumable: *resumable,
                captured_at: ts(3),
                evaluation_id: e.map(eval),
                supersedes: supersedes.map(|s| uuid::Uuid::from_bytes([s % 4; 16])),
            }),
            SmallEvent::Compacted {
                eval: e,
                through,
                summary,
            } => Event::Compacted {
                evaluation_id: eval(*e),
                through_sequence: u64::from(*through % 16),
                summary: summary.as_ref().map(|s| s.0.clone()),
            },
            SmallEvent::Finished { eval: e, outcome } => Event::EvaluationFinished {
                evaluation_id: eval(*e),
                outcome: match outcome % 3 {
                    0 => Outcome::Succeeded,
                    1 => Outcome::Failed {
                        error: "boom".into(),
                    },
                    _ => Outcome::Cancelled,
                },
            },
            SmallEvent::ForkPoint { parent, at } => Event::ForkPoint {
                parent: SessionId::from_bytes([*parent % 4; 16]),
                at: u64::from(*at),
            },
            SmallEvent::Custom { kind, payload } => Event::Custom {
                kind: kind.0.clone(),
                payload: payload.iter().copied().take(64).collect(),
            },
        }
    }
}

/// A batch of 0 to 8 events (its length is one byte of the input).
#[derive(Debug, Clone)]
pub struct Batch(pub Vec<SmallEvent>);

impl<'a> Arbitrary<'a> for Batch {
    fn arbitrary(u: &mut arbitrary::Unstructured<'a>) -> arbitrary::Result<Self> {
        let n = u.int_in_range(0..=8u8)?;
        (0..n)
            .map(|_| u.arbitrary())
            .collect::<arbitrary::Result<_>>()
            .map(Batch)
    }
}

/// A fresh temporary directory, on tmpfs when there is one: sled databases
/// are created and deleted for every input, and deleting them from a disk
/// file system costs tens of milliseconds. `AJ_FUZZ_TMPDIR` overrides.
pub fn scratch_dir() -> tempfile::TempDir {
    let base = std::env::var_os("AJ_FUZZ_TMPDIR")
        .map(std::path::PathBuf::from)
        .or_else(|| Some(std::path::PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    tempfile::Builder::new()
        .prefix("aj-fuzz-")
        .tempdir_in(base)
        .expect("temporary directory")
}

/// The properties of a provider format's import, for its fuzz target: the
/// import never panics; whatever it accepts exports to a request that
/// imports again, and exporting that gives the same request (a fixed
/// point); its neutral fields export to chat-completions messages the
/// OpenAI validator accepts.
pub fn provider_fixed_point(format: agent_journal::provider::ConversationFormat, data: &[u8]) {
    use agent_journal::provider::ConversationFormat;
    use agent_journal::provider::validate;
    let text = String::from_utf8_lossy(data);
    let eval = EvaluationId::from_bytes([7; 16]);
    let Ok(messages) = format.parse(&text, eval, "ns", "key") else {
        return;
    };
    // Strict refuses exactly the inputs that hold an opaque item.
    let opaque = messages
        .iter()
        .any(|m| !agent_journal::provider::opaque::opaque_types(m).is_empty());
    match format.parse_strict(&text, eval, "ns", "key") {
        Ok(_) => assert!(!opaque, "strict kept an opaque item"),
        Err(agent_journal::Error::Unmodeled { .. }) => {
            assert!(opaque, "strict refused an input with no opaque item")
        }
        Err(e) => panic!("strict refused what parse accepts, not as unmodeled: {e}"),
    }
    let exported = format.to_json(&messages);
    let again = format
        .parse(&exported.to_string(), eval, "ns", "key")
        .unwrap_or_else(|e| panic!("an exported request does not import: {e}\n{exported}"));
    assert_eq!(format.to_json(&again), exported, "export(import(export(x))) != export(x)");
    let chat = ConversationFormat::OpenAi.to_json(&messages);
    validate::openai(chat.as_array().expect("an array"))
        .unwrap_or_else(|e| panic!("invalid chat messages: {e}\n{chat}"));
}
