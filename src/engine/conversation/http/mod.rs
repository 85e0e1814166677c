//! Provider adapters over HTTP (feature `http`, on by default through
//! `cli`): [`OpenAiAdapter`] for OpenAI-compatible chat completions (OpenAI,
//! and local servers such as Ollama, vLLM or llama.cpp through the base
//! URL) and [`AnthropicAdapter`] for Anthropic's Messages API. Both are
//! blocking (the engine is synchronous), stream with server-sent events,
//! and turn every failure into a typed [`ProviderError`](super::ProviderError)
//! (`network`, `timeout`, `rate_limit`, `auth`, `server`, `client`, `parse`)
//! with the HTTP status, the provider's message and code, its raw error body
//! and its request id. No response, however malformed, cut or large, makes
//! them panic; bodies are read up to [`HttpOptions::max_body_bytes`].
//!
//! The parsing is pure and public ([`parse_openai_response`],
//! [`parse_openai_stream`], [`parse_anthropic_response`],
//! [`parse_anthropic_stream`], [`SseParser`], ...), for tests and fuzzing.
//!
//! ```no_run
//! use std::sync::Arc;
//! use agent_journal::Journal;
//! use agent_journal::conversation::http::{HttpOptions, OpenAiAdapter};
//! use agent_journal::conversation::{
//!     ConversationEngine, ConversationEngineConfig, JournalConversationStore,
//! };
//!
//! // A local Ollama server speaking the OpenAI protocol.
//! let ollama = OpenAiAdapter::new(HttpOptions::new("http://127.0.0.1:11434/v1")).with_id("ollama");
//! let store = Arc::new(JournalConversationStore::new(Journal::memory()));
//! let engine = ConversationEngine::new(
//!     ConversationEngineConfig::new("assistant", store).provider(Arc::new(ollama), "llama3.2"),
//! );
//! # let _ = engine;
//! ```

mod anthropic;
mod anthropic_response;
mod anthropic_stream;
mod openai;
mod openai_response;
mod openai_stream;
mod options;
mod sse;
mod transport;

pub use anthropic::{
    ANTHROPIC_VERSION, AnthropicAdapter, DEFAULT_MAX_TOKENS, anthropic_request_body,
};
pub use anthropic_response::{parse_anthropic_error, parse_anthropic_response};
pub use anthropic_stream::{AnthropicStream, parse_anthropic_stream};
pub use openai::{OpenAiAdapter, openai_request_body};
pub use openai_response::{parse_openai_error, parse_openai_response};
pub use openai_stream::{OpenAiStream, parse_openai_stream};
pub use options::{ANTHROPIC_BASE_URL, DEFAULT_MAX_BODY_BYTES, HttpOptions, OPENAI_BASE_URL};
pub use sse::{SseEvent, SseParser};

fn _assert_send_sync<T: Send + Sync>() {}
fn _adapters_are_send_sync() {
    _assert_send_sync::<OpenAiAdapter>();
    _assert_send_sync::<AnthropicAdapter>();
}
