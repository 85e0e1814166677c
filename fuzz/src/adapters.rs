//! The properties of the HTTP adapters' pure parsers
//! (`agent_journal::conversation::http`), shared by the `adapter_openai`
//! and `adapter_anthropic` targets. The same bytes go to the body parser,
//! the error parser and the stream parser:
//!
//! - nothing panics; every error has one of the documented categories;
//! - an accepted body is one assistant message, and its `raw`, serialized
//!   and parsed again, gives the same result;
//! - a stream parses the same whole and cut in three pieces anywhere (the
//!   cut points come from the data), with the same chunks, the last ones
//!   being "message complete" then the usage (if any);
//! - an accepted stream's `raw` (the message it amounts to), read as a
//!   body, gives the same result.

use agent_journal::conversation::http::{
    AnthropicStream, OpenAiStream, parse_anthropic_error, parse_anthropic_response,
    parse_anthropic_stream, parse_openai_error, parse_openai_response, parse_openai_stream,
};
use agent_journal::conversation::{Metadata, ProviderChatResult, ProviderError, ProviderStreamChunk};
use agent_journal::{Role, TokenUsage};
use serde_json::Value;

type Res = Result<ProviderChatResult, ProviderError>;

/// One provider's parsers.
pub struct Parsers {
    /// A whole response body.
    pub body: fn(&[u8]) -> Res,
    /// A whole stream.
    pub stream: fn(&[u8]) -> Res,
    /// A stream fed in parts, chunks to the callback.
    pub stream_parts: fn(&[&[u8]], &mut dyn FnMut(&ProviderStreamChunk)) -> Res,
    /// An error body with a status.
    pub error: fn(u16, &[u8]) -> ProviderError,
    /// The stream's text deltas, joined, are the message's text whenever
    /// there is one (OpenAI: the text is only made of deltas).
    pub deltas_are_text: bool,
}

/// OpenAI's parsers.
pub fn openai() -> Parsers {
    fn parts(parts: &[&[u8]], on: &mut dyn FnMut(&ProviderStreamChunk)) -> Res {
        let mut s = OpenAiStream::new();
        for p in parts {
            s.push(p, on)?;
        }
        s.finish(on)
    }
    Parsers {
        body: parse_openai_response,
        stream: parse_openai_stream,
        stream_parts: parts,
        error: parse_openai_error,
        deltas_are_text: true,
    }
}

/// Anthropic's parsers.
pub fn anthropic() -> Parsers {
    fn parts(parts: &[&[u8]], on: &mut dyn FnMut(&ProviderStreamChunk)) -> Res {
        let mut s = AnthropicStream::new();
        for p in parts {
            s.push(p, on)?;
        }
        s.finish(on)
    }
    Parsers {
        body: parse_anthropic_response,
        stream: parse_anthropic_stream,
        stream_parts: parts,
        error: parse_anthropic_error,
        deltas_are_text: false,
    }
}

const CATEGORIES: [&str; 7] = ["network", "timeout", "rate_limit", "auth", "server", "client", "parse"];

/// What a result says, but the message's fresh id and time and the ids
/// generated for calls that had none (`raw` shows the ids that were sent).
type Key = (String, Vec<(String, String)>, Option<TokenUsage>, Metadata, Option<String>, Option<Value>);

fn key(r: &ProviderChatResult) -> Key {
    assert_eq!(r.messages.len(), 1, "one message");
    let m = &r.messages[0];
    assert_eq!(m.role, Role::Assistant);
    let calls = m.tool_calls.iter().map(|c| (c.name.clone(), c.arguments.clone())).collect();
    (m.text(), calls, r.usage.clone(), r.response_metadata.clone(), m.provider_message_id.clone(), r.raw.clone())
}

fn check_error(e: &ProviderError) {
    assert!(CATEGORIES.contains(&e.category.as_str()), "category {:?}", e.category);
    assert!(!e.message.is_empty(), "an error says something");
}

/// Its raw, serialized and read as a body, gives the same result.
fn check_raw(r: &ProviderChatResult, body: fn(&[u8]) -> Res) {
    let raw = r.raw.as_ref().expect("an accepted response keeps its raw");
    let again = body(raw.to_string().as_bytes())
        .unwrap_or_else(|e| panic!("the raw of an accepted response is refused: {e:?}\n{raw}"));
    assert_eq!(key(&again), key(r), "the raw read again differs");
}

/// All the properties, for `data`.
pub fn check(data: &[u8], p: &Parsers) {
    match (p.body)(data) {
        Ok(r) => check_raw(&r, p.body),
        Err(e) => check_error(&e),
    }
    let status = 100 + data.len() as u16 % 500;
    let e = (p.error)(status, data);
    check_error(&e);
    assert_eq!(e.status, Some(status));

    let whole = (p.stream)(data);
    let seed = data.iter().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(*b as usize));
    let n = data.len();
    let (mut a, mut b) = (seed % (n + 1), (seed / (n + 1)) % (n + 1));
    if a > b {
        std::mem::swap(&mut a, &mut b);
    }
    let mut chunks = Vec::new();
    let parts = (p.stream_parts)(&[&data[..a], &data[a..b], &data[b..]], &mut |c| chunks.push(c.clone()));
    match (&whole, &parts) {
        (Ok(w), Ok(s)) => {
            assert_eq!(key(w), key(s), "cut at {a} and {b}: another result");
            check_raw(w, p.body);
            let last = chunks.len() - usize::from(s.usage.is_some()) - 1;
            assert!(chunks[last].is_message_complete, "the message is complete last");
            assert_eq!(chunks.iter().filter(|c| c.is_message_complete).count(), 1);
            if s.usage.is_some() {
                assert_eq!(chunks[last + 1].usage, s.usage, "then the usage");
            }
            let deltas: String = chunks
                .iter()
                .filter_map(|c| c.delta.as_ref().and_then(Value::as_str))
                .collect();
            if p.deltas_are_text && !deltas.is_empty() {
                assert_eq!(deltas, s.messages[0].text(), "the deltas are the text");
            }
        }
        (Err(w), Err(s)) => {
            check_error(w);
            assert_eq!((&w.category, &w.message), (&s.category, &s.message), "cut at {a} and {b}");
        }
        (w, s) => panic!("whole: {w:?}\ncut at {a} and {b}: {s:?}"),
    }
}
