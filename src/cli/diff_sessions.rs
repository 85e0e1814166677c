//! `diff A B` with two sessions: a crashed run and its resumed fork, a run
//! and a fork of it edited with `fork --replace-result`, two runs of one
//! prompt.
//!
//! Aligned by seq where they share a prefix (the longest run of identical
//! events from seq 0, times included: a fork reads its parent's events up
//! to its fork point, so it shares exactly those), and by message after it:
//! the messages recorded past the prefix are paired by evaluation (the
//! first evaluation of A with the first of B, and so on) and message
//! sequence (`msg=N` as the CLI prints it). Tool calls are paired the same
//! way, by evaluation and call id, and listed where their status or result
//! differs. Reading costs one pass over the shared prefix (in chunks) and
//! each session's state at its head.

use std::collections::BTreeMap;
use std::process::ExitCode;

use agent_journal::state::SessionState;
use agent_journal::{Error, InnerMessage, Session};
use serde_json::{Value, json};

use crate::cli::output::print_json;
use crate::cli::render::{clip_exact, outcome};

/// Events compared per read of the shared prefix.
const CHUNK: u64 = 512;

/// How many events from seq 0 the two sessions hold identically.
fn shared_prefix(a: &Session, b: &Session) -> Result<u64, Error> {
    let n = a.head().min(b.head());
    let mut start = 0;
    while start < n {
        let end = (start + CHUNK).min(n);
        let (ea, eb) = (a.events(start..end)?, b.events(start..end)?);
        for (k, (x, y)) in ea.iter().zip(eb.iter()).enumerate() {
            if x.event != y.event || x.at != y.at {
                return Ok(start + k as u64);
            }
        }
        if ea.len() != eb.len() {
            return Ok(start + ea.len().min(eb.len()) as u64);
        }
        start = end;
    }
    Ok(n)
}

/// A message's place for pairing: its evaluation's ordinal in the session,
/// its sequence.
type Key = (usize, u64);

/// The messages of `state` not in `prefix` (the state after the shared
/// events, if any), keyed for pairing.
fn tail_messages(
    state: &SessionState,
    prefix: Option<&SessionState>,
) -> BTreeMap<Key, InnerMessage> {
    let mut out = BTreeMap::new();
    for (k, e) in state.evaluations().iter().enumerate() {
        for m in state.messages().for_evaluation(e.evaluation_id) {
            if prefix.is_some_and(|p| p.messages().get(m.message_id).is_some()) {
                continue;
            }
            out.insert((k, m.sequence), m.clone());
        }
    }
    out
}

/// Every tool call of `state`, keyed by evaluation ordinal and call id:
/// `(name, status, result text)`.
fn calls(state: &SessionState) -> BTreeMap<(usize, String), (String, String, Option<String>)> {
    let ordinal: BTreeMap<_, _> = state
        .evaluations()
        .iter()
        .enumerate()
        .map(|(k, e)| (e.evaluation_id, k))
        .collect();
    state
        .tool_calls()
        .iter()
        .filter_map(|c| {
            let k = *ordinal.get(&c.evaluation_id)?;
            let result = c
                .result
                .and_then(|id| state.messages().get(id))
                .map(|m| m.content.clone());
            Some((
                (k, c.call_id.to_string()),
                (c.name.clone(), c.status.as_str().to_owned(), result),
            ))
        })
        .collect()
}

fn message_json(m: Option<&InnerMessage>) -> Value {
    m.map_or(Value::Null, |m| {
        json!({"role": m.role.as_str(), "content": m.content, "turn": m.turn,
               "message_id": m.message_id.to_string()})
    })
}

