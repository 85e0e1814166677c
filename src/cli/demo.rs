//! The demo: a scripted agent with real local tools in a sandbox folder.
//!
//! The "model" is a fixed script (deterministic, offline); the tools are
//! real: they write and read files in the sandbox. `write_file` is *keyed*:
//! it remembers each call id it served (`.calls/<id>`) and logs every real
//! execution to `.executions.log`, so a tool run twice would be visible there.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_journal::{
    Error, Idempotency, InnerLoop, Journal, LoopResult, ResumeMode, ResumeOptions, ScriptStep,
    ScriptedProvider, Session, Tool, ToolContext,
};

pub(crate) const PROMPT_NS: &str = "demo";
pub(crate) const PROMPT_KEY: &str = "file-assistant";
const SYSTEM: &str =
    "You are a careful file assistant. Use the tools to work in the sandbox folder.";
const USER: &str = "Write a short todo list to notes.txt, then tell me how many words it has and what else is in the folder.";
const NOTES: &str = "buy milk\nfix the flaky test\ncall the bank\n";
/// The name of the file where `write_file` logs each real execution.
pub(crate) const EXECUTIONS: &str = ".executions.log";

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

/// Resolves a tool's relative path inside the sandbox, refusing escapes.
fn inside(sandbox: &Path, rel: &str) -> Result<PathBuf, String> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return Err(format!("path {rel:?} leaves the sandbox"));
    }
    Ok(sandbox.join(p))
}

fn args(arguments: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(arguments).map_err(|e| format!("bad arguments: {e}"))
}

fn arg<'a>(args: &'a serde_json::Value, name: &str) -> Result<&'a str, String> {
    args.get(name)
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("missing string argument {name:?}"))
}

/// Writes a file; keyed by call id, so a resumed call returns its first result.
struct WriteFile(PathBuf);

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn idempotency(&self) -> Idempotency {
        Idempotency::Keyed
    }
    fn call(&self, arguments: &str, ctx: &ToolContext) -> Result<String, String> {
        let marker_dir = self.0.join(".calls");
        let marker = marker_dir.join(ctx.call_id.as_str());
        if let Ok(done) = std::fs::read_to_string(&marker) {
            return Ok(done);
        }
        let a = args(arguments)?;
        let rel = arg(&a, "path")?;
        let content = arg(&a, "content")?;
        let path = inside(&self.0, rel)?;
        std::fs::write(&path, content)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.0.join(EXECUTIONS))
            .map_err(|e| format!("cannot log: {e}"))?;
        writeln!(log, "{} write_file {rel}", ctx.call_id)
            .map_err(|e| format!("cannot log: {e}"))?;
        let result = format!("wrote {} bytes to {rel}", content.len());
        std::fs::create_dir_all(&marker_dir).map_err(|e| format!("cannot record call: {e}"))?;
        let tmp = marker_dir.join(format!(".{}.tmp", ctx.call_id.as_str()));
        std::fs::write(&tmp, &result)
            .and_then(|()| std::fs::rename(&tmp, &marker))
            .map_err(|e| format!("cannot record call: {e}"))?;
        Ok(result)
    }
}

/// Counts the words of a file (read-only: safe to re-run).
struct WordCount(PathBuf);

impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }
    fn call(&self, arguments: &str, _ctx: &ToolContext) -> Result<String, String> {
        let a = args(arguments)?;
        let path = inside(&self.0, arg(&a, "path")?)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        Ok(format!("{} words", text.split_whitespace().count()))
    }
}

/// Lists the visible files of a folder (read-only: safe to re-run).
struct ListDir(PathBuf);

impl Tool for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }
    fn call(&self, arguments: &str, _ctx: &ToolContext) -> Result<String, String> {
        let a = args(arguments)?;
        let path = inside(&self.0, arg(&a, "path")?)?;
        let mut names: Vec<String> = std::fs::read_dir(&path)
            .map_err(|e| format!("cannot list {}: {e}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        Ok(names.join(", "))
    }
}

fn with_tools<T>(sandbox: &Path, f: impl FnOnce(&InnerLoop<'_>) -> T) -> T {
    let provider = ScriptedProvider::new(script());
    let (w, c, l) = (
        WriteFile(sandbox.to_owned()),
        WordCount(sandbox.to_owned()),
        ListDir(sandbox.to_owned()),
    );
    let tools: Vec<&dyn Tool> = vec![&w, &c, &l];
    let lp = InnerLoop::new(&provider, tools);
    f(&lp)
}

/// Records one demo run into `journal` and returns its result.
pub(crate) fn run(journal: &Journal, sandbox_root: &Path) -> Result<LoopResult, Error> {
    let sandbox = sandbox_root.join(agent_journal::SessionId::new().to_string());
    std::fs::create_dir_all(&sandbox).map_err(|e| Error::Io {
        context: format!("creating sandbox {}", sandbox.display()),
        source: e,
    })?;
    let sandbox = sandbox.canonicalize().unwrap_or(sandbox);
    // Where the tools work is part of the record (forks copy labels), so a
    // resume finds it.
    let labels = vec![
        ("agent".into(), "demo".into()),
        ("sandbox".into(), sandbox.to_string_lossy().into_owned()),
    ];
    let session = journal.create_session_with_labels(labels)?;
    with_tools(&sandbox, |lp| {
        lp.run(&session, PROMPT_NS, PROMPT_KEY, SYSTEM, USER)
    })
}

/// The sandbox a demo session's tools worked in.
pub(crate) fn sandbox_of(session: &Session) -> Result<PathBuf, Error> {
    let state = session.state();
    state
        .labels()
        .iter()
        .find(|(k, _)| k == "sandbox")
        .map(|(_, v)| PathBuf::from(v))
        .ok_or_else(|| {
            Error::InvalidInput(format!(
                "session {} is not a demo session (no sandbox label)",
                session.id()
            ))
        })
}

/// Resumes a demo session from its crash point.
pub(crate) fn resume(
    session: &Session,
    mode: ResumeMode,
    interrupt_never_tools: bool,
) -> Result<LoopResult, Error> {
    let sandbox = sandbox_of(session)?;
    let options = ResumeOptions {
        mode,
        evaluation: None,
        prompt: Some((PROMPT_NS.into(), PROMPT_KEY.into())),
        interrupt_never_tools,
    };
    with_tools(&sandbox, |lp| lp.resume(session, &options))
}
