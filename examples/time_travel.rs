//! Time travel over a recorded run: the state at any event (`state_at`),
//! what changed between two points (a diff computed from two states and the
//! events between them), and a fork that branches at an earlier point to try
//! another continuation while the original stays untouched.
//!
//! Run it with:
//!
//! ```text
//! cargo run --example time_travel [-- --db PATH]
//! ```
//!
//! It records into `--db PATH`, else `./agent-journal.db` (the CLI's
//! default), and prints at the end the `agent-journal log` command that
//! shows what it recorded (the original and the fork).
//!
//! The state after event N is the fold of events `0..=N`, so any past state
//! can be rebuilt; the journal starts from its latest snapshot at or before N
//! when it has one. (`agent-journal diff SESSION A B` prints the same kind of
//! diff from the command line.)

mod common;

use agent_journal::{Journal, Outcome, Session, ToolCallRecord, ToolStatus};

/// What changed between the states after events `a` and `b` (`a <= b`).
fn diff(session: &Session, a: u64, b: u64) -> agent_journal::Result<Vec<String>> {
    let (before, after) = (session.state_at(a)?, session.state_at(b)?);
    let kinds: Vec<&str> = session
        .events(a + 1..=b)?
        .iter()
        .map(|e| e.event.kind())
        .collect();
    let mut lines = vec![format!("{} events: {}", kinds.len(), kinds.join(", "))];
    // New messages: those the later state has and the earlier one lacks.
    for m in after.messages().iter() {
        if before.messages().get(m.message_id).is_none() {
            lines.push(format!(
                "+ message #{} {}: {}",
                m.sequence, m.role, m.content
            ));
        }
    }
    // Tool calls that are new or changed status.
    for c in after.tool_calls().iter() {
        let old = before.tool_calls().get(c.evaluation_id, &c.call_id);
        let old = old.map(|o| o.status);
        if old != Some(c.status) {
            let old = old.map_or("(new)", |s| s.as_str());
            lines.push(format!(
                "~ tool call {} {}: {old} -> {}",
                c.call_id, c.name, c.status
            ));
        }
    }
    // Evaluations that finished in between.
    for e in after.evaluations().iter() {
        let old = before.evaluations().get(e.evaluation_id);
        if let (Some(outcome), None) = (&e.outcome, old.and_then(|o| o.outcome.as_ref())) {
            lines.push(format!("~ evaluation finished: {outcome:?}"));
        }
    }
    Ok(lines)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = common::db_path("time_travel")?;
    let journal = Journal::open(&path)?;

    // A run of two turns: search flights, then book one.
    let session = journal.create_session()?;
    let eval = session.start_evaluation("travel", "book-flight")?;
    eval.system("You book flights. Use the tools.")?;
    eval.user("Book me a flight to Porto on Monday.")?;
    let search = ToolCallRecord::new("call_1", "search_flights", r#"{"to":"OPO"}"#);
    eval.assistant("Searching.", vec![search])?;
    eval.tool_started("call_1")?;
    eval.tool_result("call_1", "TP123 09:10 180 EUR; FR456 14:00 95 EUR")?;
    let after_search = session.head() - 1; // the seq of the last event so far
    let book = ToolCallRecord::new("call_2", "book_flight", r#"{"flight":"TP123"}"#);
    eval.assistant("TP123 leaves earliest; booking it.", vec![book])?;
    eval.tool_started("call_2")?;
    eval.tool_result("call_2", "booked TP123, ref XK9")?;
    eval.assistant("Booked TP123 (ref XK9), 180 EUR.", vec![])?;
    let end = eval.finish(Outcome::Succeeded)?; // returns the event's seq
    println!(
        "recorded {} events; the search result is event {after_search}",
        session.head()
    );

    // 1. state_at: the run as it was after any event. Here: the status of
    // the booking call over time.
    let mut last = None;
    for seq in 0..=end {
        let state = session.state_at(seq)?;
        let status = state
            .tool_calls()
            .get(eval.id(), &"call_2".into())
            .map(|c| c.status);
        if status != last {
            let shown = status.map_or("(not requested)", |s| s.as_str());
            println!("after event {seq:>2}: call_2 book_flight is {shown}");
            last = status;
        }
    }
    let then = session.state_at(after_search)?;
    assert_eq!(then.messages().len(), 4, "system, user, assistant, tool");
    assert!(then.tool_calls().get(eval.id(), &"call_2".into()).is_none());
    assert_eq!(last, Some(ToolStatus::Completed));

    // 2. A diff between two points.
    println!("diff from event {after_search} to event {end}:");
    let lines = diff(&session, after_search, end)?;
    for line in &lines {
        println!("  {line}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l == "~ tool call call_2 book_flight: (new) -> completed")
    );
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("+ message")).count(),
        3
    );

    // 3. Fork at the search result and take the other branch: book the cheap
    // flight. The fork reads the parent's events 0..=at, then its own
    // `ForkPoint` marker at seq at + 1, then its own events.
    let fork = session.fork(after_search)?;
    assert_eq!(
        fork.state().forked_from(),
        Some((session.id(), after_search))
    );
    assert_eq!(fork.head(), after_search + 2);
    let alt = fork.evaluation(eval.id())?; // continues where the copy stops
    let cheap = ToolCallRecord::new("call_2", "book_flight", r#"{"flight":"FR456"}"#);
    alt.assistant("FR456 is cheapest; booking it.", vec![cheap])?;
    alt.tool_started("call_2")?;
    alt.tool_result("call_2", "booked FR456, ref QM4")?;
    alt.assistant("Booked FR456 (ref QM4), 95 EUR.", vec![])?;
    alt.finish(Outcome::Succeeded)?;

    let answer = |s: &Session| {
        let state = s.state();
        let last = state
            .messages()
            .last_for(eval.id())
            .map(|m| m.content.clone());
        last.unwrap_or_default()
    };
    println!("original {}: {}", session.id(), answer(&session));
    println!("fork     {}: {}", fork.id(), answer(&fork));
    assert_eq!(answer(&session), "Booked TP123 (ref XK9), 180 EUR.");
    assert_eq!(answer(&fork), "Booked FR456 (ref QM4), 95 EUR.");
    assert_eq!(
        session.head(),
        end + 1,
        "forking leaves the original untouched"
    );
    let sessions = journal.sessions()?;
    assert!(sessions.contains(&session.id()) && sessions.contains(&fork.id()));
    println!("both branches are in the journal");
    let (original, branch) = (session.id(), fork.id());
    drop((session, fork));
    drop(journal); // closed, so that the CLI can open it
    common::print_cli_hint(&path, original);
    common::print_cli_hint(&path, branch);
    Ok(())
}