/// `diff A B` for sessions `a` and `b`: printed for people, or as JSON.
pub(crate) fn diff_sessions(json_out: bool, a: &Session, b: &Session) -> Result<ExitCode, Error> {
    if json_out {
        print_json(&compare(a, b)?)?;
    } else {
        print_text(a, b)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The comparison of `a` and `b` as `diff A B --json` prints it (the
/// keys docs/cli-json.md lists; `view A --compare B` shows it).
pub(crate) fn compare(a: &Session, b: &Session) -> Result<Value, Error> {
    Ok(run(a, b, true)?.unwrap_or(Value::Null))
}

fn print_text(a: &Session, b: &Session) -> Result<(), Error> {
    run(a, b, false).map(|_| ())
}

/// Computes the comparison; returns it as JSON when `json_out`, else
/// prints it for people.
fn run(a: &Session, b: &Session, json_out: bool) -> Result<Option<Value>, Error> {
    let shared = shared_prefix(a, b)?;
    let (sa, sb) = (a.state_cloned(), b.state_cloned());
    let prefix = match shared {
        0 => None,
        n => Some(a.state_at(n - 1)?),
    };
    let (ma, mb) = (
        tail_messages(&sa, prefix.as_ref()),
        tail_messages(&sb, prefix.as_ref()),
    );
    let mut keys: Vec<Key> = ma.keys().chain(mb.keys()).copied().collect();
    keys.sort_unstable();
    keys.dedup();
    let mut messages = Vec::new();
    for key in keys {
        let (x, y) = (ma.get(&key), mb.get(&key));
        let change = match (x, y) {
            (Some(x), Some(y)) if x.role == y.role && x.content == y.content => "same",
            (Some(_), Some(_)) => "changed",
            (Some(_), None) => "only_a",
            _ => "only_b",
        };
        messages.push((key, change, x, y));
    }
    let (ca, cb) = (calls(&sa), calls(&sb));
    let mut call_keys: Vec<_> = ca.keys().chain(cb.keys()).cloned().collect();
    call_keys.sort_unstable();
    call_keys.dedup();
    let tool_calls: Vec<_> = call_keys
        .into_iter()
        .filter_map(|k| {
            let (x, y) = (ca.get(&k), cb.get(&k));
            (x.map(|c| (&c.1, &c.2)) != y.map(|c| (&c.1, &c.2))).then_some((k, x, y))
        })
        .collect();
    let outcomes = |s: &SessionState| -> Vec<Value> {
        s.evaluations()
            .iter()
            .map(|e| {
                e.outcome
                    .as_ref()
                    .map_or(Value::Null, |o| outcome(o).into())
            })
            .collect()
    };
    let tokens = |s: &SessionState| {
        let u = &s.usage().total().usage;
        json!({"input": u.input_tokens, "output": u.output_tokens})
    };
    if json_out {
        let side = |x: Option<&(String, String, Option<String>)>| {
            x.map_or(Value::Null, |c| json!({"status": c.1, "result": c.2}))
        };
        return Ok(Some(json!({
            "a": a.id().to_string(),
            "b": b.id().to_string(),
            "shared_events": shared,
            "a_events": a.head(),
            "b_events": b.head(),
            "messages": messages.iter().map(|((e, seq), change, x, y)| json!({
                "evaluation": e, "sequence": seq, "change": change,
                "a": message_json(*x), "b": message_json(*y),
            })).collect::<Vec<_>>(),
            "tool_calls": tool_calls.iter().map(|((e, id), x, y)| json!({
                "evaluation": e, "call_id": id,
                "name": x.or(*y).map(|c| c.0.as_str()),
                "a": side(*x), "b": side(*y),
            })).collect::<Vec<_>>(),
            "outcomes": {"a": outcomes(&sa), "b": outcomes(&sb)},
            "tokens": {"a": tokens(&sa), "b": tokens(&sb)},
        })));
    }
    match shared {
        0 => outln!("A {} and B {} share no events", a.id(), b.id()),
        n => outln!(
            "A {} and B {} share seq 0..={} ({n} events)",
            a.id(),
            b.id(),
            n - 1
        ),
    }
    outln!(
        "after it: A {} events, B {} events",
        a.head() - shared,
        b.head() - shared
    );
    if !messages.is_empty() {
        outln!("messages after the shared events (by evaluation and msg):");
    }
    let show = |m: &InnerMessage| format!("{} {:?}", m.role, clip_exact(&m.content, 60));
    // A run of alike messages is one line.
    let mut alike: Option<(Key, Key, usize)> = None;
    let flush = |alike: &mut Option<(Key, Key, usize)>| {
        if let Some(((e, first), (_, last), n)) = alike.take() {
            match n {
                1 => outln!("  = eval#{e} msg={first} alike"),
                _ => outln!("  = eval#{e} msg={first}..={last} alike ({n} messages)"),
            }
        }
    };
    for ((e, seq), change, x, y) in &messages {
        if *change == "same" {
            alike = match alike {
                Some((first, _, n)) if first.0 == *e => Some((first, (*e, *seq), n + 1)),
                other => {
                    let mut other = other;
                    flush(&mut other);
                    Some(((*e, *seq), (*e, *seq), 1))
                }
            };
            continue;
        }
        flush(&mut alike);
        let at = format!("eval#{e} msg={seq}");
        match (change, x, y) {
            (_, Some(x), Some(y)) => {
                outln!("  ~ {at} A: {}", show(x));
                outln!("  ~ {at} B: {}", show(y));
            }
            (_, Some(x), None) => outln!("  - {at} only in A: {}", show(x)),
            (_, None, Some(y)) => outln!("  + {at} only in B: {}", show(y)),
            _ => {}
        }
    }
    flush(&mut alike);
    if !tool_calls.is_empty() {
        outln!("tool calls that differ:");
    }
    for ((e, id), x, y) in &tool_calls {
        let side = |c: Option<&(String, String, Option<String>)>| {
            c.map_or("(none)".to_owned(), |c| match &c.2 {
                Some(r) => format!("{} {:?}", c.1, clip_exact(r, 40)),
                None => c.1.clone(),
            })
        };
        let name = x.or(*y).map_or("", |c| c.0.as_str());
        outln!("  eval#{e} {id} {name}: A {} | B {}", side(*x), side(*y));
    }
    let words = |v: Vec<Value>| {
        v.iter()
            .map(|o| o.as_str().unwrap_or("unfinished").to_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    outln!(
        "outcome: A {} | B {}",
        words(outcomes(&sa)),
        words(outcomes(&sb))
    );
    let (ta, tb) = (tokens(&sa), tokens(&sb));
    outln!(
        "tokens: A {} in / {} out | B {} in / {} out",
        ta["input"],
        ta["output"],
        tb["input"],
        tb["output"]
    );
    Ok(None)
}
