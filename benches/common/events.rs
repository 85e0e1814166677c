//! Realistic events: what an agent run appends.

use std::collections::VecDeque;

use agent_journal::format::now;
use agent_journal::{
    CallId, Envelope, EvaluationId, Event, InnerMessage, MessageId, Outcome, Role, SessionId,
    ToolCallRecord, ToolStatus,
};

/// Exactly 200 bytes of ASCII text: the content of every benchmark message.
pub fn content_200() -> String {
    let base = "The refund policy for annual plans allows a full refund within 30 days of \
                purchase; after that, a prorated refund is issued for the unused months, \
                minus any discounts applied at checkout. Contact support to start it.";
    let mut s: String = base.chars().cycle().take(200).collect();
    s.truncate(200);
    assert_eq!(s.len(), 200);
    s
}

/// One assistant message with a 200-byte content, filled as the `Evaluation`
/// recorder fills it (prompt namespace and key, turn).
pub fn message_200(eval: EvaluationId) -> InnerMessage {
    let mut m = InnerMessage::new(Role::Assistant, content_200(), eval, 0);
    m.prompt_ns = "support".into();
    m.prompt_key = "triage".into();
    m.turn = 1;
    m
}

/// `n` clones of `template`, each with a fresh `message_id` and the next
/// `sequence` (what a recorder writes: messages are deduplicated by id, so
/// clones with one id would fold to a single message).
pub fn cloned_messages(template: &InnerMessage, first_sequence: u64, n: u64) -> Vec<Event> {
    (0..n)
        .map(|i| {
            let mut m = template.clone();
            m.message_id = MessageId::new();
            m.sequence = first_sequence + i;
            Event::Message(m)
        })
        .collect()
}

/// The frame of `event` as it is stored at `seq` of `session`.
pub fn frame_of(session: SessionId, seq: u64, event: Event) -> Vec<u8> {
    let env = Envelope {
        session,
        seq,
        at: now(),
        event,
    };
    agent_journal::format::encode_frame(&env, agent_journal::format::DEFAULT_MAX_EVENT_BYTES)
        .expect("encode")
}

/// An endless agent workload: evaluations of about `per_eval` events each,
/// opened by `EvaluationStarted`, a system and a user message, then blocks
/// of 8 events: user, assistant, user, assistant, assistant with one tool
/// call, `ToolStatus` Started, `ToolStatus` Completed, the tool's message
/// (6 messages with 200-byte contents and 2 status changes), and closed by
/// `EvaluationFinished`.
pub struct AgentRun {
    per_eval: u64,
    eval: EvaluationId,
    in_eval: u64,
    sequence: u64,
    turn: u32,
    calls: u64,
    content: String,
    queue: VecDeque<Event>,
}

impl AgentRun {
    pub fn new(per_eval: u64) -> Self {
        Self {
            per_eval,
            eval: EvaluationId::new(),
            in_eval: 0,
            sequence: 0,
            turn: 0,
            calls: 0,
            content: content_200(),
            queue: VecDeque::new(),
        }
    }

    /// The next `n` events.
    pub fn take_vec(&mut self, n: u64) -> Vec<Event> {
        (0..n).map(|_| self.next_event()).collect()
    }

    fn message(&mut self, role: Role, new_turn: bool) -> InnerMessage {
        if new_turn {
            self.turn += 1;
        }
        let mut m = InnerMessage::new(role, self.content.clone(), self.eval, self.sequence);
        self.sequence += 1;
        m.turn = self.turn;
        m.prompt_ns = "support".into();
        m.prompt_key = "triage".into();
        m
    }

    fn refill(&mut self) {
        if self.in_eval == 0 {
            self.queue.push_back(Event::EvaluationStarted {
                evaluation_id: self.eval,
                prompt_ns: "support".into(),
                prompt_key: "triage".into(),
                adapter: "openai".into(),
            });
            let system = self.message(Role::System, false);
            let user = self.message(Role::User, false);
            self.queue.push_back(Event::Message(system));
            self.queue.push_back(Event::Message(user));
            return;
        }
        if self.in_eval >= self.per_eval {
            self.queue.push_back(Event::EvaluationFinished {
                evaluation_id: self.eval,
                outcome: Outcome::Succeeded,
            });
            self.eval = EvaluationId::new();
            self.in_eval = 0;
            self.sequence = 0;
            self.turn = 0;
            return;
        }
        for (role, new_turn) in [
            (Role::User, false),
            (Role::Assistant, true),
            (Role::User, false),
            (Role::Assistant, true),
        ] {
            let m = self.message(role, new_turn);
            self.queue.push_back(Event::Message(m));
        }
        self.calls += 1;
        let call_id = CallId(format!("call_{:08}", self.calls));
        let mut asking = self.message(Role::Assistant, true);
        asking.tool_calls.push(ToolCallRecord::new(
            call_id.clone(),
            "search_docs",
            r#"{"query":"refund policy for annual plans","limit":5}"#,
        ));
        self.queue.push_back(Event::Message(asking));
        for status in [ToolStatus::Started, ToolStatus::Completed] {
            self.queue.push_back(Event::ToolStatus {
                evaluation_id: self.eval,
                call_id: call_id.clone(),
                status,
                error: None,
            });
        }
        let mut result = self.message(Role::Tool, false);
        result.tool_call_id = Some(call_id);
        result.tool_name = Some("search_docs".into());
        self.queue.push_back(Event::Message(result));
    }

    pub fn next_event(&mut self) -> Event {
        loop {
            if let Some(e) = self.queue.pop_front() {
                if !matches!(e, Event::EvaluationFinished { .. }) {
                    self.in_eval += 1;
                }
                return e;
            }
            self.refill();
        }
    }
}
