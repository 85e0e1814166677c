//! Strategies for the conversation engine's events: every variant of
//! `ConversationEvent`, with arbitrary JSON in its free-form fields.
//! Used by the codec's properties (as part of `event()`) and by
//! `conversation_fold` (with small pools of ids, so that records are
//! replaced and messages repeated).

use agent_journal::Role;
use agent_journal::conversation::{
    CallOutcome, CompactionRecord, Conversation, ConversationEvent, ConversationMessage, Metadata,
    ProviderCallRecord, ProviderOperation, ToolSpec, TurnError, TurnId, TurnRecord, TurnStatus,
};
use agent_journal::{CallId, MessageId, SessionId, TokenUsage, ToolCallRecord};
use chrono::{DateTime, TimeZone, Utc};
use proptest::prelude::*;
use serde_json::{Number, Value};
use uuid::Uuid;

use super::{call_id, opt_text, text, timestamp, tool_status};

/// Where the ids and timestamps of generated records come from.
#[derive(Clone)]
pub struct Domain {
    pub session: BoxedStrategy<SessionId>,
    pub message: BoxedStrategy<MessageId>,
    pub turn: BoxedStrategy<TurnId>,
    pub call: BoxedStrategy<Uuid>,
    pub tool_call: BoxedStrategy<CallId>,
    pub at: BoxedStrategy<DateTime<Utc>>,
}

fn uuid_of(n: u8) -> Uuid {
    Uuid::from_bytes([n; 16])
}

impl Domain {
    /// Any ids, any timestamp in chrono's range.
    pub fn any() -> Self {
        let uuid = || any::<[u8; 16]>().prop_map(Uuid::from_bytes);
        Domain {
            session: uuid().prop_map(SessionId).boxed(),
            message: uuid().prop_map(MessageId).boxed(),
            turn: uuid().prop_map(TurnId).boxed(),
            call: uuid().boxed(),
            tool_call: call_id().boxed(),
            at: timestamp().boxed(),
        }
    }

    /// A few ids of each kind, so that records are replaced and messages
    /// repeated; timestamps that RFC 3339 can write (years 0 to 9999), for
    /// the JSON snapshot.
    pub fn few() -> Self {
        // Year 0 to year 9999, and the recent past.
        let at = prop_oneof![
            1 => -62_167_219_200_000_000i64..=253_402_300_799_999_999,
            3 => 1_600_000_000_000_000i64..1_900_000_000_000_000,
        ]
        .prop_map(|micros| {
            Utc.timestamp_micros(micros)
                .single()
                .expect("in chrono's range")
        });
        Domain {
            session: (1u8..3).prop_map(|n| SessionId(uuid_of(n))).boxed(),
            message: (10u8..16).prop_map(|n| MessageId(uuid_of(n))).boxed(),
            turn: (20u8..23).prop_map(|n| TurnId(uuid_of(n))).boxed(),
            call: (30u8..33).prop_map(uuid_of).boxed(),
            tool_call: (1u8..4).prop_map(|n| CallId(format!("call_{n}"))).boxed(),
            at: at.boxed(),
        }
    }
}

