//! What the children write: the content of event `seq` of session `id` is
//! a pure function of `(id, seq)` ([`expected_event`]), so the parent can
//! check every recovered event, acknowledged or not, against what must be
//! there.

use agent_journal::{
    EvaluationId, Event, InnerMessage, MessageId, ProviderCallRecord, ProviderOutcome, Role,
    SessionId, TokenUsage,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::common::{Rng, splitmix64};

/// Values above ~128 KiB go to sled's blob files.
const BLOB_PAYLOAD: usize = 132 * 1024;

/// A hash of `(session, seq)`: everything about an event derives from it.
fn mix(id: SessionId, seq: u64) -> u64 {
    let n = u128::from_be_bytes(*id.as_bytes());
    splitmix64((n as u64) ^ splitmix64((n >> 64) as u64 ^ splitmix64(seq)))
}

/// The evaluation every event of session `id` belongs to.
fn eval_of(id: SessionId) -> EvaluationId {
    EvaluationId(Uuid::from_u64_pair(
        mix(id, u64::MAX),
        mix(id, u64::MAX - 1),
    ))
}

/// The timestamp of event `seq`.
fn time_of(seq: u64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_700_000_000 + seq as i64, (seq % 1000) as u32 * 1000)
        .expect("a valid timestamp")
}

/// The payload bytes of a `Custom` event: mostly small, now and then larger
/// than sled's blob threshold.
fn payload(id: SessionId, seq: u64) -> Vec<u8> {
    let h = mix(id, seq);
    let len = if h % 89 == 0 {
        BLOB_PAYLOAD + (h >> 16) as usize % (64 * 1024)
    } else {
        (h >> 16) as usize % 1024
    };
    let mut rng = Rng::new(h);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// The event at `seq` of session `id`, and nothing else, ever.
pub fn expected_event(id: SessionId, seq: u64) -> Event {
    let h = mix(id, seq);
    let evaluation_id = eval_of(id);
    match seq {
        0 => Event::SessionOpened {
            labels: vec![("test".into(), "kill".into())],
        },
        1 => Event::EvaluationStarted {
            evaluation_id,
            prompt_ns: "kill".into(),
            prompt_key: "kill".into(),
            adapter: "kill".into(),
        },
        _ => match h % 10 {
            0..=5 => Event::Custom {
                kind: "kill".into(),
                payload: payload(id, seq),
            },
            6 | 7 => Event::Message(InnerMessage {
                role: if h & 0x100 == 0 {
                    Role::User
                } else {
                    Role::Assistant
                },
                // Long enough (~2 KiB) that a session's snapshot passes
                // 64 KiB within a round or two, even in a debug build, so
                // kills also land while the sled store writes, replaces and
                // removes snapshot files.
                content: format!("message {seq} of {id}: {h:x} ").repeat(30),
                evaluation_id,
                sequence: seq,
                tool_calls: Vec::new(),
                tool_call_id: None,
                tool_name: None,
                turn: (seq / 8) as u32,
                prompt_ns: "kill".into(),
                prompt_key: "kill".into(),
                created_at: time_of(seq),
                message_id: MessageId(Uuid::from_u64_pair(h, seq)),
                provider_payload: None,
            }),
            _ => Event::ProviderCall(ProviderCallRecord {
                evaluation_id,
                turn: (seq / 8) as u32,
                provider: "kill".into(),
                model: "m".into(),
                usage: TokenUsage {
                    input_tokens: seq,
                    output_tokens: h % 1000,
                    cache_read_tokens: h % 7,
                    cache_write_tokens: 0,
                    ..Default::default()
                },
                started_at: time_of(seq),
                finished_at: time_of(seq + 1),
                outcome: ProviderOutcome::Ok,
            }),
        },
    }
}
