//! `diff`: what changed between two points of a session (`diff_sessions`
//! between two sessions).

use std::collections::HashSet;
use std::process::ExitCode;

use agent_journal::agent::{StateChange, diff_states};
use agent_journal::{Error, Event, InnerMessage, Session, ToolStatus};
use clap::Args;

use crate::cli::find::Pick;
use crate::cli::global::Global;
use crate::cli::open::{open_for_reading, read_session};
use crate::cli::output::print_json;
use crate::cli::render::{event_line, outcome};

/// The arguments of `diff`: `SESSION A B` (two seqs of one session) or
/// `SESSION OTHER` (two sessions); under `--last` the first SESSION is the
/// latest active one and is not given (`--last A B`, `--last OTHER`).
#[derive(Args, Debug)]
pub(crate) struct DiffArgs {
    /// SESSION A B: what changed between seqs A and B of SESSION (a full
    /// id, or a unique prefix or suffix of one). SESSION OTHER: two
    /// sessions, compared aligned by seq over the events both share from
    /// seq 0, then by message. Without SESSION under --last.
    #[arg(value_name = "ARGS", num_args = 1..=3, required = true)]
    args: Vec<String>,
    /// Instead of the first SESSION: the session with the latest activity
    /// (`diff --last A B` compares two of its seqs, `diff --last OTHER`
    /// compares it with OTHER, e.g. the run it was forked from).
    #[arg(long)]
    last: bool,
}

/// The usage of `diff`, its four forms.
pub(crate) const USAGE: &str = "agent-journal diff [OPTIONS] <SESSION> <A> <B>
       agent-journal diff [OPTIONS] <SESSION> <OTHER>
       agent-journal diff [OPTIONS] --last <A> <B>
       agent-journal diff [OPTIONS] --last <OTHER>";

/// A usage error of `diff` that clap cannot see (how many positionals
/// each form takes): one `error:` line on stderr, exit 2, as clap's
/// refused values are.
fn usage(line: &str) -> ExitCode {
    crate::cli::output::report_error(2, "usage", line);
    ExitCode::from(2)
}

/// `diff SESSION A B`, or `diff SESSION OTHER` across two sessions (with
/// `--last` in place of the first SESSION).
pub(crate) fn diff(cli: &Global, args: &DiffArgs) -> Result<ExitCode, Error> {
    let (first, rest): (Pick<'_>, &[String]) = match (args.last, args.args.as_slice()) {
        (true, rest @ [_] | rest @ [_, _]) => (Pick::Last, rest),
        (false, [first, rest @ ..]) if matches!(rest.len(), 1 | 2) => (Pick::Id(first), rest),
        (true, _) => {
            return Ok(usage(
                "diff --last takes A B (two seqs of the latest session) or OTHER (a session)",
            ));
        }
        (false, _) => {
            return Ok(usage(
                "diff takes SESSION A B (two seqs of SESSION) or SESSION OTHER (two sessions)",
            ));
        }
    };
    let session_like = |text: &str| {
        crate::cli::find::session_arg(text)
            .map_err(|why| usage(&format!("invalid session {text:?}: {why}")))
    };
    if let Pick::Id(text) = first {
        if let Err(code) = session_like(text) {
            return Ok(code);
        }
    }
    let journal = open_for_reading(&cli.db)?;
    let s = read_session(&journal, first)?;
    let [second, b] = rest else {
        // One value after SESSION: OTHER, a second session.
        let other = rest.first().map_or("", String::as_str);
        if let Err(code) = session_like(other) {
            return Ok(code);
        }
        let other = read_session(&journal, other)?;
        return crate::cli::diff_sessions::diff_sessions(cli.json, &s, &other);
    };
    let seq = |text: &String, name: &str| {
        text.parse::<u64>().map_err(|_| {
            Error::InvalidInput(format!(
                "diff SESSION A B wants {name} as a seq (got {text:?})"
            ))
        })
    };
    let (a, b) = (seq(second, "A")?, seq(b, "B")?);
    let d = compute(&s, a, b)?;
    if cli.json {
        print_json(&d.to_json())?;
    } else {
        d.print();
    }
    Ok(ExitCode::SUCCESS)
}

/// The difference between the states after events `a` and `b`.
struct Diff {
    a: u64,
    b: u64,
    events: Vec<String>,
    new_messages: Vec<InnerMessage>,
    status_changes: Vec<(String, String, Option<ToolStatus>, ToolStatus)>,
    evaluations: Vec<String>,
    tokens: (u64, u64),
    /// Per adapter type whose latest state changed: the changed fields
    /// (against no state at all for a first capture).
    adapter_states: Vec<(String, Vec<StateChange>)>,
}

