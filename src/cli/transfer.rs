//! `export` and `import`: moving sessions out of and into a database.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_journal::Error;
use agent_journal::conversation::state_blob::export_state_blob_for;
use agent_journal::provider::ConversationFormat;
use agent_journal::state::{JsonOptions, SliceNames};
use clap::{Args, ValueEnum};

use crate::cli::global::Global;
use crate::cli::open::{at_or_last, open_for_reading, read_session};
use crate::cli::output::{print_json, progress};
use crate::cli::redact::Redactor;
use agent_journal::provider::translate::{TranslationNote, translation_notes};

/// The arguments of `export`.
#[derive(Args, Debug)]
pub(crate) struct ExportArgs {
    #[command(flatten)]
    session: crate::cli::find::SessionRef,
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
    /// Replace secrets (API keys and tokens of ~30 providers, AWS keys,
    /// Bearer and Basic credentials, passwords in URLs and in `password=`
    /// style assignments, private keys, JWTs) with `[REDACTED]` in every
    /// string and JSON object key exported, in every format (two keys that
    /// would clash get `[REDACTED:1]`, `[REDACTED:2]`); says on stderr how
    /// many marks it wrote.
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

/// `export SESSION --format F [--at SEQ] [-o FILE] [--include-logs]`.
pub(crate) fn export(cli: &Global, args: &ExportArgs) -> Result<ExitCode, Error> {
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
                    (
                        body_text(&s, args.at, f, redactor.as_ref())?,
                        translation_notes(&messages, f),
                    )
                }
                None => {
                    let messages = s.latest_conversation(args.at)?;
                    (f.to_text(&messages), translation_notes(&messages, f))
                }
                Some(which) => evaluations_text(&s, args.at, which, f)?,
            };
            report_translation(cli, &notes, redactor.as_ref());
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
    redactor: Option<&Redactor>,
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
            let keys = keys.join(", ");
            let keys = match redactor {
                Some(r) => r.quietly(&keys),
                None => keys,
            };
            crate::cli::open::warn(format_args!(
                "the request fields were recorded for {format} ({keys}); not carried to {}",
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
/// Under `--redact`, the notes are redacted too (not counted: they are not
/// part of the export).
fn report_translation(cli: &Global, notes: &[TranslationNote], redactor: Option<&Redactor>) {
    for n in notes {
        let (kind, detail) = match redactor {
            Some(r) => (r.quietly(&n.kind), r.quietly(&n.detail)),
            None => (n.kind.clone(), n.detail.clone()),
        };
        let n = TranslationNote {
            message: n.message,
            kind,
            detail,
        };
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

/// Writes `text` and a newline to `path` (whole or not at all, see
/// [`agent_journal::maintenance::write_file`]), or to stdout without one.
pub(crate) fn write_output(path: Option<&Path>, text: &str) -> Result<(), Error> {
    match path {
        Some(p) => agent_journal::maintenance::write_file(p, format!("{text}\n").as_bytes()),
        None => {
            outln!("{text}");
            Ok(())
        }
    }
}
