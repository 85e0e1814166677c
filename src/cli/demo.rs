//! The demo: a scripted agent with real local tools in a sandbox folder.
//!
//! The "model" is a fixed script (deterministic, offline); the tools are
//! real: they write and read files in the sandbox, so what they did can be
//! checked on disk.

use std::path::{Path, PathBuf};

use agent_journal::{
    CallId, Error, Journal, Outcome, ProviderCallRecord, ProviderOutcome, Session, TokenUsage,
    ToolCallRecord, now,
};

const SYSTEM: &str =
    "You are a careful file assistant. Use the tools to work in the sandbox folder.";
const USER: &str = "Write a short todo list to notes.txt, then tell me how many words it has and what else is in the folder.";
const NOTES: &str = "buy milk\nfix the flaky test\ncall the bank\n";

/// One scripted assistant step: text and tool calls (name, JSON arguments).
struct Step {
    content: &'static str,
    calls: Vec<(&'static str, String)>,
}

fn script() -> Vec<Step> {
    vec![
        Step {
            content: "I'll write the todo list first.",
            calls: vec![(
                "write_file",
                serde_json::json!({"path": "notes.txt", "content": NOTES}).to_string(),
            )],
        },
        Step {
            content: "Now I'll count the words and list the folder.",
            calls: vec![
                (
                    "word_count",
                    serde_json::json!({"path": "notes.txt"}).to_string(),
                ),
                ("list_dir", serde_json::json!({"path": "."}).to_string()),
            ],
        },
        Step {
            content: "Done: notes.txt holds your todo list.",
            calls: vec![],
        },
    ]
}

/// Resolves a tool's relative path inside the sandbox, refusing escapes.
fn inside(sandbox: &Path, rel: &str) -> Result<PathBuf, String> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!("path {rel:?} leaves the sandbox"));
    }
    Ok(sandbox.join(p))
}

fn arg<'a>(args: &'a serde_json::Value, name: &str) -> Result<&'a str, String> {
    args.get(name)
        .and_then(|v| v.as_str())
        .ok_or_else(|| format!("missing string argument {name:?}"))
}

/// Runs a real tool. `Err` is a tool failure, recorded as such.
pub(crate) fn run_tool(sandbox: &Path, name: &str, arguments: &str) -> Result<String, String> {
    let args: serde_json::Value =
        serde_json::from_str(arguments).map_err(|e| format!("bad arguments: {e}"))?;
    match name {
        "write_file" => {
            let path = inside(sandbox, arg(&args, "path")?)?;
            let content = arg(&args, "content")?;
            std::fs::write(&path, content)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(format!(
                "wrote {} bytes to {}",
                content.len(),
                arg(&args, "path")?
            ))
        }
        "word_count" => {
            let path = inside(sandbox, arg(&args, "path")?)?;
            let text = std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            Ok(format!("{} words", text.split_whitespace().count()))
        }
        "list_dir" => {
            let path = inside(sandbox, arg(&args, "path")?)?;
            let mut names: Vec<String> = std::fs::read_dir(&path)
                .map_err(|e| format!("cannot list {}: {e}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect();
            names.sort();
            Ok(names.join("\n"))
        }
        other => Err(format!("unknown tool {other:?}")),
    }
}

/// Records one demo run into `journal` and returns its session.
pub(crate) fn run(journal: &Journal, sandbox_root: &Path) -> Result<Session, Error> {
    let session = journal.create_session_with_labels(vec![("agent".into(), "demo".into())])?;
    let sandbox = sandbox_root.join(session.id().to_string());
    std::fs::create_dir_all(&sandbox).map_err(|e| Error::Io {
        context: format!("creating sandbox {}", sandbox.display()),
        source: e,
    })?;
    let eval = session.start_evaluation_with("demo", "file-assistant", "scripted")?;
    eval.system(SYSTEM)?;
    eval.user(USER)?;
    for (i, step) in script().into_iter().enumerate() {
        let started_at = now();
        let calls: Vec<ToolCallRecord> = step
            .calls
            .iter()
            .enumerate()
            .map(|(k, (name, args))| {
                ToolCallRecord::new(format!("call_{}_{}", i + 1, k + 1), *name, args.clone())
            })
            .collect();
        eval.provider_call(ProviderCallRecord {
            evaluation_id: eval.id(),
            turn: eval.turn() + 1,
            provider: "scripted".into(),
            model: "demo-script-1".into(),
            usage: TokenUsage {
                input_tokens: 120 + 40 * i as u64,
                output_tokens: 25,
                ..TokenUsage::default()
            },
            started_at,
            finished_at: now(),
            outcome: ProviderOutcome::Ok,
        })?;
        eval.assistant(step.content, calls.clone())?;
        for call in calls {
            run_call(&eval, &sandbox, &call.call_id, &call.name, &call.arguments)?;
        }
    }
    eval.finish(Outcome::Succeeded)?;
    Ok(session)
}

fn run_call(
    eval: &agent_journal::Evaluation,
    sandbox: &Path,
    call_id: &CallId,
    name: &str,
    arguments: &str,
) -> Result<(), Error> {
    eval.tool_started(call_id.clone())?;
    match run_tool(sandbox, name, arguments) {
        Ok(out) => eval.tool_result(call_id.clone(), out)?,
        Err(err) => eval.tool_failed(call_id.clone(), err)?,
    };
    Ok(())
}
