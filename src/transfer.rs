//! Conversations in and out: OpenAI, Anthropic and JSONL message lists.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::event::Event;
use crate::journal::Journal;
use crate::model::{EvaluationId, InnerMessage, SessionId};
use crate::provider::{anthropic, jsonl, openai};
use crate::session::Session;

/// A conversation format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConversationFormat {
    /// An OpenAI chat-completions `messages` array (or a request body holding one).
    OpenAi,
    /// An Anthropic Messages request body (`system` + `messages`).
    Anthropic,
    /// One `InnerMessage` JSON object per line.
    Jsonl,
}

fn parse_json(text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| {
        Error::InvalidInput(format!(
            "invalid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        ))
    })
}

impl Journal {
    /// Imports a conversation as a new session, in one atomic append:
    /// nothing is written unless the whole input is valid.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming what is wrong and where (invalid JSON,
    /// a tool result with no call, a call id used twice, a wrong role, ...).
    pub fn import_conversation(
        &self,
        text: &str,
        format: ConversationFormat,
        prompt_ns: &str,
        prompt_key: &str,
    ) -> Result<Session> {
        let evaluation_id = EvaluationId::new();
        let messages = match format {
            ConversationFormat::OpenAi => {
                openai::from_messages(&parse_json(text)?, evaluation_id, prompt_ns, prompt_key)?
            }
            ConversationFormat::Anthropic => {
                anthropic::from_request(&parse_json(text)?, evaluation_id, prompt_ns, prompt_key)?
            }
            ConversationFormat::Jsonl => jsonl::from_jsonl(text)?,
        };
        if messages.is_empty() {
            return Err(Error::InvalidInput(
                "the conversation has no messages".into(),
            ));
        }
        let label = match format {
            ConversationFormat::OpenAi => "openai",
            ConversationFormat::Anthropic => "anthropic",
            ConversationFormat::Jsonl => "jsonl",
        };
        let mut by_eval: BTreeMap<EvaluationId, Vec<InnerMessage>> = BTreeMap::new();
        for m in messages {
            by_eval.entry(m.evaluation_id).or_default().push(m);
        }
        let mut events = vec![Event::SessionOpened {
            labels: vec![("imported".into(), label.into())],
        }];
        for (evaluation_id, msgs) in by_eval {
            let first = &msgs[0];
            events.push(Event::EvaluationStarted {
                evaluation_id,
                prompt_ns: first.prompt_ns.clone(),
                prompt_key: first.prompt_key.clone(),
                adapter: label.into(),
            });
            events.extend(msgs.into_iter().map(Event::Message));
        }
        self.create_session_from(SessionId::new(), events)
    }
}

impl Session {
    /// The latest evaluation's conversation after event `at` (default: the
    /// last), in `format`. OpenAI and Anthropic histories are always valid
    /// for the provider: every tool call is followed by exactly one result.
    ///
    /// # Errors
    /// [`Error::ConversationNotFound`] without an evaluation;
    /// [`Error::SeqOutOfRange`] for `at` past the head.
    pub fn export_conversation(
        &self,
        format: ConversationFormat,
        at: Option<u64>,
    ) -> Result<String> {
        let state = match at {
            Some(seq) => self.state_at(seq)?,
            None => self.state_cloned(),
        };
        let eval = state
            .evaluations()
            .latest()
            .map(|e| e.evaluation_id)
            .ok_or(Error::ConversationNotFound(self.id()))?;
        let messages: Vec<InnerMessage> = state.messages().for_evaluation(eval).cloned().collect();
        let pretty = |v: &serde_json::Value| {
            serde_json::to_string_pretty(v).map_err(|e| Error::InvalidInput(e.to_string()))
        };
        match format {
            ConversationFormat::OpenAi => {
                pretty(&serde_json::Value::Array(openai::to_messages(&messages)))
            }
            ConversationFormat::Anthropic => pretty(&anthropic::to_request(&messages)),
            ConversationFormat::Jsonl => Ok(jsonl::to_jsonl(&messages)),
        }
    }
}
