//! The resume rule (see [the module
//! docs](super#the-resume-rule-every-rebuilt-history-is-valid)): a message
//! list rearranged into a valid history ([`plan`]), every tool call
//! followed by exactly one result.

use std::collections::HashSet;

use serde_json::Value;

use crate::model::{InnerMessage, Role, ToolCallRecord};

/// A message list rearranged into a valid history (see the module docs).
pub(crate) struct Plan<'a> {
    /// System and user messages before the first assistant message.
    pub head: Vec<&'a InnerMessage>,
    /// Each assistant message with its results and what follows it.
    pub turns: Vec<Turn<'a>>,
}

/// One assistant message, its results, and the system and user messages
/// until the next assistant message.
pub(crate) struct Turn<'a> {
    pub msg: &'a InnerMessage,
    /// Its tool calls, without ids already used by an earlier call.
    pub calls: Vec<&'a ToolCallRecord>,
    /// True when no call was dropped from `calls`.
    pub complete: bool,
    /// Exactly one result per call, the recorded ones first.
    pub results: Vec<Res<'a>>,
    /// System and user messages after it, in order.
    pub after: Vec<&'a InnerMessage>,
}

/// A tool result of a rebuilt history.
pub(crate) enum Res<'a> {
    /// A recorded result.
    Real {
        msg: &'a InnerMessage,
        call: &'a ToolCallRecord,
    },
    /// The call has no result: [`INTERRUPTED_RESULT`](crate::model::INTERRUPTED_RESULT).
    Synthetic(&'a ToolCallRecord),
}

impl Res<'_> {
    pub fn call(&self) -> &ToolCallRecord {
        match self {
            Res::Real { call, .. } | Res::Synthetic(call) => call,
        }
    }
}

impl Turn<'_> {
    fn close(&mut self) {
        let missing: Vec<_> = self
            .calls
            .iter()
            .filter(|c| !self.results.iter().any(|r| r.call().call_id == c.call_id))
            .copied()
            .collect();
        self.results.extend(missing.into_iter().map(Res::Synthetic));
    }
}

/// Arranges messages into a valid history: see the module docs.
/// A message list rebuilt from [`plan`]: the leading messages, then each
/// turn's assistant message, its results and what follows it, each made by
/// the given function (the formats whose messages map one to one).
pub(crate) fn render_plan(
    messages: &[InnerMessage],
    plain: impl Fn(&InnerMessage) -> Value,
    assistant: impl Fn(&Turn<'_>) -> Value,
    result: impl Fn(&Res<'_>) -> Value,
) -> Vec<Value> {
    let plan = plan(messages);
    let mut out = Vec::with_capacity(messages.len());
    out.extend(plan.head.iter().map(|m| plain(m)));
    for t in &plan.turns {
        out.push(assistant(t));
        out.extend(t.results.iter().map(&result));
        out.extend(t.after.iter().map(|m| plain(m)));
    }
    out
}

pub(crate) fn plan(messages: &[InnerMessage]) -> Plan<'_> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut plan = Plan {
        head: Vec::new(),
        turns: Vec::new(),
    };
    for m in messages {
        match m.role {
            Role::System | Role::User | Role::Other => match plan.turns.last_mut() {
                Some(t) => t.after.push(m),
                None => plan.head.push(m),
            },
            Role::Assistant => {
                if let Some(t) = plan.turns.last_mut() {
                    t.close();
                }
                let calls: Vec<_> = m
                    .tool_calls
                    .iter()
                    .filter(|c| seen.insert(c.call_id.as_str()))
                    .collect();
                plan.turns.push(Turn {
                    msg: m,
                    complete: calls.len() == m.tool_calls.len(),
                    calls,
                    results: Vec::new(),
                    after: Vec::new(),
                });
            }
            Role::Tool => {
                let (Some(t), Some(id)) = (plan.turns.last_mut(), m.tool_call_id.as_ref()) else {
                    continue; // an orphan: no call before it
                };
                let Some(call) = t.calls.iter().find(|c| c.call_id == *id).copied() else {
                    continue; // not a call of the preceding assistant message
                };
                if t.results.iter().any(|r| r.call().call_id == *id) {
                    continue; // a second result
                }
                t.results.push(Res::Real { msg: m, call });
            }
        }
    }
    if let Some(t) = plan.turns.last_mut() {
        t.close();
    }
    plan
}
