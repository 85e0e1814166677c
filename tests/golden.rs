//! Golden bytes: the exact encoding of one event of every variant. A change
//! here is a change of the on-disk format: add a variant instead.

use agent_journal::format::encode_frame;
use agent_journal::{
    AdapterStateSnapshot, CallId, Envelope, EvaluationId, Event, InnerMessage, MessageId, Outcome,
    ProviderCallRecord, ProviderOutcome, Role, SessionId, TokenUsage, ToolCallRecord, ToolStatus,
};
use chrono::{TimeZone, Utc};
use uuid::Uuid;

fn uuid(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

fn events() -> Vec<Event> {
    let t = Utc
        .timestamp_micros(1_700_000_000_123_456)
        .single()
        .expect("time");
    let eval = EvaluationId(uuid(2));
    vec![
        Event::SessionOpened {
            labels: vec![("agent".into(), "demo".into())],
        },
        Event::EvaluationStarted {
            evaluation_id: eval,
            prompt_ns: "ns".into(),
            prompt_key: "key".into(),
            adapter: "openai".into(),
        },
        Event::Message(InnerMessage {
            role: Role::Assistant,
            content: "hi".into(),
            evaluation_id: eval,
            sequence: 1,
            tool_calls: vec![ToolCallRecord {
                call_id: CallId("c1".into()),
                name: "ls".into(),
                arguments: "{}".into(),
                status: ToolStatus::Pending,
            }],
            tool_call_id: None,
            tool_name: None,
            turn: 1,
            prompt_ns: "ns".into(),
            prompt_key: "key".into(),
            created_at: t,
            message_id: MessageId(uuid(3)),
            provider_payload: Some("{\"content\":null}".into()),
        }),
        Event::ToolStatus {
            evaluation_id: eval,
            call_id: CallId("c1".into()),
            status: ToolStatus::Failed,
            error: Some("boom".into()),
        },
        Event::ProviderCall(ProviderCallRecord {
            evaluation_id: eval,
            turn: 1,
            provider: "openai".into(),
            model: "m".into(),
            usage: TokenUsage {
                input_tokens: 300,
                output_tokens: 20,
                cache_read_tokens: 0,
                cache_write_tokens: 1,
            },
            started_at: t,
            finished_at: t,
            outcome: ProviderOutcome::Error {
                message: "x".into(),
            },
        }),
        Event::AdapterState(AdapterStateSnapshot {
            snapshot_id: uuid(4),
            adapter_type: "sdk".into(),
            state: "{}".into(),
            resumable: true,
            captured_at: t,
            evaluation_id: Some(eval),
            supersedes: None,
        }),
        Event::Compacted {
            evaluation_id: eval,
            through_sequence: 7,
            summary: Some("s".into()),
        },
        Event::EvaluationFinished {
            evaluation_id: eval,
            outcome: Outcome::Failed { error: "e".into() },
        },
        Event::Forked {
            parent: SessionId(uuid(5)),
            at: 300,
        },
        Event::Custom {
            kind: "k".into(),
            payload: vec![1, 2, 3],
        },
    ]
}

const GOLDEN: &[&str] = &[
    "01c5e829ca100101010101010101010101010101010100fd8044403048140c000001056167656e740464656d6f",
    "014919f54f100101010101010101010101010101010101fd8044403048140c00011002020202020202020202020202020202026e73036b6579066f70656e6169",
    "0132e282b7100101010101010101010101010101010102fd8044403048140c00020202686910020202020202020202020202020202020101026331026c73027b7d00000001026e73036b6579fd8044403048140c00100303030303030303030303030303030301107b22636f6e74656e74223a6e756c6c7d",
    "013495ab3b100101010101010101010101010101010103fd8044403048140c00031002020202020202020202020202020202026331030104626f6f6d",
    "0147f32fde100101010101010101010101010101010104fd8044403048140c0004100202020202020202020202020202020201066f70656e6169016dfb2c01140001fd8044403048140c00fd8044403048140c00010178",
    "014c7b0c28100101010101010101010101010101010105fd8044403048140c000510040404040404040404040404040404040373646b027b7d01fd8044403048140c0001100202020202020202020202020202020200",
    "01b430caef100101010101010101010101010101010106fd8044403048140c0006100202020202020202020202020202020207010173",
    "01aa5c25cf100101010101010101010101010101010107fd8044403048140c00071002020202020202020202020202020202010165",
    "013ac954dd100101010101010101010101010101010108fd8044403048140c00081005050505050505050505050505050505fb2c01",
    "01ca3c76e8100101010101010101010101010101010109fd8044403048140c0009016b03010203",
];

#[test]
fn every_variant_encodes_to_its_pinned_bytes() {
    let t = Utc
        .timestamp_micros(1_700_000_000_123_456)
        .single()
        .expect("time");
    let actual: Vec<String> = events()
        .into_iter()
        .enumerate()
        .map(|(i, event)| {
            let env = Envelope {
                session: SessionId(uuid(1)),
                seq: i as u64,
                at: t,
                event,
            };
            let frame = encode_frame(&env, 1 << 20).expect("encode");
            frame.iter().map(|b| format!("{b:02x}")).collect()
        })
        .collect();
    assert_eq!(actual.len(), 10, "one event of each variant");
    assert_eq!(actual, GOLDEN, "the encoding changed; actual:\n{actual:#?}");
}
