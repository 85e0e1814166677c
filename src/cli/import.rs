//! `import`: sessions into a database from an exported journal, Claude
//! Code logs, a provider's conversation, a state blob or a WINK snapshot;
//! `--format auto` tells them apart.

mod format;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agent_journal::conversation::state_blob::{ImportStateBlob, StateBlob};
use agent_journal::provider::ConversationFormat;
use agent_journal::{Error, Journal};
use clap::{Args, ValueEnum};

use crate::cli::global::Global;
use crate::cli::import_seen;
use crate::cli::open::warn;
use crate::cli::output::{print_json, progress};
use agent_journal::provider::input::Input;
use format::{ImportFormat, detect, read_bounded, too_large};

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
    /// Refuse items, content blocks and Claude Code records of a type the
    /// journal does not model (exit 1, naming the item or line and the
    /// type), instead of keeping them verbatim as opaque items.
    #[arg(long)]
    strict: bool,
    /// Import the file even if a session of the database was imported from
    /// the same bytes (same SHA-256); without it such a file is not
    /// imported again (the command says which session holds it, exit 0).
    #[arg(long)]
    again: bool,
    #[command(flatten)]
    compress: crate::cli::global::CompressArg,
}

/// glibc raises its mmap threshold to the size of each large block freed
/// (up to 32 MiB); past that, the buffers an import makes and frees by the
/// thousand (parsed messages, frames, log records) come from the heap and
/// leave it in holes the process never gives back: the peak resident size
/// of a 141 MB import grew to 120 MB against 54 MB for 37 MB. Pinned at
/// 256 KiB, they are mapped and unmapped: 73 MB. Only this command sets it.
fn pin_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc's allocation policy; it is called
    // before this command allocates anything large.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
    }
}

