//! `export` and `import`: moving sessions out of and into a database.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_journal::conversation::state_blob::{ImportStateBlob, StateBlob, export_state_blob_for};
use agent_journal::{ConversationFormat, Error, Journal, JsonOptions, SliceNames};
use clap::{Args, ValueEnum};

use crate::cli::Cli;
use crate::cli::open::{at_or_last, open_for_reading, read_session, warn};
use crate::cli::output::{print_json, progress};
use crate::cli::redact::Redactor;
use agent_journal::provider::translate::{TranslationNote, translation_notes};

/// The arguments of `export`.
#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    /// Session id (or a unique prefix of it).
    #[arg(value_parser = crate::cli::open::session_arg)]
    session: String,
    /// Output format.
    #[arg(long, value_enum)]
    format: ExportFormat,
    /// For `wink`: the state after this seq (default: the last).
    #[arg(long)]
    at: Option<u64>,
    /// Output file (default: stdout for wink, SESSION.ajournal for journal).
    /// Written whole or not at all: to a temporary file beside it, then
    /// renamed over it.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// For `wink`: include the application's LOG slices (the adapter
    /// states are always included).
    #[arg(long)]
    include_logs: bool,
    /// For `wink`: the module of the specs' types in the document
    /// (`MODULE:InnerMessage`, `MODULE:ConversationState`,
    /// `MODULE:AdapterStateSnapshot`; default: the specs' own modules,
    /// `weakincentives.runtime.inner_messages` and so on).
    #[arg(long, value_name = "MODULE")]
    type_module: Option<String>,
    /// For `state-blob`: the blob's provider (default: that of the
    /// conversation's last provider call, else the one recorded at import).
    #[arg(long)]
    provider: Option<String>,
    /// For `openai`, `anthropic` and `jsonl`: the evaluation to export (its
    /// id, or a unique prefix or suffix), or `all` (a JSON array with one
    /// document per evaluation, in order; `jsonl`: every evaluation's
    /// messages). Default: the latest evaluation.
    #[arg(long, value_name = "ID|all")]
    evaluation: Option<String>,
    /// Replace secrets (API keys of the common providers, bearer tokens,
    /// passwords in URLs, private keys, JWTs) with `[REDACTED]` in every
    /// string exported, in every format; says how many on stderr.
    #[arg(long)]
    redact: bool,
    /// Also redact what this regular expression matches (its group named
    /// `secret` if it has one); may be repeated; implies `--redact`.
    #[arg(long, value_name = "REGEX")]
    redact_pattern: Vec<String>,
    /// For a provider format: the complete request body (the request's
    /// other fields, `model`, `tools`, `max_tokens` and so on, as they were
    /// imported), ready to be sent again; fields recorded for another
    /// format are not carried over, and stderr says so.
    #[arg(long, conflicts_with = "evaluation")]
    body: bool,
}

/// The arguments of `import`.
#[derive(Args, Debug)]
pub(crate) struct ImportArgs {
    /// The file to import.
    file: PathBuf,
    /// Its format; `auto` (the default) tells it from the content and says
    /// which it chose.
    #[arg(long, value_enum, default_value = "auto")]
    format: ImportFormat,
    /// Refuse a conversation larger than this many bytes (it is read whole
    /// into memory): an endless input such as /dev/zero is refused, not read
    /// until memory runs out.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30)]
    max_bytes: u64,
}

/// What `export --format` writes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ExportFormat {
    /// An exported journal file (.ajournal): every frame, verifiable.
    Journal,
    /// A WINK-shaped session snapshot (JSON).
    Wink,
    /// The latest evaluation as an OpenAI chat-completions messages array.
    Openai,
    /// The latest evaluation as an Anthropic Messages request (system + messages).
    Anthropic,
    /// The latest evaluation's messages, one JSON object per line.
    Jsonl,
    /// A conversation as a portable state blob (docs/state-blob.md).
    StateBlob,
    /// The latest evaluation as OpenAI Responses API `input` items.
    OpenaiResponses,
    /// The latest evaluation as an Ollama `/api/chat` messages array.
    Ollama,
    /// The latest evaluation as a Gemini `generateContent` request.
    Gemini,
}

/// What `import --format` reads.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ImportFormat {
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

