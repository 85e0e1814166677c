//! The formats `import` reads, and how `--format auto` tells them apart
//! from a file's content.

use std::path::Path;

use agent_journal::Error;
use clap::ValueEnum;

/// What `import --format` reads.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImportFormat {
    /// Told from the content: a directory or Claude Code records are
    /// `claude-code`, an exported journal's header `journal`, a WINK
    /// snapshot `wink`, a state blob `state-blob`, InnerMessage lines
    /// `jsonl`, Anthropic blocks or a `system` field `anthropic`, other
    /// message lists `openai`.
    Auto,
    /// A Claude Code session log (`~/.claude/projects/.../SESSION.jsonl`), or
    /// a directory of them: each a session, each thread an evaluation.
    ClaudeCode,
    /// An exported journal file (.ajournal).
    Journal,
    /// An OpenAI chat-completions messages array, or a request body holding one.
    Openai,
    /// An Anthropic Messages request body.
    Anthropic,
    /// InnerMessage JSON objects, one per line.
    Jsonl,
    /// OpenAI Responses API `input` items (or a request body holding them).
    OpenaiResponses,
    /// An Ollama `/api/chat` request or messages array (tool calls get ids
    /// derived from their place, and the session says so).
    Ollama,
    /// A Gemini `generateContent` request.
    Gemini,
    /// A portable conversation state blob (a new conversation).
    StateBlob,
    /// A WINK-shaped JSON snapshot (as `export --format wink` writes): a new
    /// session whose state is the snapshot's, resumable like a crashed one.
    Wink,
}

/// The format of `file`, from its content (`import --format auto`), read
/// in passes that keep none of it (`provider::survey`). The text is read
/// again by the import.
pub(crate) fn detect(file: &Path, max_bytes: u64) -> Result<(ImportFormat, Option<String>), Error> {
    if file.is_dir() {
        return Ok((ImportFormat::ClaudeCode, None));
    }
    use agent_journal::provider::input::{Input, check_input};
    let Input::File { len } = check_input(file)? else {
        // A pipe cannot be read twice (not even its first bytes, to look
        // for an exported journal's magic): read once, within the limit,
        // and kept for the import.
        let text = read_bounded(file, max_bytes)?;
        let format = detect_file(file, Some(&text))?;
        return Ok((format, Some(text)));
    };
    if agent_journal::format::ajournal::looks_like_journal_file(file) {
        return Ok((ImportFormat::Journal, None));
    }
    if len > max_bytes {
        return Err(Error::InvalidInput(format!(
            "{}: larger than the limit of {max_bytes} bytes (--max-bytes); nothing was imported",
            file.display()
        )));
    }
    Ok((detect_file(file, None)?, None))
}

/// What the messages of a file look like (`detect_file`).
#[derive(Default)]
struct Looks {
    anthropic_blocks: bool,
    responses_items: bool,
    gemini_parts: bool,
    ollama: bool,
}

impl Looks {
    fn see(&mut self, m: &serde_json::Value) {
        let content = m["content"].as_array();
        self.anthropic_blocks |= content.is_some_and(|blocks| {
            blocks.iter().any(|b| {
                matches!(
                    b["type"].as_str(),
                    Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking")
                ) || b["source"].is_object()
            })
        });
        // Responses items: typed items other than chat messages.
        self.responses_items |= m["type"].as_str().is_some_and(|t| t != "message")
            || content.is_some_and(|parts| {
                parts.iter().any(|p| {
                    matches!(
                        p["type"].as_str(),
                        Some("input_text" | "output_text" | "input_image")
                    )
                })
            });
        self.gemini_parts |= m["parts"].is_array();
        // Ollama: calls without ids, arguments as objects, images, tool names.
        self.ollama |= m["images"].is_array()
            || m["tool_name"].is_string()
            || m["tool_calls"].as_array().is_some_and(|calls| {
                calls
                    .iter()
                    .any(|c| c["id"].is_null() || c["function"]["arguments"].is_object())
            });
    }
}

/// [`detect`] for a file that is neither a directory nor an exported
/// journal: read from `file`, or `text` if it was read already.
fn detect_file(file: &Path, text: Option<&str>) -> Result<ImportFormat, Error> {
    let mut looks = Looks::default();
    let mut see = |m: &serde_json::Value| looks.see(m);
    let (keys, whole) = match text {
        Some(t) => agent_journal::provider::survey_text(t, &mut see)?,
        None => agent_journal::provider::survey(file, &mut see)?,
    };
    let is = |k: &str| keys.iter().any(|x| x == k);
    if (is("uuid") || is("leafUuid")) && is("type") && !is("role") {
        return Ok(ImportFormat::ClaudeCode);
    }
    if is("role") && (is("evaluation_id") || is("message_id")) {
        return Ok(ImportFormat::Jsonl);
    }
    let whole = whole.map_err(|e| {
        Error::InvalidInput(format!(
            "{}: not a format import reads ({e}); give --format",
            file.display()
        ))
    })?;
    let messages = match &whole {
        serde_json::Value::Object(o) if o.contains_key("slices") && o.contains_key("version") => {
            return Ok(ImportFormat::Wink);
        }
        serde_json::Value::Object(o)
            if o.contains_key("processed_length") && o.contains_key("provider") =>
        {
            return Ok(ImportFormat::StateBlob);
        }
        serde_json::Value::Object(o) => {
            if o.contains_key("input") {
                return Ok(ImportFormat::OpenaiResponses);
            }
            if o.contains_key("contents") {
                return Ok(ImportFormat::Gemini);
            }
            if o.contains_key("options") || o.contains_key("keep_alive") {
                return Ok(ImportFormat::Ollama);
            }
            if o.contains_key("system") || o.contains_key("anthropic_version") {
                return Ok(ImportFormat::Anthropic);
            }
            o.get("messages").cloned().unwrap_or_default()
        }
        other => other.clone(),
    };
    if looks.anthropic_blocks {
        return Ok(ImportFormat::Anthropic);
    }
    if looks.responses_items {
        return Ok(ImportFormat::OpenaiResponses);
    }
    if looks.gemini_parts {
        return Ok(ImportFormat::Gemini);
    }
    if looks.ollama {
        return Ok(ImportFormat::Ollama);
    }
    if messages.is_array() {
        return Ok(ImportFormat::Openai);
    }
    Err(Error::InvalidInput(format!(
        "{}: not a format import reads (no message list found); give --format",
        file.display()
    )))
}

/// Reads `file` as UTF-8 text, refusing it past `limit` bytes (read no
/// further than that, so an endless input costs `limit` at most).
pub(crate) fn read_bounded(file: &Path, limit: u64) -> Result<String, Error> {
    use std::io::Read;
    let io = |e| Error::Io {
        context: format!("reading {}", file.display()),
        source: e,
    };
    let mut text = String::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(limit.saturating_add(1)).read_to_string(&mut text))
        .map_err(io)?;
    if text.len() as u64 > limit {
        return Err(too_large(file, limit));
    }
    Ok(text)
}

/// `file` is larger than `limit` (`--max-bytes`).
pub(crate) fn too_large(file: &Path, limit: u64) -> Error {
    Error::InvalidInput(format!(
        "{}: larger than the limit of {limit} bytes (--max-bytes); nothing was imported",
        file.display()
    ))
}
