//! The demo: a scripted agent with real local tools in a sandbox folder.
//!
//! The "model" is a fixed script (deterministic, offline); the tools are
//! real: they write and read files in the sandbox, and only there (see
//! [`sandbox`](crate::cli::sandbox): no absolute path, no `..`, no symbolic
//! link is followed). `write_file` is *keyed*: it remembers each call id it
//! served (under `.calls`, by evaluation and encoded call id) and logs every real execution to
//! `.executions.log`, so a tool run twice would be visible there.
//!
//! A refused path fails that one tool call: the refusal, naming the path, is
//! recorded as the call's error, so the call is finished exactly once and
//! the conversation goes on. A session without a sandbox of its own is
//! refused before anything is written (see [`resume`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_journal::agent::{
    Idempotency, InnerLoop, LoopResult, ResumeMode, ResumeOptions, ScriptStep, ScriptedProvider,
    Tool, ToolContext,
};
use agent_journal::resume::{ResumePlan, ResumeState};
use agent_journal::{Error, Journal, Session};

use crate::cli::lease::{LeaseArgs, hold};
use crate::cli::sandbox::{CallRecord, Sandbox, encode};

pub(crate) const PROMPT_NS: &str = "demo";
pub(crate) const PROMPT_KEY: &str = "file-assistant";
const SYSTEM: &str =
    "You are a careful file assistant. Use the tools to work in the sandbox folder.";
const USER: &str = "Write a short todo list to notes.txt, then tell me how many words it has and what else is in the folder.";
const NOTES: &str = "buy milk\nfix the flaky test\ncall the bank\n";

fn script() -> Vec<ScriptStep> {
    let call = |name: &str, args: serde_json::Value| (name.to_owned(), args.to_string());
    vec![
        ScriptStep {
            content: "I'll write the todo list first.".into(),
            calls: vec![
                call(
                    "write_file",
                    serde_json::json!({"path": "notes.txt", "content": NOTES}),
                ),
                call(
                    "write_file",
                    serde_json::json!({"path": "README.txt", "content": "sandbox of the agent-journal demo\n"}),
                ),
            ],
        },
        ScriptStep {
            content: "Now I'll count the words and list the folder.".into(),
            calls: vec![
                call("word_count", serde_json::json!({"path": "notes.txt"})),
                call("list_dir", serde_json::json!({"path": "."})),
            ],
        },
        ScriptStep {
            content: "Done. The tools said: {results}".into(),
            calls: vec![],
        },
    ]
}

fn args(arguments: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(arguments).map_err(|e| format!("bad arguments: {e}"))
}

fn arg<'a>(args: &'a serde_json::Value, name: &str) -> Result<&'a str, String> {
    args.get(name)
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("missing string argument {name:?}"))
}

/// The JSON schema of a tool taking a relative `path` (and a `content`).
fn path_schema(content: Option<&str>) -> serde_json::Value {
    let mut properties = serde_json::json!({
        "path": {"type": "string", "description": "A path relative to the sandbox folder."}
    });
    let mut required = vec!["path"];
    if let Some(doc) = content {
        properties["content"] = serde_json::json!({"type": "string", "description": doc});
        required.push("content");
    }
    serde_json::json!({"type": "object", "properties": properties, "required": required})
}

/// Writes a file; keyed by call id, so a resumed call returns its first result.
pub(crate) struct WriteFile(pub(crate) Arc<Sandbox>);

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Writes a text file in the sandbox folder."
    }
    fn parameters(&self) -> serde_json::Value {
        path_schema(Some("The text to write."))
    }
    fn idempotency(&self) -> Idempotency {
        Idempotency::Keyed
    }
    fn call(&self, arguments: &str, ctx: &ToolContext) -> Result<String, String> {
        let record = CallRecord::of(ctx.evaluation_id, ctx.call_id.as_str())?;
        if let Some(done) = self.0.recorded_result(&record)? {
            return Ok(done);
        }
        let a = args(arguments)?;
        let rel = arg(&a, "path")?;
        let content = arg(&a, "content")?;
        self.0.write(rel, content)?;
        // One line per execution, whatever the id and path hold.
        self.0.log_execution(&format!(
            "{} write_file {}",
            encode(ctx.call_id.as_str()),
            rel.escape_debug()
        ))?;
        let result = format!("wrote {} bytes to {rel}", content.len());
        self.0.record_result(&record, &result)?;
        Ok(result)
    }
}

/// Counts the words of a file (read-only: safe to re-run).
pub(crate) struct WordCount(pub(crate) Arc<Sandbox>);

impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }
    fn description(&self) -> &str {
        "Counts the words of a text file in the sandbox folder."
    }
    fn parameters(&self) -> serde_json::Value {
        path_schema(None)
    }
    fn call(&self, arguments: &str, _ctx: &ToolContext) -> Result<String, String> {
        let a = args(arguments)?;
        let text = self.0.read(arg(&a, "path")?)?;
        Ok(format!("{} words", text.split_whitespace().count()))
    }
}

/// Lists the visible files of a folder (read-only: safe to re-run).
pub(crate) struct ListDir(pub(crate) Arc<Sandbox>);

impl Tool for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }
    fn description(&self) -> &str {
        "Lists the files of a folder in the sandbox folder."
    }
    fn parameters(&self) -> serde_json::Value {
        path_schema(None)
    }
    fn call(&self, arguments: &str, _ctx: &ToolContext) -> Result<String, String> {
        let a = args(arguments)?;
        let names: Vec<String> = self
            .0
            .list(arg(&a, "path")?)?
            .into_iter()
            .filter(|n| !n.starts_with('.'))
            .collect();
        Ok(names.join(", "))
    }
}