/// Computes the diff; `a` must not be after `b`.
fn compute(s: &Session, a: u64, b: u64) -> Result<Diff, Error> {
    if a > b {
        return Err(Error::InvalidInput(format!(
            "diff needs A <= B (got {a} and {b})"
        )));
    }
    let before = s.state_at(a)?;
    let after = s.state_at(b)?;
    let mut events = Vec::new();
    let mut in_range = Vec::new();
    s.for_each_event(a + 1..=b, |e| {
        events.push(event_line(&e));
        if let Event::Message(m) = &e.event {
            in_range.push(m.message_id);
        }
        Ok(())
    })?;
    // Only the message events between A and B can bring new messages: look
    // at those, not at every message of the state (a million of them,
    // each decoded to be compared, in a long session).
    let mut seen = HashSet::new();
    let mut new_messages: Vec<InnerMessage> = in_range
        .into_iter()
        .filter(|id| seen.insert(*id) && before.messages().get(*id).is_none())
        .filter_map(|id| after.messages().get(id).cloned())
        .collect();
    // In the state's order: by evaluation, then sequence.
    new_messages.sort_by_key(|m| (m.evaluation_id, m.sequence, m.message_id));
    let mut status_changes = Vec::new();
    for c in after.tool_calls().iter() {
        let old = before
            .tool_calls()
            .get(c.evaluation_id, &c.call_id)
            .map(|o| o.status);
        if old != Some(c.status) {
            status_changes.push((c.call_id.to_string(), c.name.clone(), old, c.status));
        }
    }
    let mut evaluations = Vec::new();
    for e in after.evaluations().iter() {
        match before.evaluations().get(e.evaluation_id) {
            None => evaluations.push(format!("evaluation {} started", e.evaluation_id)),
            Some(old) if old.outcome != e.outcome => evaluations.push(format!(
                "evaluation {} finished: {}",
                e.evaluation_id,
                e.outcome.as_ref().map_or_else(|| "(none)".into(), outcome)
            )),
            _ => {}
        }
    }
    let mut adapter_states = Vec::new();
    let mut types: Vec<&str> = after
        .adapter_states()
        .iter()
        .map(|a| a.adapter_type.as_str())
        .collect();
    types.sort_unstable();
    types.dedup();
    for ty in types {
        let (old, new) = (
            before.adapter_states().latest(ty),
            after.adapter_states().latest(ty),
        );
        if let Some(new) = new
            && old.map(|o| o.snapshot_id) != Some(new.snapshot_id)
        {
            let empty = agent_journal::AdapterStateSnapshot {
                state: "{}".into(),
                ..new.clone()
            };
            adapter_states.push((ty.to_owned(), diff_states(old.unwrap_or(&empty), new)));
        }
    }
    let (u0, u1) = (&before.usage().total().usage, &after.usage().total().usage);
    Ok(Diff {
        a,
        b,
        events,
        new_messages,
        status_changes,
        evaluations,
        tokens: (
            u1.input_tokens.saturating_sub(u0.input_tokens),
            u1.output_tokens.saturating_sub(u0.output_tokens),
        ),
        adapter_states,
    })
}

impl Diff {
    /// Prints the diff for people.
    fn print(&self) {
        outln!(
            "from seq {} to seq {}: {} events",
            self.a,
            self.b,
            self.events.len()
        );
        for e in &self.events {
            outln!("  {e}");
        }
        if !self.new_messages.is_empty() {
            outln!("new messages:");
            for m in &self.new_messages {
                outln!(
                    "  + {} msg={} turn={} {:?}",
                    m.role,
                    m.sequence,
                    m.turn,
                    crate::cli::render::clip_exact(&m.content, 70)
                );
            }
        }
        if !self.status_changes.is_empty() {
            outln!("tool calls:");
            for (id, name, old, new) in &self.status_changes {
                let old = old.map(|o| o.as_str()).unwrap_or("(new)");
                outln!("  {id} {name}: {old} -> {new}");
            }
        }
        for e in &self.evaluations {
            outln!("{e}");
        }
        for (ty, changes) in &self.adapter_states {
            outln!("adapter state {ty}:");
            let show = |v: &Option<serde_json::Value>| {
                v.as_ref().map_or("(none)".into(), |v| v.to_string())
            };
            for c in changes {
                outln!("  {}: {} -> {}", c.field, show(&c.before), show(&c.after));
            }
        }
        if self.tokens != (0, 0) {
            outln!(
                "tokens: +{} input, +{} output",
                self.tokens.0,
                self.tokens.1
            );
        }
    }

    /// The diff as JSON.
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "from": self.a,
            "to": self.b,
            "events": self.events.len(),
            "new_messages": self.new_messages.iter().map(|m| serde_json::json!({
                "role": m.role.as_str(), "sequence": m.sequence, "turn": m.turn, "content": m.content,
                "message_id": m.message_id.to_string(),
            })).collect::<Vec<_>>(),
            "tool_calls": self.status_changes.iter().map(|(id, name, old, new)| serde_json::json!({
                "call_id": id, "name": name, "from": old.map(|o| o.as_str()), "to": new.as_str(),
            })).collect::<Vec<_>>(),
            "evaluations": self.evaluations,
            "tokens": {"input": self.tokens.0, "output": self.tokens.1},
            "adapter_states": self.adapter_states.iter().map(|(ty, changes)| serde_json::json!({
                "adapter_type": ty,
                "changes": changes.iter().map(|c| serde_json::json!({
                    "field": c.field, "from": c.before, "to": c.after,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        })
    }
}
