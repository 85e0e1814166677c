//! Application slices: your own state, folded from the session's events next
//! to the built-in slices, kept current on every append, carried in
//! snapshots and rebuilt on reopen.
//!
//! Run it with:
//!
//! ```text
//! cargo run --example custom_slice [-- --db PATH]
//! ```
//!
//! It records into `--db PATH`, else `./agent-journal.db` (the CLI's
//! default), and prints at the end the `agent-journal log` command that
//! shows what it recorded (the CLI does not know the slices; it shows the
//! `Custom` events as they are).
//!
//! Two slices are registered through `JournalConfig::slices`:
//! - `ToolUsage` folds built-in events (assistant messages and tool statuses)
//!   into the completed calls per tool;
//! - `FeedbackLog` folds the application's own `Event::Custom` events (user
//!   ratings, JSON payloads) and is a `Log` slice: a `SessionState::restore`
//!   keeps it instead of rolling it back.
//!
//! A reducer (`Slice::apply`) must be deterministic (no clock, I/O or
//! randomness) and must tolerate duplicate events; use ordered containers.
//! Register the slices at every open to read them. The events stay in the
//! journal either way: a slice registered later is folded from the whole
//! stream (a snapshot that lacks it is not used).

mod common;

use std::collections::{BTreeMap, BTreeSet};

use agent_journal::state::{SessionState, Slice, SlicePolicy, SliceRegistry};
use agent_journal::{
    CheckpointStrategy, Envelope, Event, Journal, JournalConfig, Outcome, ToolCallRecord,
    ToolStatus,
};
use serde::{Deserialize, Serialize};

/// Completed tool calls per tool, from built-in events.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct ToolUsage {
    /// "evaluation/call id" -> tool name, from the assistant messages.
    names: BTreeMap<String, String>,
    /// Tool name -> its completed calls (a set: a duplicate event counts once).
    completed: BTreeMap<String, BTreeSet<String>>,
}

impl Slice for ToolUsage {
    const NAME: &'static str = "example:ToolUsage";

    fn apply(&mut self, envelope: &Envelope) {
        match &envelope.event {
            Event::Message(m) => {
                for call in &m.tool_calls {
                    let key = format!("{}/{}", m.evaluation_id, call.call_id);
                    self.names.insert(key, call.name.clone());
                }
            }
            Event::ToolStatus {
                evaluation_id,
                call_id,
                status: ToolStatus::Completed,
                ..
            } => {
                let key = format!("{evaluation_id}/{call_id}");
                if let Some(name) = self.names.get(&key) {
                    self.completed.entry(name.clone()).or_default().insert(key);
                }
            }
            _ => {}
        }
    }
}

/// The payload of the application's `Custom` events of kind [`FEEDBACK`].
#[derive(Serialize, Deserialize)]
struct Feedback {
    rating: u8,
    comment: String,
}

const FEEDBACK: &str = "example.feedback";

/// Every rating given, with the seq of its event.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct FeedbackLog {
    ratings: Vec<(u64, u8, String)>,
    /// Events of our kind whose payload did not parse (a reducer cannot fail).
    unreadable: u64,
}

impl Slice for FeedbackLog {
    const NAME: &'static str = "example:FeedbackLog";
    const POLICY: SlicePolicy = SlicePolicy::Log;

    fn apply(&mut self, envelope: &Envelope) {
        let Event::Custom { kind, payload } = &envelope.event else {
            return;
        };
        if kind != FEEDBACK {
            return;
        }
        match serde_json::from_slice::<Feedback>(payload) {
            Ok(f) => self.ratings.push((envelope.seq, f.rating, f.comment)),
            Err(_) => self.unreadable += 1,
        }
    }
}

impl FeedbackLog {
    fn average(&self) -> f64 {
        let sum: u32 = self.ratings.iter().map(|r| u32::from(r.1)).sum();
        f64::from(sum) / self.ratings.len().max(1) as f64
    }
}

