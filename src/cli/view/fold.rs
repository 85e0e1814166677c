//! The statuses the timeline shows, as the library's fold says them: the
//! session's events are applied one by one to a [`SessionState`] (the
//! reducer every reader of the journal uses), and after each event the
//! status of what it touched (a tool call, an evaluation, a turn, a
//! conversation's provider call) is read back from that state. The page
//! gets the list of changes and looks a status up at any seq; it never
//! ranks statuses itself, so it cannot disagree with `state` or `resume`.
//!
//! It also finds the crash points: the end of an unfinished session, and
//! each seq a later `resume` says it resumed from (its marker), with the
//! calls in doubt there (started, no result: what `resume` would have to
//! settle), the calls never started and the turns left running.

use std::collections::{BTreeMap, HashMap};

use agent_journal::conversation::{ConversationEvent, TurnStatus};
use agent_journal::state::SessionState;
use agent_journal::{CallId, Error, EvaluationId, Event, Outcome, Session, ToolStatus};
use serde_json::{Value, json};

use crate::cli::resumed;

/// The key of a tool call on the page: `EVALUATION/CALL` (a conversation
/// turn's id stands for its evaluation, as in the library's fold).
fn call_key(eval: EvaluationId, call: &CallId) -> String {
    format!("{eval}/{}", call.as_str())
}

/// The fold's word for an evaluation: `running` until it finishes.
fn outcome_word(o: Option<&Outcome>) -> &'static str {
    match o {
        None => "running",
        Some(Outcome::Succeeded) => "succeeded",
        Some(Outcome::Failed { .. }) => "failed",
        Some(Outcome::Cancelled) => "cancelled",
    }
}

/// One status as the fold has it after an event.
#[derive(Clone, PartialEq)]
struct Status {
    word: &'static str,
    error: Option<String>,
    /// For a tool call: a result message is recorded.
    result: bool,
}

/// What [`fold`] hands the page.
pub(crate) struct Folded {
    /// `{"changes": [[seq, kind, key, status, error, result]...],
    /// "crashes": [{seq, in_doubt: [key], pending, running_turns, resumed_at}]}`.
    pub(crate) json: Value,
}

