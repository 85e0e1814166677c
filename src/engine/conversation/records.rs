//! What both stores share: the events that record a change of a turn, and
//! the turn rebuilt from a folded state. The in-memory store folds these
//! events without writing them; the journal store appends them. And the
//! window of history both return ([`HistoryWindow::of`]).

use crate::event::Event;
use crate::event::conversation::{
    Conversation, ConversationEvent, ConversationId, ConversationMessage, ProviderCallRecord,
    TurnRecord,
};
use crate::model::{ToolCallRecord, ToolStatus};
use crate::state::{ConversationLog, SessionState};

use super::order::send_order;
use super::store::{ConversationTurn, HistoryWindow};

/// The events that bring `state` to `turn`: output messages not yet
/// stored, then changed tool statuses, changed provider calls, and the
/// header if it changed. Empty when nothing changed.
pub(crate) fn turn_events(
    state: &SessionState,
    id: ConversationId,
    turn: &ConversationTurn,
) -> Vec<Event> {
    let log = state.conversation_log();
    let eval = turn.id.as_evaluation();
    let mut events = Vec::new();
    for m in &turn.output_messages {
        if log.message(m.id).is_none() {
            let mut m = m.clone();
            m.conversation_id = id;
            m.turn_id = Some(turn.id);
            events.push(Event::Conversation(Box::new(ConversationEvent::Message(m))));
        }
    }
    for call in &turn.tool_calls {
        let known = state
            .tool_calls()
            .get(eval, &call.call_id)
            .map(|c| c.status);
        if known.is_none_or(|s| call.status.rank() > s.rank()) && call.status != ToolStatus::Pending
        {
            // A failure's reason is its result message's text.
            let error = (call.status == ToolStatus::Failed)
                .then(|| {
                    turn.output_messages
                        .iter()
                        .find(|m| m.tool_call_id.as_ref() == Some(&call.call_id))
                        .map(ConversationMessage::text)
                })
                .flatten();
            events.push(Event::ToolStatus {
                evaluation_id: eval,
                call_id: call.call_id.clone(),
                status: call.status,
                error,
            });
        }
    }
    for c in &turn.provider_calls {
        if log.call(c.id) != Some(c) {
            let mut c = c.clone();
            c.conversation_id = id;
            c.turn_id = turn.id;
            events.push(Event::Conversation(Box::new(
                ConversationEvent::ProviderCall(c),
            )));
        }
    }
    let record = turn.record();
    if log.turn(turn.id) != Some(&record) {
        events.push(Event::Conversation(Box::new(ConversationEvent::Turn(
            record,
        ))));
    }
    events
}

/// The events that append `messages` to conversation `id` (skipping ids
/// already stored, or repeated in `messages`).
pub(crate) fn message_events(
    state: &SessionState,
    id: ConversationId,
    messages: &[ConversationMessage],
) -> Vec<Event> {
    let log = state.conversation_log();
    let mut seen = std::collections::BTreeSet::new();
    messages
        .iter()
        .filter(|m| log.message(m.id).is_none() && seen.insert(m.id))
        .map(|m| {
            let mut m = m.clone();
            m.conversation_id = id;
            Event::Conversation(Box::new(ConversationEvent::Message(m)))
        })
        .collect()
}

/// The messages of `page`, by `created_at` (the spec's default order;
/// ties, and equal clocks, keep append order), as messages of
/// conversation `id`. O(n) when they were appended in time order.
pub(crate) fn by_created(
    messages: &[ConversationMessage],
    page: super::store::Page,
    id: ConversationId,
) -> Vec<ConversationMessage> {
    let mut sorted: Vec<&ConversationMessage> = messages.iter().collect();
    sorted.sort_by_key(|m| m.created_at);
    owned(page.select(&sorted).into_iter().cloned().collect(), id)
}

/// `messages` as messages of conversation `id`: a fork holds copies of
/// its parent's messages, which name the parent.
pub(crate) fn owned(
    mut messages: Vec<ConversationMessage>,
    id: ConversationId,
) -> Vec<ConversationMessage> {
    for m in &mut messages {
        m.conversation_id = id;
    }
    messages
}

/// The conversation's fields, with the id of the session that holds them.
pub(crate) fn conversation_of(state: &SessionState, id: ConversationId) -> Option<Conversation> {
    let mut c = state.conversation_log().info()?.clone();
    c.id = id;
    Some(c)
}

/// The turn `record` of conversation `id`, with its messages, calls and
/// the status of each tool call.
pub(crate) fn turn_of(
    state: &SessionState,
    id: ConversationId,
    record: &TurnRecord,
) -> ConversationTurn {
    let log = state.conversation_log();
    let messages = |ids: &[crate::model::MessageId]| {
        let found = ids.iter().filter_map(|m| log.message(*m).cloned());
        owned(found.collect(), id)
    };
    let tool_calls = state
        .tool_calls()
        .for_evaluation(record.id.as_evaluation())
        .map(|c| ToolCallRecord {
            call_id: c.call_id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
            status: c.status,
        })
        .collect();
    ConversationTurn {
        id: record.id,
        conversation_id: id,
        agent: record.agent.clone(),
        input_messages: messages(&record.input_messages),
        output_messages: messages(&record.output_messages),
        provider_calls: log
            .calls_of(record.id)
            .map(|c| ProviderCallRecord {
                conversation_id: id,
                ..c.clone()
            })
            .collect(),
        tool_calls,
        status: record.status,
        trigger_type: record.trigger_type.clone(),
        started_at: record.started_at,
        finished_at: record.finished_at,
        error: record.error.clone(),
        metadata: record.metadata.clone(),
    }
}

impl HistoryWindow {
    /// The window of `log`, its messages as messages of `id`.
    pub(crate) fn of(log: &ConversationLog, id: ConversationId, window: Option<usize>) -> Self {
        let sendable = log.sendable();
        let skip = window.map_or(0, |n| sendable.len().saturating_sub(n));
        let mut messages = owned(sendable[skip..].to_vec(), id);
        send_order(log, &mut messages);
        Self {
            system: owned(log.leading_system().to_vec(), id),
            summary: log.summary().map(str::to_owned),
            messages,
            sendable: sendable.len(),
        }
    }
}