/// `export SESSION --format F [--at SEQ] [-o FILE] [--include-logs]`.
pub(crate) fn export(cli: &Cli, args: &ExportArgs) -> Result<ExitCode, Error> {
    let mut redactor = if args.redact || !args.redact_pattern.is_empty() {
        Some(Redactor::new(&args.redact_pattern)?)
    } else {
        None
    };
    let journal = open_for_reading(&cli.db)?;
    let s = read_session(&journal, &args.session)?;
    let output = args.output.as_deref();
    match args.format {
        ExportFormat::Journal => {
            if args.at.is_some() || args.evaluation.is_some() {
                return Err(Error::InvalidInput(
                    "--at and --evaluation do not apply to --format journal: it holds every event"
                        .into(),
                ));
            }
            let out = output
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(format!("{}.ajournal", s.id())));
            // A fork reads its first events from its parent: the file holds
            // its ancestors too, so that it stands alone.
            let ids = journal.lineage(s.id())?;
            let mut total = 0;
            for id in &ids {
                total += journal.stream_len(*id)?.unwrap_or(0);
            }
            let bar = progress(total, "export");
            let n = match redactor.as_mut() {
                Some(r) => {
                    journal.export_journal_mapped(&ids, &out, |k| bar.inc(k), |e| r.event(e))?
                }
                None => journal.export_journal(&ids, &out, |k| bar.inc(k))?,
            };
            bar.finish_and_clear();
            let redacted = redactor.as_ref().map(|r| r.replaced);
            if cli.json {
                print_json(&serde_json::json!({
                    "file": out.display().to_string(), "events": n, "redacted": redacted,
                }))?;
                return Ok(ExitCode::SUCCESS);
            }
            let with = match ids.len() - 1 {
                0 => String::new(),
                k => format!(" (with the {k} session(s) whose events it reads)"),
            };
            outln!(
                "wrote {n} events of session {}{with} to {}",
                s.id(),
                out.display()
            );
        }
        ExportFormat::Openai
        | ExportFormat::Anthropic
        | ExportFormat::Jsonl
        | ExportFormat::OpenaiResponses
        | ExportFormat::Ollama
        | ExportFormat::Gemini => {
            let f = match args.format {
                ExportFormat::Openai => ConversationFormat::OpenAi,
                ExportFormat::Anthropic => ConversationFormat::Anthropic,
                ExportFormat::OpenaiResponses => ConversationFormat::OpenAiResponses,
                ExportFormat::Ollama => ConversationFormat::Ollama,
                ExportFormat::Gemini => ConversationFormat::Gemini,
                _ => ConversationFormat::Jsonl,
            };
            let spinner = crate::cli::output::working("export");
            let (text, notes) = match &args.evaluation {
                _ if args.body => {
                    let messages = s.latest_conversation(args.at)?;
                    (body_text(&s, args.at, f)?, translation_notes(&messages, f))
                }
                None => {
                    let messages = s.latest_conversation(args.at)?;
                    (f.to_text(&messages), translation_notes(&messages, f))
                }
                Some(which) => evaluations_text(&s, args.at, which, f)?,
            };
            report_translation(cli, &notes);
            spinner.finish_and_clear();
            let lines = f == ConversationFormat::Jsonl;
            write_output(
                output,
                redacted(&mut redactor, text.trim_end(), lines)?.as_str(),
            )?;
        }
        ExportFormat::Wink => {
            no_evaluation(args)?;
            let spinner = crate::cli::output::working("export");
            let at = at_or_last(&s, args.at);
            let state = s.state_at(at)?;
            let forked = state.forked_from().map(|(p, _)| p);
            let text = state.to_json(&JsonOptions {
                names: SliceNames::Wink {
                    module: args.type_module.clone(),
                },
                include_logs: args.include_logs,
                parent_id: forked,
                tags: vec![
                    ("session".into(), s.id().to_string()),
                    ("seq".into(), at.to_string()),
                ],
                created_at: None,
            });
            spinner.finish_and_clear();
            write_output(output, redacted(&mut redactor, &text, false)?.as_str())?;
        }
        ExportFormat::StateBlob => {
            no_evaluation(args)?;
            if args.at.is_some() {
                return Err(Error::InvalidInput(
                    "--at applies to --format wink; a state blob holds the conversation as it is now"
                        .into(),
                ));
            }
            let blob = export_state_blob_for(&journal, s.id(), args.provider.as_deref())?;
            let text = String::from_utf8_lossy(&blob);
            write_output(output, redacted(&mut redactor, &text, false)?.as_str())?;
        }
    }
    if let Some(r) = &redactor {
        let n = r.replaced;
        if cli.json {
            eprintln!("{}", serde_json::json!({"redacted": n}));
        } else {
            eprintln!("redacted {n} secret{}", if n == 1 { "" } else { "s" });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `export --body`: the latest evaluation as a complete request body of
/// format `f`, with the request fields recorded for it in that format.
fn body_text(
    s: &agent_journal::Session,
    at: Option<u64>,
    f: ConversationFormat,
) -> Result<String, Error> {
    if f == ConversationFormat::Jsonl {
        return Err(Error::InvalidInput(
            "--body applies to provider formats; jsonl has no request body".into(),
        ));
    }
    let messages = s.latest_conversation(at)?;
    let state = s.state();
    let eval = state.evaluations().latest().map(|e| e.evaluation_id);
    drop(state);
    let recorded = match eval {
        Some(e) => s.request_fields(e)?,
        None => None,
    };
    let fields = match recorded {
        Some((format, fields)) if format == f.name() => fields,
        Some((format, fields)) => {
            let keys: Vec<&str> = fields.keys().map(String::as_str).collect();
            crate::cli::open::warn(format_args!(
                "the request fields were recorded for {format} ({}); not carried to {}",
                keys.join(", "),
                f.name()
            ));
            serde_json::Map::new()
        }
        None => {
            crate::cli::open::warn(format_args!(
                "no request fields were recorded for this evaluation (a bare message list was imported, or it was recorded here): the body holds the messages only; add a model"
            ));
            serde_json::Map::new()
        }
    };
    let body = f.to_body(&messages, &fields);
    serde_json::to_string_pretty(&body).map_err(|e| Error::InvalidInput(e.to_string()))
}

/// Says on stderr what an export to another provider's format left out or
/// added (one line each; JSON lines under `--json`).
fn report_translation(cli: &Cli, notes: &[TranslationNote]) {
    for n in notes {
        if cli.json {
            eprintln!(
                "{}",
                serde_json::json!({"translation": {"message": n.message, "kind": n.kind, "detail": n.detail}})
            );
        } else if n.kind == "added" {
            eprintln!("note: message {}: added {}", n.message, n.detail);
        } else {
            eprintln!(
                "note: message {}: {} left out ({})",
                n.message, n.kind, n.detail
            );
        }
    }
}

/// `--evaluation` applies to the message formats only.
fn no_evaluation(args: &ExportArgs) -> Result<(), Error> {
    match args.evaluation {
        Some(_) => Err(Error::InvalidInput(
            "--evaluation applies to --format openai, anthropic and jsonl".into(),
        )),
        None => Ok(()),
    }
}

/// `text` with its secrets redacted when a redactor is given.
fn redacted(r: &mut Option<Redactor>, text: &str, lines: bool) -> Result<String, Error> {
    match r {
        Some(r) => r.document(text, lines),
        None => Ok(text.to_owned()),
    }
}

/// The messages of one evaluation (`which`: an id, or a unique prefix or
/// suffix of one) or of `all`, in format `f`.
fn evaluations_text(
    s: &agent_journal::Session,
    at: Option<u64>,
    which: &str,
    f: ConversationFormat,
) -> Result<(String, Vec<TranslationNote>), Error> {
    let state = match at {
        Some(seq) => s.state_at(seq)?,
        None => s.state_cloned(),
    };
    if state.conversation_log().is_conversation() {
        return Err(Error::InvalidInput(
            "--evaluation applies to sessions of evaluations; a conversation is one history".into(),
        ));
    }
    let ids: Vec<_> = state
        .evaluations()
        .iter()
        .map(|e| e.evaluation_id)
        .collect();
    let messages = |id| -> Vec<_> { state.messages().for_evaluation(id).cloned().collect() };
    if which == "all" {
        let mut notes = Vec::new();
        for (k, id) in ids.iter().enumerate() {
            for mut n in translation_notes(&messages(*id), f) {
                n.detail = format!("evaluation {k}: {}", n.detail);
                notes.push(n);
            }
        }
        if f == ConversationFormat::Jsonl {
            let parts: Vec<String> = ids.iter().map(|id| f.to_text(&messages(*id))).collect();
            let text = parts
                .iter()
                .map(|p| p.trim_end())
                .collect::<Vec<_>>()
                .join("\n");
            return Ok((text, notes));
        }
        let all: Vec<serde_json::Value> = ids.iter().map(|id| f.to_json(&messages(*id))).collect();
        let text =
            serde_json::to_string_pretty(&all).map_err(|e| Error::InvalidInput(e.to_string()))?;
        return Ok((text, notes));
    }
    let needle = which.to_ascii_lowercase();
    let found: Vec<_> = ids
        .iter()
        .filter(|id| {
            let t = id.to_string();
            t.starts_with(&needle) || t.ends_with(&needle)
        })
        .collect();
    match found.as_slice() {
        [one] => {
            let list = messages(**one);
            Ok((f.to_text(&list), translation_notes(&list, f)))
        }
        [] => Err(Error::InvalidInput(format!(
            "no evaluation of session {} matches {which:?}",
            s.id()
        ))),
        many => Err(Error::InvalidInput(format!(
            "{which:?} matches {} evaluations; give more of the id",
            many.len()
        ))),
    }
}

/// `import FILE --format F`.
pub(crate) fn import(cli: &Cli, args: &ImportArgs) -> Result<ExitCode, Error> {
    let file = &args.file;
    let format = match args.format {
        ImportFormat::Auto => {
            let found = detect(file, args.max_bytes)?;
            let name = found
                .to_possible_value()
                .map(|v| v.get_name().to_owned())
                .unwrap_or_default();
            if cli.json {
                eprintln!("{}", serde_json::json!({"format": name}));
            } else {
                eprintln!("format: {name} (detected; --format to choose)");
            }
            found
        }
        f => f,
    };
    // An exported journal shows a bar of the events written; the others
    // (read whole, then written in one append) a spinner.
    if format == ImportFormat::Journal {
        return import_journal(cli, &Journal::open(&cli.db)?, file);
    }
    let spinner = crate::cli::output::working("import");
    let result = import_format(cli, args, format);
    spinner.finish_and_clear();
    result
}

fn import_format(cli: &Cli, args: &ImportArgs, format: ImportFormat) -> Result<ExitCode, Error> {
    let file = &args.file;
    let f = match format {
        ImportFormat::Auto => unreachable!("detect never answers auto"),
        ImportFormat::ClaudeCode => return import_claude_code(cli, args),
        ImportFormat::Openai => ConversationFormat::OpenAi,
        ImportFormat::Anthropic => ConversationFormat::Anthropic,
        ImportFormat::Jsonl => ConversationFormat::Jsonl,
        ImportFormat::OpenaiResponses => ConversationFormat::OpenAiResponses,
        ImportFormat::Ollama => ConversationFormat::Ollama,
        ImportFormat::Gemini => ConversationFormat::Gemini,
        ImportFormat::Journal => return import_journal(cli, &Journal::open(&cli.db)?, file),
        ImportFormat::StateBlob => return import_state_blob(cli, args),
        ImportFormat::Wink => return import_wink(cli, args),
    };
    // Read and parsed before the database is opened (or created): bad
    // input creates nothing.
    let text = read_bounded(file, args.max_bytes)?;
    let name = file
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let in_file = |e| match e {
        Error::InvalidInput(r) => Error::InvalidInput(format!("{}: {r}", file.display())),
        other => other,
    };
    let messages = f
        .parse(&text, agent_journal::EvaluationId::new(), "import", &name)
        .map_err(in_file)?;
    if messages.is_empty() {
        return Err(in_file(Error::InvalidInput(
            "the conversation has no messages".into(),
        )));
    }
    let journal = Journal::open(&cli.db)?;
    let s = journal
        .import_messages(messages, f, f.request_fields(&text))
        .map_err(in_file)?;
    if cli.json {
        print_json(&serde_json::json!({"sessions": [s.id().to_string()], "events": s.head()}))?;
    } else {
        outln!("imported session {} ({} events)", s.id(), s.head());
    }
    Ok(ExitCode::SUCCESS)
}

/// `import FILE --format state-blob`: decoded before the database is
/// opened (a blob that does not decode creates nothing), then imported as
/// one atomic write. `--max-bytes` is the blob's size limit.
fn import_state_blob(cli: &Cli, args: &ImportArgs) -> Result<ExitCode, Error> {
    let file = &args.file;
    let text = read_bounded(file, args.max_bytes)?;
    let limit = usize::try_from(args.max_bytes).unwrap_or(usize::MAX);
    let blob = StateBlob::decode(text.as_bytes(), None, limit).map_err(|d| {
        Error::InvalidInput(format!(
            "{}: not an importable state blob ({}): {d}; nothing was imported",
            file.display(),
            d.kind()
        ))
    })?;
    let journal = Journal::open(&cli.db)?;
    let options = ImportStateBlob {
        title: file.file_stem().map(|n| n.to_string_lossy().into_owned()),
        ..ImportStateBlob::default()
    };
    let id = blob.import(&journal, &options)?;
    let events = journal.session(id)?.head();
    if cli.json {
        print_json(&serde_json::json!({"sessions": [id.to_string()], "events": events}))?;
    } else {
        outln!(
            "imported conversation {id} ({} messages, provider {}, {events} events)",
            blob.messages.len(),
            blob.provider
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `import FILE --format wink`: the snapshot is read and checked before the
/// database is opened (a document that does not read creates nothing), then
/// recorded as one atomic append.
fn import_wink(cli: &Cli, args: &ImportArgs) -> Result<ExitCode, Error> {
    let file = &args.file;
    let text = read_bounded(file, args.max_bytes)?;
    let named = |e: Error| match e {
        Error::SnapshotRestore(r) => Error::InvalidInput(format!(
            "{}: not an importable snapshot: {r}; nothing was imported",
            file.display()
        )),
        other => other,
    };
    agent_journal::SessionState::from_json(&text, &agent_journal::SliceRegistry::default())
        .map_err(named)?;
    let journal = Journal::open(&cli.db)?;
    let s = journal.import_snapshot(&text).map_err(named)?;
    if cli.json {
        print_json(&serde_json::json!({"sessions": [s.id().to_string()], "events": s.head()}))?;
    } else {
        outln!(
            "imported session {} ({} events) from the snapshot; `pending` and `resume` work on it",
            s.id(),
            s.head()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `import FILE --format journal`.
fn import_journal(cli: &Cli, journal: &Journal, file: &Path) -> Result<ExitCode, Error> {
    let bar = progress(0, "import");
    let (ids, tail) = journal.import_journal_with(file, |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })?;
    bar.finish_and_clear();
    if let Some(t) = &tail {
        warn(format_args!("{}: {t}", file.display()));
    }
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": ids.iter().map(|i| i.to_string()).collect::<Vec<_>>(),
            "torn_tail": tail.as_ref().map(|t| t.to_string()),
        }))?;
    } else {
        for id in &ids {
            outln!("imported session {id}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` and a newline to `path` (whole or not at all, see
/// [`replace_file`]), or to stdout without one.
pub(crate) fn write_output(path: Option<&Path>, text: &str) -> Result<(), Error> {
    match path {
        Some(p) => replace_file(p, format!("{text}\n").as_bytes()),
        None => {
            outln!("{text}");
            Ok(())
        }
    }
}

/// Replaces the file `path` with `bytes`, whole or not at all, as the
/// library writes an exported journal: the bytes go to a temporary file
/// beside it, `.<name>.<pid>.<n>.tmp`, which is synced and renamed over
/// `path`, then the directory is synced. A failure or a kill leaves the old
/// file unchanged; a temporary left by a kill is removed by the next export
/// to `path` once its process is gone. A symbolic link is followed; a path
/// that is not a regular file (`/dev/stdout`, a pipe) is written directly.
fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    let io = |what: &str, p: &Path, e| Error::Io {
        context: format!("{what} {}", p.display()),
        source: e,
    };
    let target = match std::fs::metadata(path) {
        Ok(m) if !m.is_file() && !m.is_dir() => {
            return std::fs::write(path, bytes).map_err(|e| io("writing", path, e));
        }
        Ok(m) if m.is_file() => {
            std::fs::canonicalize(path).map_err(|e| io("resolving", path, e))?
        }
        _ => path.to_owned(),
    };
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::InvalidInput(format!("{} does not name a file", path.display())))?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    remove_stale(&dir, &name);
    let tmp = dir.join(format!(".{name}.{}.0.tmp", std::process::id()));
    let written = std::fs::File::create(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            if let Ok(old) = std::fs::metadata(&target) {
                f.set_permissions(old.permissions())?;
            }
            f.sync_all()
        })
        .map_err(|e| io("writing", &tmp, e))
        .and_then(|()| std::fs::rename(&tmp, &target).map_err(|e| io("renaming over", &target, e)));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io("syncing directory", &dir, e))
}

/// Removes the temporaries `.<name>.<pid>.<n>.tmp` in `dir` whose process
/// `/proc` says is gone (where there is no `/proc`, they are left).
fn remove_stale(dir: &Path, name: &str) {
    let prefix = format!(".{name}.");
    let (Ok(entries), true) = (std::fs::read_dir(dir), Path::new("/proc/self").exists()) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let pid = file_name
            .to_str()
            .and_then(|n| {
                n.strip_prefix(&prefix)?
                    .strip_suffix(".tmp")?
                    .split_once('.')
            })
            .filter(|(_, n)| n.parse::<u64>().is_ok())
            .and_then(|(pid, _)| pid.parse::<u32>().ok());
        if let Some(pid) = pid
            && pid != std::process::id()
            && !Path::new("/proc").join(pid.to_string()).exists()
            && entry.file_type().is_ok_and(|t| t.is_file())
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Reads `file` as UTF-8 text, refusing it past `limit` bytes (read no
/// further than that, so an endless input costs `limit` at most).
fn read_bounded(file: &Path, limit: u64) -> Result<String, Error> {
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
        return Err(Error::InvalidInput(format!(
            "{}: larger than the limit of {limit} bytes (--max-bytes); nothing was imported",
            file.display()
        )));
    }
    Ok(text)
}

/// The format of `file`, from its content (`import --format auto`).
fn detect(file: &Path, max_bytes: u64) -> Result<ImportFormat, Error> {
    if file.is_dir() {
        return Ok(ImportFormat::ClaudeCode);
    }
    if agent_journal::format::ajournal::looks_like_journal_file(file) {
        return Ok(ImportFormat::Journal);
    }
    let text = read_bounded(file, max_bytes)?;
    let first_line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default();
    if let Ok(serde_json::Value::Object(o)) = serde_json::from_str::<serde_json::Value>(first_line)
    {
        let is = |k: &str| o.contains_key(k);
        if (is("uuid") || is("leafUuid")) && is("type") && !is("role") {
            return Ok(ImportFormat::ClaudeCode);
        }
        if is("role") && (is("evaluation_id") || is("message_id")) {
            return Ok(ImportFormat::Jsonl);
        }
    }
    let whole: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        Error::InvalidInput(format!(
            "{}: not a format import reads (not JSON at line {} column {}: {e}); give --format",
            file.display(),
            e.line(),
            e.column()
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
    let anthropic_blocks = messages.as_array().is_some_and(|list| {
        list.iter().any(|m| {
            m["content"].as_array().is_some_and(|blocks| {
                blocks.iter().any(|b| {
                    matches!(
                        b["type"].as_str(),
                        Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking")
                    ) || b["source"].is_object()
                })
            })
        })
    });
    if anthropic_blocks {
        return Ok(ImportFormat::Anthropic);
    }
    // Responses items: typed items other than chat messages.
    let responses_items = messages.as_array().is_some_and(|list| {
        list.iter().any(|m| {
            m["type"].as_str().is_some_and(|t| t != "message")
                || m["content"].as_array().is_some_and(|parts| {
                    parts.iter().any(|p| {
                        matches!(
                            p["type"].as_str(),
                            Some("input_text" | "output_text" | "input_image")
                        )
                    })
                })
        })
    });
    if responses_items {
        return Ok(ImportFormat::OpenaiResponses);
    }
    let list = messages.as_array().cloned().unwrap_or_default();
    if list.iter().any(|m| m["parts"].is_array()) {
        return Ok(ImportFormat::Gemini);
    }
    // Ollama: calls without ids, arguments as objects, images, tool names.
    let ollama = list.iter().any(|m| {
        m["images"].is_array()
            || m["tool_name"].is_string()
            || m["tool_calls"].as_array().is_some_and(|calls| {
                calls
                    .iter()
                    .any(|c| c["id"].is_null() || c["function"]["arguments"].is_object())
            })
    });
    if ollama {
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

/// `import PATH --format claude-code`: a log file or a directory of them.
fn import_claude_code(cli: &Cli, args: &ImportArgs) -> Result<ExitCode, Error> {
    // Checked before the database is opened (or created): bad input creates
    // nothing.
    let logs = agent_journal::read_claude_code(&args.file, args.max_bytes)?;
    let journal = Journal::open(&cli.db)?;
    let sessions = journal.import_claude_code_logs(logs)?;
    let events: u64 = sessions.iter().map(agent_journal::Session::head).sum();
    if cli.json {
        print_json(&serde_json::json!({
            "sessions": sessions.iter().map(|s| s.id().to_string()).collect::<Vec<_>>(),
            "events": events,
        }))?;
    } else {
        for s in &sessions {
            let threads = s.state().evaluations().iter().count();
            outln!(
                "imported session {} ({} events, {threads} thread(s))",
                s.id(),
                s.head()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
