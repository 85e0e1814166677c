//! Golden bytes: the exact encoding of one event of every variant, in
//! format version 1 (`docs/format.md`). A change here is a change of the
//! on-disk format: add a variant instead.

use agent_journal::conversation::{
    CallOutcome, CompactionRecord, Conversation, ConversationEvent, ConversationMessage, Metadata,
    ProviderCallRecord as ConversationCall, ProviderOperation, ToolSpec, TurnError, TurnId,
    TurnRecord, TurnStatus,
};
use agent_journal::format::{decode_frame, encode_frame};
use agent_journal::{
    AdapterStateSnapshot, CallId, Envelope, EvaluationId, Event, InnerMessage, MessageId, Outcome,
    ProviderCallRecord, ProviderOutcome, Role, SessionId, TokenUsage, ToolCallRecord, ToolStatus,
};
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
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
                ..Default::default()
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
        Event::Custom {
            kind: "k".into(),
            payload: vec![1, 2, 3],
        },
    ]
    .into_iter()
    .chain(
        conversation_events(t)
            .into_iter()
            .map(|e| Event::Conversation(Box::new(e))),
    )
    .chain([Event::ForkPoint {
        parent: SessionId(uuid(5)),
        at: 300,
    }])
    .collect()
}

/// A JSON object's members.
fn members(v: serde_json::Value) -> Metadata {
    match v {
        serde_json::Value::Object(m) => m.into_iter().collect(),
        other => panic!("not an object: {other}"),
    }
}

/// One event of every variant of `ConversationEvent`, with structured JSON
/// (nested, integers, floats, null) in their free-form fields.
fn conversation_events(t: DateTime<Utc>) -> Vec<ConversationEvent> {
    let conversation = SessionId(uuid(1));
    let turn = TurnId(uuid(6));
    let later = t + chrono::Duration::microseconds(1_500_000);
    let created = Conversation {
        id: conversation,
        agent: "support".into(),
        subject_id: Some("user-42".into()),
        title: Some("Refund".into()),
        created_at: t,
        updated_at: t,
        metadata: members(json!({"cohort": "b", "weight": 0.25, "tags": ["vip", 7]})),
    };
    let updated = Conversation {
        title: None,
        updated_at: later,
        metadata: Metadata::new(),
        ..created.clone()
    };
    let message = ConversationMessage {
        id: MessageId(uuid(3)),
        conversation_id: conversation,
        role: Role::Assistant,
        content: json!({
            "type": "text",
            "parts": [{"text": "Checking", "score": 0.5}, null, true, -7, 18_446_744_073_709_551_615u64],
        }),
        name: Some("agent".into()),
        created_at: t,
        provider_message_id: Some("msg_01".into()),
        metadata: members(json!({"tokens": 12, "ui": {"pinned": false, "ratio": 1e-7}})),
        turn_id: Some(turn),
        tool_calls: vec![
            ToolCallRecord::new(
                CallId("call_1".into()),
                "search_docs",
                r#"{"query":"refund"}"#,
            ),
            ToolCallRecord::new(CallId("call_2".into()), "ls", "{}"),
        ],
        tool_call_id: None,
    };
    let turn_record = TurnRecord {
        id: turn,
        agent: "support".into(),
        status: TurnStatus::Failed,
        trigger_type: Some("user_message".into()),
        input_messages: vec![MessageId(uuid(8))],
        output_messages: vec![MessageId(uuid(3))],
        started_at: t,
        finished_at: Some(later),
        error: Some(TurnError {
            message: "rate limited".into(),
            code: Some("429".into()),
            provider: Some("openai".into()),
            raw: json!({"error": {"type": "rate_limit_error", "retry_after": 1.5, "param": null}}),
        }),
        metadata: members(json!({"hints": {"model": "gpt-4o"}})),
    };
    let call = ConversationCall {
        id: uuid(7),
        conversation_id: conversation,
        turn_id: turn,
        provider: "openai".into(),
        model: "gpt-4o".into(),
        operation: ProviderOperation::Chat,
        request_id: Some("req_123".into()),
        correlation_id: Some("conv:turn".into()),
        parent_correlation_id: None,
        request_metadata: members(json!({"ai.streaming": false})),
        response_metadata: members(json!({"finish_reason": "tool_calls"})),
        parameters: members(json!({"temperature": 0.2, "max_tokens": 512})),
        tools: vec![ToolSpec {
            name: "search_docs".into(),
            description: "Search the help center".into(),
            parameters: json!({
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            }),
        }],
        sent_messages: vec![MessageId(uuid(8))],
        usage: Some(TokenUsage {
            input_tokens: 300,
            output_tokens: 20,
            cache_read_tokens: 256,
            cache_write_tokens: 0,
            total_tokens: Some(320),
            breakdown: members(json!({"reasoning_tokens": 8})),
        }),
        outcome: Some(CallOutcome {
            ok: true,
            status: Some(200),
            error_category: None,
            error: None,
            attempts: 2,
        }),
        started_at: t,
        finished_at: Some(later),
    };
    vec![
        ConversationEvent::Created(created),
        ConversationEvent::Updated(updated),
        ConversationEvent::Message(message),
        ConversationEvent::Turn(turn_record),
        ConversationEvent::ProviderCall(call),
        ConversationEvent::Compacted(CompactionRecord {
            turn_id: Some(turn),
            first_kept: MessageId(uuid(8)),
            strategy: "summary(message_limit)".into(),
            summary: Some("They asked for a refund.".into()),
            messages_before: 40,
            messages_after: 12,
            tokens_before: Some(9000),
            at: later,
        }),
    ]
}