/// Any JSON value: null, booleans, integers (i64 and u64), finite floats,
/// strings, and arrays and objects of them, nested a few levels.
pub fn json() -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Every class of f64 (subnormals, huge, negative zero); NaN and the
        // infinities are not JSON numbers.
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        (-1e6f64..1e6).prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(text(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
    .boxed()
}

pub fn metadata() -> BoxedStrategy<Metadata> {
    prop::collection::btree_map(text(), json(), 0..3).boxed()
}

fn message_role() -> impl Strategy<Value = Role> {
    prop_oneof![
        Just(Role::System),
        Just(Role::User),
        Just(Role::Assistant),
        Just(Role::Tool),
        Just(Role::Other),
    ]
}

fn turn_status() -> impl Strategy<Value = TurnStatus> {
    prop_oneof![
        Just(TurnStatus::Pending),
        Just(TurnStatus::Running),
        Just(TurnStatus::Succeeded),
        Just(TurnStatus::Failed),
        Just(TurnStatus::Cancelled),
    ]
}

pub fn conversation(d: &Domain) -> BoxedStrategy<Conversation> {
    (
        d.session.clone(),
        text(),
        opt_text(),
        opt_text(),
        (d.at.clone(), d.at.clone()),
        metadata(),
    )
        .prop_map(
            |(id, agent, subject_id, title, (created_at, updated_at), metadata)| Conversation {
                id,
                agent,
                subject_id,
                title,
                created_at,
                updated_at,
                metadata,
            },
        )
        .boxed()
}

fn tool_calls(d: &Domain) -> BoxedStrategy<Vec<ToolCallRecord>> {
    let call = (d.tool_call.clone(), text(), text(), tool_status()).prop_map(
        |(call_id, name, arguments, status)| ToolCallRecord {
            call_id,
            name,
            arguments,
            status,
        },
    );
    prop::collection::vec(call, 0..3).boxed()
}

fn message(d: &Domain) -> BoxedStrategy<ConversationMessage> {
    (
        (d.message.clone(), d.session.clone(), message_role(), json()),
        (opt_text(), d.at.clone(), opt_text(), metadata()),
        prop::option::of(d.turn.clone()),
        tool_calls(d),
        prop::option::of(d.tool_call.clone()),
    )
        .prop_map(
            |(
                (id, conversation_id, role, content),
                (name, created_at, provider_message_id, metadata),
                turn_id,
                tool_calls,
                tool_call_id,
            )| ConversationMessage {
                id,
                conversation_id,
                role,
                content,
                name,
                created_at,
                provider_message_id,
                metadata,
                turn_id,
                tool_calls,
                tool_call_id,
            },
        )
        .boxed()
}

fn turn_error() -> BoxedStrategy<TurnError> {
    let raw = json();
    (text(), opt_text(), opt_text(), raw)
        .prop_map(|(message, code, provider, raw)| TurnError {
            message,
            code,
            provider,
            raw,
        })
        .boxed()
}

fn turn(d: &Domain) -> BoxedStrategy<TurnRecord> {
    let ids = || prop::collection::vec(d.message.clone(), 0..4);
    (
        (d.turn.clone(), text(), turn_status(), opt_text()),
        (ids(), ids()),
        (d.at.clone(), prop::option::of(d.at.clone())),
        prop::option::of(turn_error()),
        metadata(),
    )
        .prop_map(
            |(
                (id, agent, status, trigger_type),
                (input_messages, output_messages),
                (started_at, finished_at),
                error,
                metadata,
            )| TurnRecord {
                id,
                agent,
                status,
                trigger_type,
                input_messages,
                output_messages,
                started_at,
                finished_at,
                error,
                metadata,
            },
        )
        .boxed()
}

fn usage() -> BoxedStrategy<TokenUsage> {
    (
        any::<[u64; 4]>(),
        prop::option::of(any::<u64>()),
        metadata(),
    )
        .prop_map(|(u, total_tokens, breakdown)| TokenUsage {
            input_tokens: u[0],
            output_tokens: u[1],
            cache_read_tokens: u[2],
            cache_write_tokens: u[3],
            total_tokens,
            breakdown,
        })
        .boxed()
}

fn call_outcome() -> BoxedStrategy<CallOutcome> {
    (
        any::<bool>(),
        prop::option::of(any::<u16>()),
        opt_text(),
        opt_text(),
        any::<u32>(),
    )
        .prop_map(
            |(ok, status, error_category, error, attempts)| CallOutcome {
                ok,
                status,
                error_category,
                error,
                attempts,
            },
        )
        .boxed()
}

fn tool_spec() -> BoxedStrategy<ToolSpec> {
    (text(), text(), json())
        .prop_map(|(name, description, parameters)| ToolSpec {
            name,
            description,
            parameters,
        })
        .boxed()
}

fn provider_call(d: &Domain) -> BoxedStrategy<ProviderCallRecord> {
    let operation = prop_oneof![
        Just(ProviderOperation::Chat),
        Just(ProviderOperation::Embedding),
        Just(ProviderOperation::Other),
    ];
    (
        (
            d.call.clone(),
            d.session.clone(),
            d.turn.clone(),
            text(),
            text(),
        ),
        (operation, opt_text(), opt_text(), opt_text()),
        (metadata(), metadata(), metadata()),
        prop::collection::vec(tool_spec(), 0..3),
        prop::collection::vec(d.message.clone(), 0..4),
        (prop::option::of(usage()), prop::option::of(call_outcome())),
        (d.at.clone(), prop::option::of(d.at.clone())),
    )
        .prop_map(
            |(
                (id, conversation_id, turn_id, provider, model),
                (operation, request_id, correlation_id, parent_correlation_id),
                (request_metadata, response_metadata, parameters),
                tools,
                sent_messages,
                (usage, outcome),
                (started_at, finished_at),
            )| ProviderCallRecord {
                id,
                conversation_id,
                turn_id,
                provider,
                model,
                operation,
                request_id,
                correlation_id,
                parent_correlation_id,
                request_metadata,
                response_metadata,
                parameters,
                tools,
                sent_messages,
                usage,
                outcome,
                started_at,
                finished_at,
            },
        )
        .boxed()
}

fn compaction(d: &Domain) -> BoxedStrategy<CompactionRecord> {
    (
        (prop::option::of(d.turn.clone()), d.message.clone(), text()),
        (
            opt_text(),
            any::<u64>(),
            any::<u64>(),
            prop::option::of(any::<u64>()),
        ),
        d.at.clone(),
    )
        .prop_map(
            |((turn_id, first_kept, strategy), (summary, before, after, tokens), at)| {
                CompactionRecord {
                    turn_id,
                    first_kept,
                    strategy,
                    summary,
                    messages_before: before,
                    messages_after: after,
                    tokens_before: tokens,
                    at,
                }
            },
        )
        .boxed()
}

/// Every variant of `ConversationEvent`, its ids and timestamps from `d`.
pub fn conversation_event(d: &Domain) -> BoxedStrategy<ConversationEvent> {
    prop_oneof![
        conversation(d).prop_map(ConversationEvent::Created),
        conversation(d).prop_map(ConversationEvent::Updated),
        message(d).prop_map(ConversationEvent::Message),
        turn(d).prop_map(ConversationEvent::Turn),
        provider_call(d).prop_map(ConversationEvent::ProviderCall),
        compaction(d).prop_map(ConversationEvent::Compacted),
    ]
    .boxed()
}