/// The demo's provider, slowed by `AGENT_JOURNAL_DEMO_DELAY_MS` per round
/// trip (default none): a knob for tests that stop or kill a run midway.
struct Demo(ScriptedProvider, std::time::Duration);

impl agent_journal::agent::Provider for Demo {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn complete(
        &self,
        request: &agent_journal::agent::ProviderRequest<'_>,
    ) -> Result<agent_journal::agent::ProviderResponse, String> {
        std::thread::sleep(self.1);
        self.0.complete(request)
    }
}

fn with_tools<T>(sandbox: &Arc<Sandbox>, f: impl FnOnce(&InnerLoop<'_>) -> T) -> T {
    let delay = std::env::var("AGENT_JOURNAL_DEMO_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(std::time::Duration::ZERO, std::time::Duration::from_millis);
    let provider = Demo(ScriptedProvider::new(script()), delay);
    let (w, c, l) = (
        WriteFile(sandbox.clone()),
        WordCount(sandbox.clone()),
        ListDir(sandbox.clone()),
    );
    let tools: Vec<&dyn Tool> = vec![&w, &c, &l];
    let lp = InnerLoop::new(&provider, tools);
    f(&lp)
}

/// Records one demo run into the journal at `db`, its tools working in a new
/// folder under `sandbox_root`; returns its result and that folder.
pub(crate) fn run(
    journal: &Journal,
    sandbox_root: &Path,
    lease: &LeaseArgs,
) -> Result<(LoopResult, PathBuf), Error> {
    let sandbox = Arc::new(Sandbox::create_under(sandbox_root)?);
    // The label is for people (`show` prints it); a resume never reads it.
    let labels = vec![
        ("agent".into(), "demo".into()),
        (
            "sandbox".into(),
            sandbox.path().to_string_lossy().into_owned(),
        ),
    ];
    let session = journal.create_session_with_labels(labels)?;
    // Recorded outside the session's events, before any tool runs.
    sandbox.admit(journal, session.id())?;
    let held = hold(&session, lease)?;
    let result = with_tools(&sandbox, |lp| {
        lp.run(&session, PROMPT_NS, PROMPT_KEY, SYSTEM, USER)
    })?;
    if let Some(h) = held {
        h.release()?;
    }
    Ok((result, sandbox.path().to_owned()))
}

/// The `sandbox` label of a session, if it has one (only quoted in errors).
pub(crate) fn label_of(session: &Session) -> Option<String> {
    let state = session.state();
    state
        .labels()
        .iter()
        .find(|(k, _)| k == "sandbox")
        .map(|(_, v)| v.clone())
}

/// Resumes a demo session of the database at `db` from its crash point
/// (`plan`, the session's resume plan); returns the result and the folder
/// the tools worked in.
///
/// The folder is `chosen` (`--sandbox DIR`) or else the one recorded for the
/// session when `demo` (or an earlier resume) made it in this database:
/// never its `sandbox` label. A new fork is recorded in the same folder
/// before its tools run, so it can be resumed in turn; so is a session
/// continued in a folder the user chose.
///
/// # Errors
/// Every refusal comes before anything is written: the plan's
/// ([`Error::PromptMismatch`], [`Error::AlreadyFinished`], nothing to resume
/// from), then the sandbox's ([`Error::InvalidInput`] naming the session and
/// what is missing).
pub(crate) fn resume(
    session: &Session,
    plan: &ResumePlan,
    mode: ResumeMode,
    interrupt_never_tools: bool,
    chosen: Option<&Path>,
    lease: &LeaseArgs,
) -> Result<(LoopResult, PathBuf), Error> {
    plan.check_prompt(PROMPT_NS, PROMPT_KEY)?;
    if plan.is_finished() {
        return Err(Error::AlreadyFinished {
            session: session.id(),
            evaluation: plan.evaluation_id,
        });
    }
    if plan.state == ResumeState::NotStarted {
        return Err(Error::InvalidInput(format!(
            "evaluation {} has no messages to resume from (it stopped before its system prompt)",
            plan.evaluation_id
        )));
    }
    let sandbox = Arc::new(match chosen {
        Some(dir) => Sandbox::chosen(dir)?,
        None => Sandbox::recorded(
            session.journal(),
            session.id(),
            label_of(session).as_deref(),
        )?,
    });
    let target = match mode {
        ResumeMode::Continue => session.clone(),
        ResumeMode::Fork => session.fork(plan.crash_point)?,
    };
    if target.id() != session.id() || chosen.is_some() {
        sandbox.admit(session.journal(), target.id())?;
    }
    // The crash point, marked on the timeline before anything runs; it
    // also tells a later resume of a fork of this point that this one went on.
    crate::cli::resumed::mark(
        &target,
        session.id(),
        plan.crash_point,
        &crate::cli::render::state_name(&plan.state),
    )?;
    let options = ResumeOptions {
        mode: ResumeMode::Continue,
        evaluation: Some(plan.evaluation_id),
        interrupt_never_tools,
        ..ResumeOptions::new(PROMPT_NS, PROMPT_KEY)
    };
    // A session continued in place is leased by the caller before its plan
    // was read; a fork is leased here, before its tools run.
    let held = match mode {
        ResumeMode::Fork => hold(&target, lease)?,
        ResumeMode::Continue => None,
    };
    let result = with_tools(&sandbox, |lp| lp.resume(&target, &options))?;
    if let Some(h) = held {
        h.release()?;
    }
    Ok((result, sandbox.path().to_owned()))
}