/// The position of `e`'s variant in `events()`; an exhaustive match, so a
/// new variant of `Event` or `ConversationEvent` does not compile until it
/// has a golden case.
fn variant(e: &Event) -> usize {
    match e {
        Event::SessionOpened { .. } => 0,
        Event::EvaluationStarted { .. } => 1,
        Event::Message(_) => 2,
        Event::ToolStatus { .. } => 3,
        Event::ProviderCall(_) => 4,
        Event::AdapterState(_) => 5,
        Event::Compacted { .. } => 6,
        Event::EvaluationFinished { .. } => 7,
        Event::Custom { .. } => 8,
        Event::Conversation(c) => match **c {
            ConversationEvent::Created(_) => 9,
            ConversationEvent::Updated(_) => 10,
            ConversationEvent::Message(_) => 11,
            ConversationEvent::Turn(_) => 12,
            ConversationEvent::ProviderCall(_) => 13,
            ConversationEvent::Compacted(_) => 14,
        },
        Event::ForkPoint { .. } => 15,
    }
}

const GOLDEN: &[&str] = &[
    "01c5e829ca100101010101010101010101010101010100fd8044403048140c000001056167656e740464656d6f",
    "014919f54f100101010101010101010101010101010101fd8044403048140c00011002020202020202020202020202020202026e73036b6579066f70656e6169",
    "0132e282b7100101010101010101010101010101010102fd8044403048140c00020202686910020202020202020202020202020202020101026331026c73027b7d00000001026e73036b6579fd8044403048140c00100303030303030303030303030303030301107b22636f6e74656e74223a6e756c6c7d",
    "013495ab3b100101010101010101010101010101010103fd8044403048140c00031002020202020202020202020202020202026331030104626f6f6d",
    "01ca32d0b0100101010101010101010101010101010104fd8044403048140c0004100202020202020202020202020202020201066f70656e6169016dfb2c0114000100027b7dfd8044403048140c00fd8044403048140c00010178",
    "014c7b0c28100101010101010101010101010101010105fd8044403048140c000510040404040404040404040404040404040373646b027b7d01fd8044403048140c0001100202020202020202020202020202020200",
    "01b430caef100101010101010101010101010101010106fd8044403048140c0006100202020202020202020202020202020207010173",
    "01aa5c25cf100101010101010101010101010101010107fd8044403048140c00071002020202020202020202020202020202010165",
    "013dfca7c9100101010101010101010101010101010108fd8044403048140c0008016b03010203",
    "0167679a2b100101010101010101010101010101010109fd8044403048140c000900100101010101010101010101010101010107737570706f72740107757365722d34320106526566756e64fd8044403048140c00fd8044403048140c002d7b22636f686f7274223a2262222c2274616773223a5b22766970222c375d2c22776569676874223a302e32357d",
    "01de7cfaf510010101010101010101010101010101010afd8044403048140c000901100101010101010101010101010101010107737570706f72740107757365722d343200fd8044403048140c00fd400b6e3048140c00027b7d",
    "016aad5cfa10010101010101010101010101010101010bfd8044403048140c00090210030303030303030303030303030303031001010101010101010101010101010101025b7b227061727473223a5b7b2273636f7265223a302e352c2274657874223a22436865636b696e67227d2c6e756c6c2c747275652c2d372c31383434363734343037333730393535313631355d2c2274797065223a2274657874227d01056167656e74fd8044403048140c0001066d73675f3031307b22746f6b656e73223a31322c227569223a7b2270696e6e6564223a66616c73652c22726174696f223a31652d377d7d011006060606060606060606060606060606020663616c6c5f310b7365617263685f646f6373127b227175657279223a22726566756e64227d000663616c6c5f32026c73027b7d0000",
    "013f0a8dcb10010101010101010101010101010101010cfd8044403048140c000903100606060606060606060606060606060607737570706f727403010c757365725f6d657373616765011008080808080808080808080808080808011003030303030303030303030303030303fd8044403048140c0001fd400b6e3048140c00010c72617465206c696d69746564010334323901066f70656e6169447b226572726f72223a7b22706172616d223a6e756c6c2c2272657472795f6166746572223a312e352c2274797065223a22726174655f6c696d69745f6572726f72227d7d1c7b2268696e7473223a7b226d6f64656c223a226770742d346f227d7d",
    "014c9881fb10010101010101010101010101010101010dfd8044403048140c000904100707070707070707070707070707070710010101010101010101010101010101011006060606060606060606060606060606066f70656e6169066770742d346f0001077265715f3132330109636f6e763a7475726e00167b2261692e73747265616d696e67223a66616c73657d1e7b2266696e6973685f726561736f6e223a22746f6f6c5f63616c6c73227d247b226d61785f746f6b656e73223a3531322c2274656d7065726174757265223a302e327d010b7365617263685f646f637316536561726368207468652068656c702063656e7465724f7b2270726f70657274696573223a7b227175657279223a7b2274797065223a22737472696e67227d7d2c227265717569726564223a5b227175657279225d2c2274797065223a226f626a656374227d01100808080808080808080808080808080801fb2c0114fb00010001fb4001167b22726561736f6e696e675f746f6b656e73223a387d010101c8000002fd8044403048140c0001fd400b6e3048140c00",
    "01de4d3e6210010101010101010101010101010101010efd8044403048140c00090501100606060606060606060606060606060610080808080808080808080808080808081673756d6d617279286d6573736167655f6c696d6974290118546865792061736b656420666f72206120726566756e642e280c01fb2823fd400b6e3048140c00",
    "017052271110010101010101010101010101010101010ffd8044403048140c000a1005050505050505050505050505050505fb2c01",
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
    let variants: Vec<usize> = events().iter().map(variant).collect();
    assert_eq!(
        variants,
        (0..16).collect::<Vec<_>>(),
        "one event of each variant, in order"
    );
    assert_eq!(actual, GOLDEN, "the encoding changed; actual:\n{actual:#?}");
}