/// `import FILE --format F`.
pub(crate) fn import(cli: &Global, args: &ImportArgs) -> Result<ExitCode, Error> {
    pin_mmap_threshold();
    let file = &args.file;
    // A FIFO, a device (/dev/zero) or a socket is refused before a byte of
    // it is read (a pipe on /dev/stdin is read once, within --max-bytes); a
    // directory holds Claude Code logs.
    let input = match file.is_dir() {
        true => None,
        false => Some(agent_journal::provider::input::check_input(file)?),
    };
    // The text `auto` read to tell the format, if it read it.
    let mut text = None;
    let format = match args.format {
        ImportFormat::Auto => {
            let (found, read) = detect(file, args.max_bytes)?;
            text = read;
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
    // Standard input is read once, within --max-bytes, whatever the format
    // that reads text: what was read is imported, and its SHA-256 recorded.
    if text.is_none()
        && matches!(input, Some(Input::Stdin))
        && !matches!(format, ImportFormat::Journal | ImportFormat::ClaudeCode)
    {
        text = Some(read_bounded(file, args.max_bytes)?);
    }
    // An exported journal shows a bar of the events written; the others
    // (a conversation is read in passes, then written as it is read again)
    // a spinner.
    if format == ImportFormat::Journal {
        return import_journal(cli, args);
    }
    let spinner = crate::cli::output::working("import");
    let result = import_format(cli, args, format, text);
    spinner.finish_and_clear();
    result
}

fn import_format(
    cli: &Global,
    args: &ImportArgs,
    format: ImportFormat,
    text: Option<String>,
) -> Result<ExitCode, Error> {
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
        ImportFormat::Journal => return import_journal(cli, args),
        ImportFormat::StateBlob => return import_state_blob(cli, args, text),
        ImportFormat::Wink => return import_wink(cli, args, text),
    };
    let name = file
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let in_file = |e| match e {
        Error::InvalidInput(r) if !r.starts_with(&file.display().to_string()) => {
            Error::InvalidInput(format!("{}: {r}", file.display()))
        }
        Error::Unmodeled { at, kind } => Error::Unmodeled {
            at: format!("{}: {at}", file.display()),
            kind,
        },
        other => other,
    };
    // Read and checked before the database is opened (or created): bad
    // input creates nothing. A file is read in passes that hold a message
    // at a time (`ConversationFile`); text read from a pipe is converted
    // from memory.
    let (mut conversation, hash) = match text {
        None => {
            let open = if args.strict {
                agent_journal::transfer::ConversationFile::open_strict
            } else {
                agent_journal::transfer::ConversationFile::open
            };
            let conversation = open(file, f, args.max_bytes).map_err(in_file)?;
            (conversation, import_seen::file_hash(file)?)
        }
        Some(text) => {
            let hash = import_seen::bytes_hash(text.as_bytes());
            let conversation = agent_journal::transfer::ConversationFile::from_bytes(
                text.into_bytes(),
                f,
                args.strict,
            )
            .map_err(in_file)?;
            (conversation, Some(hash))
        }
    };
    let journal = crate::cli::open::open_for_import(&cli.db, args.compress.compress)?;
    if let Some(h) = &hash {
        if let Some(id) = already(&journal, args, h)? {
            import_seen::say_already(cli.json, file, &[id], import_seen::SAME_BYTES)?;
            return Ok(ExitCode::SUCCESS);
        }
        conversation.label(import_seen::LABEL, h.clone());
    }
    let (id, events) = journal
        .import_conversation_file(&conversation, "import", &name)
        .map_err(in_file)?;
    imported(cli, id, events)
}

/// The session imported from the same bytes (SHA-256 `hash`), unless
/// `--again`.
fn already(
    journal: &Journal,
    args: &ImportArgs,
    hash: &str,
) -> Result<Option<agent_journal::SessionId>, Error> {
    if args.again {
        return Ok(None);
    }
    Ok(import_seen::imported_as(journal, &[hash])?.pop().flatten())
}

/// Says what an import made.
fn imported(cli: &Global, id: agent_journal::SessionId, events: u64) -> Result<ExitCode, Error> {
    if cli.json {
        print_json(&serde_json::json!({"sessions": [id.to_string()], "events": events}))?;
    } else {
        outln!("imported session {id} ({events} events)");
    }
    Ok(ExitCode::SUCCESS)
}

/// `import FILE --format state-blob`: decoded before the database is
/// opened (a blob that does not decode creates nothing), then imported as
/// one atomic write. `--max-bytes` is the blob's size limit.
fn import_state_blob(
    cli: &Global,
    args: &ImportArgs,
    text: Option<String>,
) -> Result<ExitCode, Error> {
    let file = &args.file;
    let hash = match &text {
        Some(text) => Some(import_seen::bytes_hash(text.as_bytes())),
        None => import_seen::file_hash(file)?,
    };
    // A file is read a message at a time (a message over the record limit
    // is refused before more of it is read); text read from a pipe is
    // decoded whole.
    let decoded = match text {
        Some(text) => {
            let limit = usize::try_from(args.max_bytes).unwrap_or(usize::MAX);
            StateBlob::decode(text.as_bytes(), None, limit)
        }
        None => StateBlob::read(file, None, args.max_bytes).map_err(|e| match e {
            Error::InvalidInput(r) if !r.starts_with(&file.display().to_string()) => {
                Error::InvalidInput(format!("{}: {r}", file.display()))
            }
            other => other,
        })?,
    };
    let blob = decoded.map_err(|d| {
        Error::InvalidInput(format!(
            "{}: not an importable state blob ({}): {d}; nothing was imported",
            file.display(),
            d.kind()
        ))
    })?;
    let journal = crate::cli::open::open_for_import(&cli.db, args.compress.compress)?;
    let mut options = ImportStateBlob {
        title: file.file_stem().map(|n| n.to_string_lossy().into_owned()),
        ..ImportStateBlob::default()
    };
    // A conversation the engine makes has no labels of ours: the hash is
    // in its metadata, where `imported_as` looks too.
    if let Some(h) = hash {
        if let Some(id) = already(&journal, args, &h)? {
            import_seen::say_already(cli.json, file, &[id], import_seen::SAME_BYTES)?;
            return Ok(ExitCode::SUCCESS);
        }
        options
            .metadata
            .insert(import_seen::LABEL.into(), serde_json::Value::String(h));
    }
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
fn import_wink(cli: &Global, args: &ImportArgs, text: Option<String>) -> Result<ExitCode, Error> {
    let file = &args.file;
    let named = |e: Error| match e {
        Error::SnapshotRestore(r) => Error::InvalidInput(format!(
            "{}: not an importable snapshot: {r}; nothing was imported",
            file.display()
        )),
        other => other,
    };
    // Read once, before the database is opened: a file straight into its
    // JSON (no text held), within --max-bytes.
    let registry = agent_journal::state::SliceRegistry::default();
    let (state, hash) = match text {
        Some(text) => (
            agent_journal::state::SessionState::from_json(&text, &registry),
            Some(import_seen::bytes_hash(text.as_bytes())),
        ),
        None => {
            use std::io::Read;
            let f = std::fs::File::open(file).map_err(|e| Error::Io {
                context: format!("reading {}", file.display()),
                source: e,
            })?;
            if f.metadata().map_or(0, |m| m.len()) > args.max_bytes {
                return Err(too_large(file, args.max_bytes));
            }
            // A pipe is cut at the limit: its JSON then ends too soon.
            let state = agent_journal::state::SessionState::from_json_reader(
                f.take(args.max_bytes),
                &registry,
            );
            // Hashed once it reads (a second pass over a regular file).
            let hash = match &state {
                Ok(_) => import_seen::file_hash(file)?,
                Err(_) => None,
            };
            (state, hash)
        }
    };
    let state = state.map_err(named)?;
    let journal = crate::cli::open::open_for_import(&cli.db, args.compress.compress)?;
    let mut labels = Vec::new();
    if let Some(h) = hash {
        if let Some(id) = already(&journal, args, &h)? {
            import_seen::say_already(cli.json, file, &[id], import_seen::SAME_BYTES)?;
            return Ok(ExitCode::SUCCESS);
        }
        labels.push((import_seen::LABEL.to_owned(), h));
    }
    let s = journal.import_snapshot_labelled(&state, &labels)?;
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

/// `import FILE --format journal`. The import keeps the sessions' ids, so
/// a file whose sessions are all here with the same events was imported
/// already (or exported from here): said so, exit 0, unless `--again`
/// (then the import refuses the ids it finds, as it always did).
fn import_journal(cli: &Global, args: &ImportArgs) -> Result<ExitCode, Error> {
    let file = &args.file;
    let journal = crate::cli::open::open_for_import(&cli.db, args.compress.compress)?;
    let bar = progress(0, "import");
    let made = journal.import_journal_with(file, |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let (ids, tail) = match made {
        Err(e @ Error::InvalidInput(_)) if !args.again => {
            return match import_seen::journal_already_in(&journal, file) {
                Some(ids) => {
                    import_seen::say_already(cli.json, file, &ids, import_seen::SAME_SESSIONS)?;
                    Ok(ExitCode::SUCCESS)
                }
                None => Err(e),
            };
        }
        other => other?,
    };
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

/// `import PATH --format claude-code`: a log file or a directory of them.
fn import_claude_code(cli: &Global, args: &ImportArgs) -> Result<ExitCode, Error> {
    // Checked before the database is opened (or created): bad input creates
    // nothing.
    let logs = agent_journal::transfer::read_claude_code_with(
        &args.file,
        args.max_bytes,
        &mut |p, why| {
            warn(format_args!("{}: skipped: {why}", p.display()));
        },
    )?;
    for log in &logs {
        if args.strict {
            log.check_strict()?;
        }
        for w in log.warnings() {
            warn(format_args!("{}: {w}", log.name()));
        }
    }
    let mut hashes = Vec::with_capacity(logs.len());
    for log in &logs {
        hashes.push(match log.path() {
            Some(p) => import_seen::file_hash(p)?,
            None => None,
        });
    }
    let journal = crate::cli::open::open_for_import(&cli.db, args.compress.compress)?;
    let known: Vec<&str> = hashes.iter().flatten().map(String::as_str).collect();
    let found = if args.again {
        vec![None; known.len()]
    } else {
        import_seen::imported_as(&journal, &known)?
    };
    let mut found = found.into_iter();
    let (mut fresh, mut already) = (Vec::new(), Vec::new());
    for (mut log, hash) in logs.into_iter().zip(hashes) {
        let Some(hash) = hash else {
            fresh.push(log);
            continue;
        };
        match found.next().flatten() {
            Some(id) => already.push((log, id)),
            None => {
                log.label(import_seen::LABEL, hash);
                fresh.push(log);
            }
        }
    }
    let logs = fresh;
    let sessions = if logs.is_empty() {
        Vec::new()
    } else {
        journal.import_claude_code_files(&logs)?
    };
    let events: u64 = sessions.iter().map(|(_, n)| n).sum();
    if cli.json {
        let mut out = serde_json::json!({
            "sessions": sessions.iter().map(|(id, _)| id.to_string()).collect::<Vec<_>>(),
            "events": events,
        });
        if !already.is_empty() {
            out["already_imported"] = already
                .iter()
                .map(|(log, id)| serde_json::json!({"file": log.name(), "session": id.to_string()}))
                .collect();
        }
        print_json(&out)?;
    } else {
        for (log, id) in &already {
            let path = log.path().map(Path::to_path_buf).unwrap_or_default();
            outln!(
                "{}: already imported as {id} {}",
                path.display(),
                import_seen::SAME_BYTES
            );
        }
        for ((id, n), log) in sessions.iter().zip(&logs) {
            outln!(
                "imported session {id} ({n} events, {} thread(s))",
                log.threads().len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
