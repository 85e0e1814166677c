//! `chat`: a real conversation with an OpenAI-compatible or Anthropic
//! provider over HTTP, one user message per line of stdin, every step
//! recorded in the journal.

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent_journal::Error;
use agent_journal::conversation::http::{AnthropicAdapter, HttpOptions, OpenAiAdapter};
use agent_journal::conversation::{
    ConversationEngine, ConversationEngineConfig, ConversationHooks, ConversationId,
    ConversationMessage, ConversationTurn, CreateConversation, InterruptedTurns,
    JournalConversationStore, Metadata, ProviderAdapter, ProviderStreamChunk, RunTurn,
};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::cli::find::session_arg;
use crate::cli::global::Global;
use crate::cli::open::find_session;
use crate::cli::output::print_json;

/// The providers `chat` speaks to.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChatProvider {
    /// OpenAI chat completions, or any compatible server (Ollama, vLLM,
    /// llama.cpp): `OPENAI_BASE_URL`, `OPENAI_API_KEY`.
    Openai,
    /// Anthropic Messages: `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`.
    Anthropic,
}

/// The arguments of `chat`.
#[derive(Args, Debug)]
pub(crate) struct ChatArgs {
    /// The provider.
    #[arg(long, value_enum)]
    provider: ChatProvider,
    /// The model.
    #[arg(long)]
    model: String,
    /// Continue this conversation (its interrupted turns are finished first).
    #[arg(long, value_name = "ID", value_parser = session_arg)]
    conversation: Option<String>,
    /// The system prompt of a new conversation.
    #[arg(long)]
    system: Option<String>,
    /// The provider's base URL (default: the environment's, else the provider's own).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// Stream the answers (printed as they arrive).
    #[arg(long)]
    stream: bool,
    /// Seconds a provider call may take.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    #[command(flatten)]
    compress: crate::cli::global::CompressArg,
}

/// Prints streamed text as it arrives.
struct Print;

impl ConversationHooks for Print {
    fn on_chunk(&self, _: &ConversationTurn, chunk: &ProviderStreamChunk) {
        use std::io::Write;
        if let Some(Value::String(s)) = &chunk.delta {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
        }
    }
}

fn adapter(args: &ChatArgs) -> Arc<dyn ProviderAdapter> {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (base, key, mut options) = match args.provider {
        ChatProvider::Openai => (
            env("OPENAI_BASE_URL"),
            env("OPENAI_API_KEY"),
            HttpOptions::openai(),
        ),
        ChatProvider::Anthropic => (
            env("ANTHROPIC_BASE_URL"),
            env("ANTHROPIC_API_KEY"),
            HttpOptions::anthropic(),
        ),
    };
    if let Some(url) = args.base_url.clone().or(base) {
        options = HttpOptions {
            base_url: url,
            ..options
        };
    }
    if let Some(key) = key {
        options = options.api_key(key);
    }
    let options = options.timeout(Duration::from_secs(args.timeout));
    match args.provider {
        ChatProvider::Openai => Arc::new(OpenAiAdapter::new(options)),
        ChatProvider::Anthropic => Arc::new(AnthropicAdapter::new(options)),
    }
}

/// `chat --provider P --model M [--conversation ID] [--system TEXT] [--stream]`.
pub(crate) fn chat(cli: &Global, args: &ChatArgs) -> Result<ExitCode, Error> {
    let journal = crate::cli::open::open_creating(&cli.db, args.compress.compress)?;
    let store = Arc::new(JournalConversationStore::new(journal.clone()));
    let adapter = adapter(args);
    let mut config =
        ConversationEngineConfig::new("chat", store.clone()).provider(adapter, args.model.clone());
    config.streaming = args.stream && !cli.json;
    if config.streaming {
        config.hooks = Some(Arc::new(Print));
    }
    let engine = ConversationEngine::new(config);
    let id: ConversationId = match &args.conversation {
        Some(text) => {
            let id = find_session(&journal, text)?.id();
            store.session(id)?;
            // Finished before new input, by the library's own rule (a
            // turn that cannot be is settled by `run_turn`'s default).
            match engine.settle_interrupted(id, InterruptedTurns::Resume) {
                Ok(done) => {
                    for t in done {
                        eprintln!("finished interrupted turn {}: {}", t.id, t.status.as_str());
                    }
                }
                Err(e) => eprintln!("error: {}", e.to_string().replace('\n', " ")),
            }
            id
        }
        None => {
            let mut metadata = Metadata::new();
            metadata.insert("model".into(), json!(args.model));
            let initial = args
                .system
                .iter()
                .map(ConversationMessage::system)
                .collect();
            let c = engine.create_conversation(CreateConversation {
                title: Some(format!("chat with {}", args.model)),
                initial_messages: initial,
                metadata,
                ..CreateConversation::default()
            })?;
            if !cli.json {
                eprintln!("conversation {} (one message per line; end with EOF)", c.id);
            }
            c.id
        }
    };
    let mut turns = Vec::new();
    let mut failed = false;
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|source| Error::Io {
            context: "reading stdin".into(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        engine.append_messages(id, &[ConversationMessage::user(line)])?;
        match engine.run_turn(id, RunTurn::default()) {
            Ok(turn) => {
                let reply: Vec<String> = turn.output_messages.iter().map(|m| m.text()).collect();
                if !cli.json {
                    if engine.config().streaming {
                        outln!();
                    } else {
                        outln!("{}", reply.join("\n"));
                    }
                }
                turns.push(json!({"turn": turn.id.to_string(), "status": "succeeded", "reply": reply.join("\n"), "tokens": turn.total_tokens()}));
            }
            Err(e @ Error::TurnFailed { .. }) => {
                failed = true;
                eprintln!("error: {}", e.to_string().replace('\n', " "));
                turns.push(json!({"status": "failed", "error": e.to_string()}));
            }
            Err(e) => return Err(e),
        }
    }
    if cli.json {
        print_json(&json!({"conversation": id.to_string(), "turns": turns}))?;
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