/// The same configuration for every open: the slices must be registered.
fn config() -> JournalConfig {
    let mut slices = SliceRegistry::new();
    slices.register::<ToolUsage>().register::<FeedbackLog>();
    JournalConfig {
        slices,
        // Snapshots only when asked, to show one below. The default
        // (geometric spacing) takes them by itself.
        checkpoint: CheckpointStrategy::OnDemand,
        ..JournalConfig::default()
    }
}

fn feedback(rating: u8, comment: &str) -> Result<Event, serde_json::Error> {
    let payload = serde_json::to_vec(&Feedback {
        rating,
        comment: comment.into(),
    })?;
    Ok(Event::Custom {
        kind: FEEDBACK.into(),
        payload,
    })
}

/// Both application slices of a state (absent if not registered).
fn slices(state: &SessionState) -> Result<(&ToolUsage, &FeedbackLog), &'static str> {
    match (state.slice::<ToolUsage>(), state.slice::<FeedbackLog>()) {
        (Some(usage), Some(log)) => Ok((usage, log)),
        _ => Err("the slices are not registered"),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = common::db_path("custom_slice")?;

    let (session_id, before, snapshot_seq) = {
        let journal = Journal::open_with(&path, config())?;
        let session = journal.create_session()?;
        let eval = session.start_evaluation("docs", "answer")?;
        eval.system("You answer questions about the docs.")?;
        eval.user("How do I resume a crashed run?")?;
        let calls = vec![
            ToolCallRecord::new("call_1", "search_docs", r#"{"q":"resume"}"#),
            ToolCallRecord::new("call_2", "search_docs", r#"{"q":"crash"}"#),
            ToolCallRecord::new("call_3", "read_page", r#"{"page":"resume.md"}"#),
        ];
        eval.assistant("Searching the docs.", calls)?;
        for id in ["call_1", "call_2", "call_3"] {
            eval.tool_started(id)?;
            eval.tool_result(id, "(search results)")?;
        }
        eval.assistant("Reopen the journal and call resume.", vec![])?;
        eval.finish(Outcome::Succeeded)?;
        session.append(feedback(5, "clear answer")?)?;
        session.append(feedback(3, "a bit short")?)?;
        // A snapshot caches the whole state, application slices included.
        let snapshot_seq = session.snapshot()?.ok_or("no snapshot was written")?;
        // One more event after the snapshot: a reopen replays it on top.
        session.append(feedback(4, "helpful after all")?)?;
        (session.id(), session.state_cloned(), snapshot_seq)
    }; // The journal is closed.

    // The slices were folded as the events were appended.
    let (usage, log) = slices(&before)?;
    for (tool, done) in &usage.completed {
        println!("{tool}: {} completed call(s)", done.len());
    }
    let ratings: Vec<u8> = log.ratings.iter().map(|r| r.1).collect();
    println!("ratings: {ratings:?}, average {:.1}", log.average());
    assert_eq!(usage.completed["search_docs"].len(), 2);
    assert_eq!(usage.completed["read_page"].len(), 1);
    assert_eq!(log.ratings.len(), 3);

    // Reopen with the same slices: the state comes from the snapshot plus
    // the one event after it, and equals the state before closing.
    let journal = Journal::open_with(&path, config())?;
    let session = journal.session(session_id)?;
    let stats = session.load_stats();
    println!(
        "reopened from the snapshot at seq {:?}, replaying {} event(s)",
        stats.snapshot_seq, stats.events_replayed
    );
    assert_eq!(stats.snapshot_seq, Some(snapshot_seq));
    assert_eq!(stats.events_replayed, 1);
    let after = session.state_cloned(); // a copy: `state()` would lock the session
    assert_eq!(slices(&after)?, (usage, log));
    let (_, reopened) = slices(&after)?;
    println!(
        "after reopen: {} ratings, average {:.1}",
        reopened.ratings.len(),
        reopened.average()
    );

    // Time travel works for slices too: at the snapshot there were two ratings.
    let earlier = session.state_at(snapshot_seq)?;
    let (_, earlier) = slices(&earlier)?;
    println!("at seq {snapshot_seq}: {} ratings", earlier.ratings.len());
    assert_eq!(earlier.ratings.len(), 2);
    drop(session);
    drop(journal); // closed, so that the CLI can open it
    common::print_cli_hint(&path, session_id);
    Ok(())
}