#[test]
fn the_pinned_bytes_decode_to_their_events() {
    for (i, (hex, event)) in GOLDEN.iter().zip(events()).enumerate() {
        let frame: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|k| u8::from_str_radix(&hex[k..k + 2], 16).expect("hex"))
            .collect();
        let env: Envelope = decode_frame(&frame, 1 << 20).expect("decode");
        assert_eq!((env.seq, env.event), (i as u64, event), "GOLDEN[{i}]");
    }
}

/// A message whose provider payload repeats its content and its call's
/// arguments: its frame holds them once (payload tag 2, the rest and two
/// splices; `docs/format.md`), pinned here, and reads back whole.
#[test]
fn a_message_whose_payload_repeats_its_fields_encodes_cut_to_its_pinned_bytes() {
    const CUT: &str = "01e19c9d3f100101010101010101010101010101010111fd8044403048140c0002020e4c6f6f6b696e672069742075702e10020202020202020202020202020202020201026331026c730f7b2270617468223a222f746d70227d00000001026e73036b6579fd8044403048140c00100303030303030303030303030303030302607b22636f6e74656e74223a2c22726f6c65223a22617373697374616e74222c22746f6f6c5f63616c6c73223a5b7b2266756e6374696f6e223a7b22617267756d656e7473223a2c226e616d65223a226c73227d2c226964223a226331227d5d7d020b004606";
    let t = Utc
        .timestamp_micros(1_700_000_000_123_456)
        .single()
        .expect("time");
    let eval = EvaluationId(uuid(2));
    let message = InnerMessage {
        role: Role::Assistant,
        content: "Looking it up.".into(),
        evaluation_id: eval,
        sequence: 2,
        tool_calls: vec![ToolCallRecord {
            call_id: CallId("c1".into()),
            name: "ls".into(),
            arguments: "{\"path\":\"/tmp\"}".into(),
            status: ToolStatus::Pending,
        }],
        tool_call_id: None,
        tool_name: None,
        turn: 1,
        prompt_ns: "ns".into(),
        prompt_key: "key".into(),
        created_at: t,
        message_id: MessageId(uuid(3)),
        provider_payload: Some(
            serde_json::json!({"role": "assistant", "content": "Looking it up.",
                "tool_calls": [{"id": "c1", "function": {"name": "ls", "arguments": "{\"path\":\"/tmp\"}"}}]})
            .to_string(),
        ),
    };
    let env = Envelope {
        session: SessionId(uuid(1)),
        seq: 17,
        at: t,
        event: Event::Message(message),
    };
    let frame = encode_frame(&env, 1 << 20).expect("encode");
    let hex: String = frame.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, CUT, "the encoding changed");
    assert_eq!(frame.windows(7).filter(|w| w == b"Looking").count(), 1);
    let back: Envelope = decode_frame(&frame, 1 << 20).expect("decode");
    assert_eq!(back, env);
}
