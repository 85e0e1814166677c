//! Runs an agent with `InnerLoop` (a custom `Provider` and four tools, one
//! for each `Idempotency`), crashes it in the middle of its tool calls,
//! reopens the journal, inspects the resume plan and resumes: the tools that
//! completed before the crash do not run again.
//!
//! Run it with:
//!
//! ```text
//! cargo run --example crash_and_resume [-- --db PATH]
//! ```
//!
//! It records into `--db PATH`, else `./agent-journal.db` (the CLI's
//! default), and prints at the end the `agent-journal log` command that
//! shows what it recorded (the crash point and the resumed run after it).
//!
//! The crash is simulated with `JournalConfig::after_append`, a hook called
//! after each event is durable: it panics right after event `CRASH_AFTER`,
//! unwinding out of the run as a dying process would stop, and the journal
//! is dropped. (`agent-journal demo --crash-after N` aborts the process.)
//!
//! What resume does with each call of the crashed turn:
//! - completed (`lookup_order`, `charge_card`): never run again, whatever
//!   their idempotency: the result is in the journal;
//! - in doubt, started with no result (`send_receipt`): follows the tool's
//!   idempotency. `Keyed` re-runs with `ctx.is_resume == true`, so the tool
//!   can deduplicate by `ctx.call_id`; `Safe` re-runs; `Never` stops the resume
//!   with `Error::ToolIdempotency` unless `interrupt_never_tools` is set;
//! - pending, never started (`estimate_delivery`): runs.

mod common;

use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_journal::agent::{
    Idempotency, InnerLoop, Provider, ProviderRequest, ProviderResponse, ResumeOptions, Tool,
    ToolContext,
};
use agent_journal::state::ToolCallInfo;
use agent_journal::{Journal, JournalConfig, Outcome, ToolCallRecord};

/// Events 0-3 open the session and the evaluation (system and user), 4 is
/// the provider call, 5 the assistant's four tool calls; then `lookup_order`
/// starts (6) and completes (7-8), `charge_card` starts (9) and completes
/// (10-11), and `send_receipt` starts (12): the crash comes right after.
const CRASH_AFTER: u64 = 12;
const SYSTEM: &str = "You run a book shop.";
const USER: &str = "Buy order A-17.";

/// A stand-in for a model client that counts its round trips.
struct CheckoutModel {
    calls: AtomicUsize,
}

impl Provider for CheckoutModel {
    fn name(&self) -> &str {
        "checkout-model"
    }

    fn complete(&self, request: &ProviderRequest<'_>) -> Result<ProviderResponse, String> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let call = |id: &str, name: &str| ToolCallRecord::new(id, name, r#"{"order":"A-17"}"#);
        // Turn 1 asks for the tools; turn 2, after their results, answers.
        let (content, tool_calls) = match request.turn {
            1 => (
                "Checking the order, charging it, sending the receipt.",
                vec![
                    call("call_1", "lookup_order"),
                    call("call_2", "charge_card"),
                    call("call_3", "send_receipt"),
                    call("call_4", "estimate_delivery"),
                ],
            ),
            _ => ("Paid, receipt sent, arriving Friday.", vec![]),
        };
        let content = content.to_owned();
        let model = "checkout-1".to_owned();
        Ok(ProviderResponse {
            content,
            tool_calls,
            model,
            ..ProviderResponse::default()
        })
    }
}

/// A tool that counts how often its handler really runs.
struct Counted {
    name: &'static str,
    idempotency: Idempotency,
    output: &'static str,
    runs: AtomicUsize,
    resumed_runs: AtomicUsize,
}

impl Counted {
    fn new(name: &'static str, idempotency: Idempotency, output: &'static str) -> Self {
        let (runs, resumed_runs) = (AtomicUsize::new(0), AtomicUsize::new(0));
        Self {
            name,
            idempotency,
            output,
            runs,
            resumed_runs,
        }
    }
}

