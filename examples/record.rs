//! Records one agent run by hand with the `Evaluation` recorder, closes the
//! journal, reopens it and reads the run back: the session's status, its
//! messages in order and its tool calls with their results.
//!
//! Run it with:
//!
//! ```text
//! cargo run --example record [-- --db PATH]
//! ```
//!
//! It records into `--db PATH`, else `./agent-journal.db` (the CLI's
//! default), and prints at the end the `agent-journal log` command that
//! shows what it recorded.
//!
//! Use the recorder when your own code talks to the model (an async client,
//! a framework): call one method per step, as it happens. Each call appends
//! an event that is on disk when it returns (the default `Durability::Synced`),
//! so a crash at any point leaves the journal describing exactly what happened.

mod common;

use agent_journal::{Journal, Outcome, Role, SessionStatus, ToolCallRecord, ToolStatus};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = common::db_path("record")?;

    // 1. Record a run: one evaluation, one tool call.
    let (session_id, eval_id) = {
        let journal = Journal::open(&path)?;
        let labels = vec![("agent".to_owned(), "weather-bot".to_owned())];
        let session = journal.create_session_with_labels(labels)?;
        // The prompt identity (namespace, key) is checked again on resume.
        let eval = session.start_evaluation("weather", "umbrella")?;
        eval.system("You answer questions about the weather. Use the tools.")?;
        eval.user("Do I need an umbrella in Lisbon tomorrow?")?;
        // An assistant message starts a turn; its tool calls start `Pending`.
        eval.assistant(
            "Let me check the forecast.",
            vec![ToolCallRecord::new(
                "call_1",
                "get_forecast",
                r#"{"city":"Lisbon","day":"tomorrow"}"#,
            )],
        )?;
        // `Started` right before the tool runs: a crash now leaves the call
        // "in doubt" rather than "never started".
        eval.tool_started("call_1")?;
        let forecast = r#"{"rain_probability":0.8,"high_c":17}"#; // your tool's output
        eval.tool_result("call_1", forecast)?;
        eval.assistant("Yes: 80% chance of rain, 17 °C at most. Take one.", vec![])?;
        eval.finish(Outcome::Succeeded)?;
        (session.id(), eval.id())
    }; // The journal is closed here; only the ids are kept.

    // 2. Reopen and read it back.
    let journal = Journal::open(&path)?;
    let info = journal
        .sessions_info()?
        .into_iter()
        .find(|i| i.id == session_id)
        .ok_or("the session was not listed")?;
    println!(
        "session {} ({:?}): {} events, labels {:?}",
        info.id, info.status, info.events, info.labels
    );
    assert_eq!(info.status, SessionStatus::Finished);

    let session = journal.session(session_id)?;
    let kinds: Vec<&str> = session.events(..)?.iter().map(|e| e.event.kind()).collect();
    println!("timeline: {}", kinds.join(", "));

    let head = session.head();
    // A read guard over the folded state: appends and other calls on this
    // session (`head`, `state_at`, ...) wait until it is dropped.
    let state = session.state();
    let evaluation = state
        .evaluations()
        .get(eval_id)
        .ok_or("the evaluation is missing")?;
    let outcome = match &evaluation.outcome {
        Some(o) => format!("{o:?}"),
        None => "unfinished".to_owned(),
    };
    println!(
        "evaluation {} ({}/{}): {} turns, outcome {outcome}",
        eval_id, evaluation.prompt_ns, evaluation.prompt_key, evaluation.turns
    );

    println!("messages:");
    for m in state.messages().for_evaluation(eval_id) {
        let calls: Vec<String> = m
            .tool_calls
            .iter()
            .map(|c| format!("{}({}) [{}]", c.name, c.arguments, c.status))
            .collect();
        let calls = if calls.is_empty() {
            String::new()
        } else {
            format!(" -> calls {}", calls.join(", "))
        };
        println!(
            "  #{} turn {} {:<9} {}{calls}",
            m.sequence, m.turn, m.role, m.content
        );
    }

    println!("tool calls:");
    for call in state.tool_calls().for_evaluation(eval_id) {
        // A completed call points at the tool message holding its result.
        let result = call
            .result
            .and_then(|id| state.messages().get(id))
            .map(|m| m.content.as_str())
            .unwrap_or("(none)");
        println!(
            "  {} {}: {} -> {}",
            call.call_id, call.name, call.status, result
        );
    }

    // The claims above, checked.
    let messages: Vec<_> = state.messages().for_evaluation(eval_id).collect();
    let roles: Vec<Role> = messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant
        ]
    );
    let call = state
        .tool_calls()
        .get(eval_id, &"call_1".into())
        .ok_or("the tool call is missing")?;
    assert_eq!(call.status, ToolStatus::Completed);
    assert_eq!(evaluation.outcome, Some(Outcome::Succeeded));
    assert_eq!(evaluation.turns, 2);
    println!(
        "summary: {} events, {} messages, {} tool call(s), outcome Succeeded",
        head,
        messages.len(),
        state.tool_calls().len()
    );
    drop(state);
    drop(session);
    drop(journal); // closed, so that the CLI can open it
    common::print_cli_hint(&path, session_id);
    Ok(())
}