/// Folds `s` event by event (memory: one state and one entry per change).
///
/// # Errors
/// A read of the session's events.
pub(crate) fn fold(s: &Session, unfinished: bool) -> Result<Folded, Error> {
    let mut state = SessionState::new();
    let mut last: HashMap<(&'static str, String), Status> = HashMap::new();
    let mut changes: Vec<(u64, &'static str, String, Status)> = Vec::new();
    // seq of a resume marker -> the crash point it names.
    let mut markers: BTreeMap<u64, u64> = BTreeMap::new();
    s.for_each_event(0..s.head(), |e| {
        state.apply(&e);
        let mut touched: Vec<(&'static str, String, Status)> = Vec::new();
        let call = |eval: EvaluationId, id: &CallId, touched: &mut Vec<_>| {
            if let Some(c) = state.tool_calls().get(eval, id) {
                touched.push((
                    "call",
                    call_key(eval, id),
                    Status {
                        word: c.status.as_str(),
                        error: c.error.clone(),
                        result: c.result.is_some(),
                    },
                ));
            }
        };
        let eval = |id: EvaluationId, touched: &mut Vec<_>| {
            if let Some(info) = state.evaluations().get(id) {
                let error = match &info.outcome {
                    Some(Outcome::Failed { error }) => Some(error.clone()),
                    _ => None,
                };
                touched.push((
                    "evaluation",
                    id.to_string(),
                    Status {
                        word: outcome_word(info.outcome.as_ref()),
                        error,
                        result: false,
                    },
                ));
            }
        };
        match &e.event {
            Event::EvaluationStarted { evaluation_id, .. }
            | Event::EvaluationFinished { evaluation_id, .. } => eval(*evaluation_id, &mut touched),
            Event::Message(m) => {
                eval(m.evaluation_id, &mut touched);
                for c in &m.tool_calls {
                    call(m.evaluation_id, &c.call_id, &mut touched);
                }
                if let Some(id) = &m.tool_call_id {
                    call(m.evaluation_id, id, &mut touched);
                }
            }
            Event::ToolStatus {
                evaluation_id,
                call_id,
                ..
            } => call(*evaluation_id, call_id, &mut touched),
            Event::Custom { kind, payload } if kind == resumed::RESUMED => {
                if let Some(at) = serde_json::from_slice::<Value>(payload)
                    .ok()
                    .and_then(|v| v["crash_point"].as_u64())
                {
                    markers.insert(e.seq, at);
                }
            }
            Event::Conversation(c) => match &**c {
                ConversationEvent::Message(m) => {
                    if let Some(turn) = m.turn_id {
                        for c in &m.tool_calls {
                            call(turn.as_evaluation(), &c.call_id, &mut touched);
                        }
                        if let Some(id) = &m.tool_call_id {
                            call(turn.as_evaluation(), id, &mut touched);
                        }
                    }
                }
                ConversationEvent::Turn(t) => {
                    if let Some(r) = state.conversation_log().turn(t.id) {
                        touched.push((
                            "turn",
                            t.id.to_string(),
                            Status {
                                word: r.status.as_str(),
                                error: r.error.as_ref().map(|e| e.message.clone()),
                                result: false,
                            },
                        ));
                    }
                }
                ConversationEvent::ProviderCall(p) => {
                    if let Some(r) = state.conversation_log().call(p.id) {
                        let (word, error) = match &r.outcome {
                            None => ("running", None),
                            Some(o) if o.ok => ("ok", None),
                            Some(o) => ("failed", o.error.clone()),
                        };
                        touched.push((
                            "provider_call",
                            p.id.to_string(),
                            Status {
                                word,
                                error,
                                result: false,
                            },
                        ));
                    }
                }
                _ => {}
            },
            _ => {}
        }
        for (kind, key, st) in touched {
            let k = (kind, key);
            if last.get(&k) != Some(&st) {
                changes.push((e.seq, k.0, k.1.clone(), st.clone()));
                last.insert(k, st);
            }
        }
        Ok(())
    })?;
    let mut crashes = Vec::new();
    for (&marker, &at) in &markers {
        crashes.push(crash_at(&changes, at, Some(marker)));
    }
    if unfinished && s.head() > 0 {
        crashes.push(crash_at(&changes, s.head() - 1, None));
    }
    let changes: Vec<Value> = changes
        .into_iter()
        .map(|(seq, kind, key, st)| json!([seq, kind, key, st.word, st.error, st.result]))
        .collect();
    Ok(Folded {
        json: json!({"changes": changes, "crashes": crashes}),
    })
}

/// What was open at the crash point `at`, from the fold's statuses there:
/// the calls in doubt (started, no result, as `resume` counts them), the
/// calls never started, the turns left pending or running. Only the calls
/// of an evaluation or turn still open there count: one that finished
/// leaves nothing for `resume` to do.
fn crash_at(
    changes: &[(u64, &'static str, String, Status)],
    at: u64,
    marker: Option<u64>,
) -> Value {
    let mut now: BTreeMap<(&str, &str), &Status> = BTreeMap::new();
    for (seq, kind, key, st) in changes {
        if *seq > at {
            break;
        }
        now.insert((kind, key), st);
    }
    // The evaluation (or turn, whose id stands for one) of a call is open.
    let open = |key: &str| {
        let owner = key.split_once('/').map_or(key, |(owner, _)| owner);
        match (now.get(&("evaluation", owner)), now.get(&("turn", owner))) {
            (Some(e), _) => e.word == outcome_word(None),
            (None, Some(t)) => ![
                TurnStatus::Succeeded,
                TurnStatus::Failed,
                TurnStatus::Cancelled,
            ]
            .iter()
            .any(|f| f.as_str() == t.word),
            (None, None) => true,
        }
    };
    let started = ToolStatus::Started.as_str();
    let pending = ToolStatus::Pending.as_str();
    let mut in_doubt = Vec::new();
    let (mut never_started, mut running_turns) = (0u64, 0u64);
    for ((kind, key), st) in &now {
        match *kind {
            "call" if st.word == started && !st.result && open(key) => in_doubt.push(*key),
            "call" if st.word == pending && !st.result && open(key) => never_started += 1,
            "turn"
                if st.word == TurnStatus::Running.as_str()
                    || st.word == TurnStatus::Pending.as_str() =>
            {
                running_turns += 1;
            }
            _ => {}
        }
    }
    json!({"seq": at, "in_doubt": in_doubt, "pending": never_started,
           "running_turns": running_turns, "resumed_at": marker})
}