impl Tool for Counted {
    fn name(&self) -> &str {
        self.name
    }
    fn idempotency(&self) -> Idempotency {
        self.idempotency
    }
    fn call(&self, _arguments: &str, ctx: &ToolContext) -> Result<String, String> {
        // A real `Keyed` tool passes `ctx.call_id` to its service as the
        // idempotency key, so a re-run after a crash is not done twice.
        self.runs.fetch_add(1, Ordering::SeqCst);
        if ctx.is_resume {
            self.resumed_runs.fetch_add(1, Ordering::SeqCst);
        }
        Ok(self.output.to_owned())
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = common::db_path("crash_and_resume")?;
    let model = CheckoutModel {
        calls: AtomicUsize::new(0),
    };
    let lookup = Counted::new("lookup_order", Idempotency::Safe, "2 books, 42 EUR");
    let charge = Counted::new("charge_card", Idempotency::Never, "charged 42 EUR");
    let receipt = Counted::new("send_receipt", Idempotency::Keyed, "receipt sent");
    let delivery = Counted::new("estimate_delivery", Idempotency::Safe, "arrives Friday");
    let tools: Vec<&dyn Tool> = vec![&lookup, &charge, &receipt, &delivery];

    // 1. Run until the crash.
    let session_id = {
        let config = JournalConfig {
            after_append: Some(Arc::new(|_session, _first, last| {
                if last >= CRASH_AFTER {
                    panic!("simulated crash right after event {last}");
                }
            })),
            ..JournalConfig::default()
        };
        let journal = Journal::open_with(&path, config)?;
        let session = journal.create_session()?;
        let agent = InnerLoop::new(&model, tools.clone());
        let quiet = panic::take_hook();
        panic::set_hook(Box::new(|_| {})); // keep the simulated crash off stderr
        let run = panic::catch_unwind(AssertUnwindSafe(|| {
            agent.run(&session, "shop", "checkout", SYSTEM, USER)
        }));
        panic::set_hook(quiet);
        assert!(run.is_err(), "the run was meant to crash");
        println!(
            "crashed right after event {CRASH_AFTER} of session {}",
            session.id()
        );
        session.id()
    }; // The journal is dropped: as far as it knows, the process died.

    // 2. Reopen (no hook now) and see where the run stopped.
    let journal = Journal::open(&path)?;
    let crashed = journal.session(session_id)?;
    let plan = crashed.resume_plan()?;
    let names = |calls: &[ToolCallInfo]| -> Vec<String> {
        calls
            .iter()
            .map(|c| format!("{} {}", c.call_id, c.name))
            .collect()
    };
    println!(
        "resume plan: crash point {}, state {}, turn {}, in doubt {:?}, pending {:?}",
        plan.crash_point,
        plan.state.name(),
        plan.turn,
        names(&plan.in_doubt),
        names(&plan.pending)
    );
    assert_eq!(plan.crash_point, CRASH_AFTER);
    assert_eq!(names(&plan.in_doubt), ["call_3 send_receipt"]);
    assert_eq!(names(&plan.pending), ["call_4 estimate_delivery"]);

    // 3. Resume. The default continues the crashed session itself: its
    // crash point stays in the stream and the run goes on after it.
    let options = ResumeOptions::new("shop", "checkout"); // refuses another prompt
    let result = InnerLoop::new(&model, tools.clone()).resume(&crashed, &options)?;
    println!(
        "resumed in place: {:?} after {} turns: {}",
        result.outcome, result.turns, result.content
    );
    assert_eq!(result.outcome, Outcome::Succeeded);
    assert_eq!(result.session.id(), crashed.id());
    assert!(
        crashed.head() > CRASH_AFTER + 1,
        "the run went on in the same session"
    );
    // A second resume finds nothing to do and writes nothing.
    let again = InnerLoop::new(&model, tools.clone()).resume(&crashed, &options);
    assert!(matches!(
        again,
        Err(agent_journal::Error::AlreadyFinished { .. })
    ));
    let done = result.session.resume_plan()?;
    assert!(done.is_finished() && done.pending.is_empty() && done.in_doubt.is_empty());

    // 4. Each tool ran exactly once over the crash and the resume.
    for tool in [&lookup, &charge, &receipt, &delivery] {
        let runs = tool.runs.load(Ordering::SeqCst);
        let resumed = tool.resumed_runs.load(Ordering::SeqCst);
        let idempotency = format!("{:?}", tool.idempotency);
        println!(
            "  {:<18} {idempotency:<6} ran {runs} time(s), {resumed} as a resume",
            tool.name
        );
        assert_eq!(runs, 1, "{} ran more than once", tool.name);
    }
    assert_eq!(receipt.resumed_runs.load(Ordering::SeqCst), 1, "is_resume");
    let model_calls = model.calls.load(Ordering::SeqCst);
    assert_eq!(model_calls, 2, "turn 1 before the crash, turn 2 after");
    println!("charge_card ran once: the card was not charged twice ({model_calls} model calls)");
    drop((crashed, result));
    drop(journal); // closed, so that the CLI can open it
    common::print_cli_hint(&path, session_id);
    Ok(())
}
