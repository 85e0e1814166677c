//! The HTTP side the adapters share: one `ureq` agent per adapter, the POST,
//! bounded body reads, and the mapping of transport failures and error
//! bodies to [`ProviderError`]s.

use std::io::Read;

use serde_json::Value;

use super::options::HttpOptions;
use crate::engine::conversation::adapter::{
    ProviderChatRequest, ProviderChatResult, ProviderError, ProviderStreamChunk,
};

/// Bytes of an error body kept (the rest is dropped unread).
pub(super) const MAX_ERROR_BODY: u64 = 1024 * 1024;

/// Characters of a non-JSON body quoted in an error message.
const QUOTED_CHARS: usize = 200;

/// An agent and the options it was built with.
pub(super) struct Transport {
    pub(super) options: HttpOptions,
    agent: ureq::Agent,
}

/// A response whose headers are in and whose body is still to be read.
pub(super) struct Reply {
    /// The HTTP status.
    pub(super) status: u16,
    /// `x-request-id` or `request-id`.
    pub(super) request_id: Option<String>,
    /// The `content-type`, lowercased.
    pub(super) content_type: String,
    body: ureq::Body,
    limit: u64,
}

impl Transport {
    /// An agent for `options`: their timeouts, no redirects (a POST is not
    /// replayed elsewhere), statuses returned rather than raised.
    pub(super) fn new(options: HttpOptions) -> Self {
        let mut config = ureq::Agent::config_builder();
        if is_loopback(&options.base_url) {
            config = config.proxy(None);
        }
        let agent: ureq::Agent = config
            .http_status_as_error(false)
            .max_redirects(0)
            .timeout_connect(Some(options.connect_timeout))
            .timeout_global(Some(options.timeout))
            .user_agent(concat!("agent-journal/", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        Self { options, agent }
    }

    /// POSTs `body` as JSON to `{base_url}{path}` with `headers` and the
    /// options' extra headers.
    ///
    /// # Errors
    /// A [`ProviderError`] of category `timeout`, `network` or `client` (a
    /// URL or header that cannot be sent) when no response came.
    pub(super) fn post(
        &self,
        path: &str,
        headers: &[(&str, String)],
        body: &Value,
    ) -> Result<Reply, ProviderError> {
        let url = format!("{}{path}", self.options.base_url.trim_end_matches('/'));
        let mut request = self.agent.post(&url).content_type("application/json");
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        for (name, value) in &self.options.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let bytes = serde_json::to_vec(body).map_err(|e| {
            ProviderError::new("client", format!("the request does not serialize: {e}"))
        })?;
        let response = request
            .send(&bytes[..])
            .map_err(|e| transport_error(e, &url))?;
        let (parts, body) = response.into_parts();
        let header = |name: &str| {
            parts
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        Ok(Reply {
            status: parts.status.as_u16(),
            request_id: header("x-request-id").or_else(|| header("request-id")),
            content_type: header("content-type")
                .unwrap_or_default()
                .to_ascii_lowercase(),
            body,
            limit: self.options.max_body_bytes,
        })
    }
}

impl Reply {
    /// True for a 2xx status.
    pub(super) fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The whole body, at most the options' `max_body_bytes`.
    ///
    /// # Errors
    /// `parse` past the limit, `timeout` or `network` when the read fails
    /// (a connection closed before the announced length, say); each with
    /// the status and the request id.
    pub(super) fn read_all(&mut self) -> Result<Vec<u8>, ProviderError> {
        let limit = self.limit;
        let read = self.body.with_config().limit(limit).read_to_vec();
        read.map_err(|e| self.annotate(read_error(e, limit)))
    }

    /// The first [`MAX_ERROR_BODY`] bytes of the body, whatever can be read
    /// of them (an error body is evidence, not data to trust).
    pub(super) fn read_error_body(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut reader = self.body.as_reader().take(MAX_ERROR_BODY);
        let mut buf = [0u8; 8192];
        loop {
            match reader.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        out
    }

    /// Feeds the body to `sink` as it arrives, at most the options'
    /// `max_body_bytes` in all.
    ///
    /// # Errors
    /// The sink's error, or the read's (as [`read_all`](Self::read_all)),
    /// with the status and the request id.
    pub(super) fn stream(
        &mut self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), ProviderError>,
    ) -> Result<(), ProviderError> {
        let limit = self.limit;
        let mut buf = vec![0u8; 16 * 1024];
        let mut reader = self.body.with_config().limit(limit).reader();
        let outcome = loop {
            match reader.read(&mut buf) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    if let Err(e) = sink(&buf[..n]) {
                        break Err(e);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(read_error(ureq::Error::from(e), limit)),
            }
        };
        drop(reader);
        outcome.map_err(|e| self.annotate(e))
    }

    /// `e` with this reply's status and request id.
    pub(super) fn annotate(&self, mut e: ProviderError) -> ProviderError {
        e.status = e.status.or(Some(self.status));
        if e.request_id.is_none() {
            e.request_id.clone_from(&self.request_id);
        }
        e
    }
}

/// True when `url`'s host is `localhost`, `127.x.y.z` or `[::1]`.
fn is_loopback(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.starts_with('[') {
        host.split_once(']')
            .map_or(host, |(h, _)| h)
            .trim_start_matches('[')
    } else {
        host.split(':').next().unwrap_or_default()
    };
    host.eq_ignore_ascii_case("localhost")
        || host == "::1"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A failed request (no response) as a provider error.
fn transport_error(e: ureq::Error, url: &str) -> ProviderError {
    let category = match &e {
        ureq::Error::Timeout(_) => "timeout",
        ureq::Error::Io(io) if is_timeout(io) => "timeout",
        ureq::Error::Http(_) | ureq::Error::BadUri(_) | ureq::Error::RequireHttpsOnly(_) => {
            "client"
        }
        _ => "network",
    };
    ProviderError::new(category, format!("POST {url}: {e}"))
}

/// A failed body read as a provider error.
fn read_error(e: ureq::Error, limit: u64) -> ProviderError {
    match &e {
        ureq::Error::BodyExceedsLimit(_) => ProviderError::new(
            "parse",
            format!("the response body is larger than the limit of {limit} bytes"),
        ),
        ureq::Error::Timeout(_) => {
            ProviderError::new("timeout", format!("reading the response: {e}"))
        }
        ureq::Error::Io(io) if is_timeout(io) => {
            ProviderError::new("timeout", format!("reading the response: {e}"))
        }
        _ => ProviderError::new(
            "network",
            format!("the response was cut off while being read: {e}"),
        ),
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

/// The category of an HTTP error status: `auth` (401, 403), `rate_limit`
/// (429), `server` (5xx), else `client`.
pub(super) fn status_category(status: u16) -> &'static str {
    match status {
        401 | 403 => "auth",
        429 => "rate_limit",
        500..=599 => "server",
        _ => "client",
    }
}

/// The category of an error type or code a provider sends in a body or a
/// stream (`rate_limit_error`, `overloaded_error`, `invalid_api_key`, ...).
pub(super) fn type_category(kind: &str) -> &'static str {
    let k = kind.to_ascii_lowercase();
    if k.contains("rate_limit") || k.contains("quota") {
        "rate_limit"
    } else if k.contains("auth") || k.contains("permission") || k.contains("api_key") {
        "auth"
    } else if k.contains("timeout") {
        "timeout"
    } else if k.contains("invalid_request") || k.contains("not_found") {
        "client"
    } else {
        "server"
    }
}

/// A body as JSON, or as a JSON string (lossy UTF-8) when it is not JSON;
/// none when empty.
pub(super) fn raw_body(body: &[u8]) -> Option<Value> {
    if body.is_empty() {
        return None;
    }
    Some(serde_json::from_slice(body).unwrap_or_else(|_| lossy(body)))
}

/// The body as a JSON string, invalid UTF-8 replaced.
pub(super) fn lossy(body: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(body).into_owned())
}

/// The start of a body, for a message.
pub(super) fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut quoted: String = text.chars().take(QUOTED_CHARS).collect();
    if text.chars().nth(QUOTED_CHARS).is_some() {
        quoted.push_str("...");
    }
    quoted
}

/// A string member, or a number member as text.
pub(super) fn text_of(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The error of a failed HTTP call: the category of `status`, the message
/// and code `extract` finds in the body (falling back to the status and
/// the body's start), and the raw body.
pub(super) fn http_error(
    status: u16,
    body: &[u8],
    extract: fn(&Value) -> (Option<String>, Option<String>),
) -> ProviderError {
    let raw = raw_body(body);
    let (message, code) = match &raw {
        Some(v @ Value::Object(_)) => extract(v),
        _ => (None, None),
    };
    // A blank message says nothing: the status and body say more.
    let message = message.filter(|m| !m.trim().is_empty());
    let message = message.unwrap_or_else(|| {
        if body.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {}", quote(body))
        }
    });
    let mut e = ProviderError::new(status_category(status), message);
    e.status = Some(status);
    e.code = code;
    e.raw = raw;
    e
}

/// A count of tokens: a non-negative integer, else 0.
pub(super) fn count(v: Option<&Value>) -> u64 {
    v.and_then(Value::as_u64).unwrap_or(0)
}

/// A parse error about `what`.
pub(super) fn parse_error(what: impl Into<String>) -> ProviderError {
    ProviderError::new("parse", what)
}

/// A body that is not the JSON expected: a parse error with the body raw.
pub(super) fn bad_body(reason: impl std::fmt::Display, body: &[u8]) -> ProviderError {
    let mut e = parse_error(format!("the response is not valid: {reason}"));
    e.raw = raw_body(body);
    e
}

/// The error a streamed call ends with when the stream stops before its end
/// marker: `network` (the connection dropped), retryable.
pub(super) fn cut_stream(marker: &str) -> ProviderError {
    ProviderError::new(
        "network",
        format!("the stream ended before {marker}: the response was cut off"),
    )
}

/// Gives a result that came in one piece to `on_chunk` as the default
/// [`ProviderAdapter::stream_chat`](crate::engine::conversation::adapter::ProviderAdapter::stream_chat)
/// does: each message as one complete chunk, then the usage.
pub(super) fn emit_whole(
    result: &ProviderChatResult,
    on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
) {
    for m in &result.messages {
        on_chunk(&ProviderStreamChunk {
            delta: Some(m.content.clone()),
            is_message_complete: true,
            ..ProviderStreamChunk::default()
        });
    }
    if result.usage.is_some() {
        on_chunk(&ProviderStreamChunk {
            usage: result.usage.clone(),
            ..ProviderStreamChunk::default()
        });
    }
}

/// What differs between two providers' wire protocols; the call itself
/// ([`call`]) is the same for both.
pub(super) trait Wire {
    /// The path of the call under the base URL (`"/chat/completions"`).
    const PATH: &'static str;
    /// The incremental parser of a streamed reply.
    type Stream: WireStream;
    /// The request body (`stream` sets the provider's streaming flags).
    fn body(request: &ProviderChatRequest, stream: bool) -> Value;
    /// A whole response body.
    fn parse_response(body: &[u8]) -> Result<ProviderChatResult, ProviderError>;
    /// The error of a failed status.
    fn parse_error(status: u16, body: &[u8]) -> ProviderError;
}

/// A streamed reply's parser: bytes in, chunks out, the result at the end.
pub(super) trait WireStream {
    /// A parser at the start of a stream.
    fn start() -> Self;
    /// Feeds bytes as they arrive.
    fn feed(
        &mut self,
        bytes: &[u8],
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<(), ProviderError>;
    /// The result once the stream ended.
    fn end(
        self,
        on_chunk: &mut dyn FnMut(&ProviderStreamChunk),
    ) -> Result<ProviderChatResult, ProviderError>;
}

/// One call of protocol `W` over `transport` with `headers`: streamed when
/// `on_chunk` is given (a server that ignores `stream` and answers in one
/// piece is read whole, its message delivered as one chunk), the provider's
/// error for a failed status, every error annotated with the status and
/// request id, and the request id in the result.
pub(super) fn call<W: Wire>(
    transport: &Transport,
    headers: &[(&'static str, String)],
    request: &ProviderChatRequest,
    on_chunk: Option<&mut dyn FnMut(&ProviderStreamChunk)>,
) -> Result<ProviderChatResult, ProviderError> {
    let body = W::body(request, on_chunk.is_some());
    let mut reply = transport.post(W::PATH, headers, &body)?;
    if !reply.is_success() {
        let error = reply.read_error_body();
        return Err(reply.annotate(W::parse_error(reply.status, &error)));
    }
    let mut result = match on_chunk {
        Some(on_chunk) if !reply.content_type.starts_with("application/json") => {
            let mut stream = W::Stream::start();
            reply.stream(&mut |bytes| stream.feed(bytes, on_chunk))?;
            stream.end(on_chunk).map_err(|e| reply.annotate(e))?
        }
        on_chunk => {
            let bytes = reply.read_all()?;
            let result = W::parse_response(&bytes).map_err(|e| reply.annotate(e))?;
            if let Some(on_chunk) = on_chunk {
                emit_whole(&result, on_chunk);
            }
            result
        }
    };
    result.request_id.clone_from(&reply.request_id);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for url in [
            "http://127.0.0.1:11434/v1",
            "http://localhost/v1",
            "https://user:pw@LOCALHOST:8000",
            "http://[::1]:8080/v1",
            "http://127.1.2.3",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://10.0.0.1/v1",
            "http://[::2]/",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }

    #[test]
    fn categories() {
        let got: Vec<_> = [401, 403, 429, 500, 529, 400, 404, 301]
            .into_iter()
            .map(status_category)
            .collect();
        let want = [
            "auth",
            "auth",
            "rate_limit",
            "server",
            "server",
            "client",
            "client",
            "client",
        ];
        assert_eq!(got, want);
        assert_eq!(type_category("rate_limit_error"), "rate_limit");
        assert_eq!(type_category("authentication_error"), "auth");
        assert_eq!(type_category("overloaded_error"), "server");
        assert_eq!(type_category("invalid_request_error"), "client");
    }
}
