//! Where and how an HTTP adapter connects: [`HttpOptions`] and the base
//! URLs and body limit it defaults to.

use std::fmt;
use std::time::Duration;

/// The base URL of OpenAI's API.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The base URL of Anthropic's API.
pub const ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

/// Default of [`HttpOptions::max_body_bytes`]: 64 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 64 * 1024 * 1024;

/// Where and how an HTTP adapter connects.
///
/// Proxies named by the `HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY` and
/// `NO_PROXY` environment variables are used, except for a base URL on a
/// loopback host (`localhost`, `127.x.y.z`, `[::1]`: a local model server
/// is never behind a proxy). Redirects are not followed (a 3xx is a
/// `client` error): an API does not move under a POST.
///
/// ```
/// use std::time::Duration;
/// use agent_journal::conversation::http::HttpOptions;
///
/// let options = HttpOptions::openai()
///     .api_key("sk-test")
///     .timeout(Duration::from_secs(300))
///     .header("OpenAI-Organization", "org-123");
/// assert_eq!(options.base_url, "https://api.openai.com/v1");
/// assert!(!format!("{options:?}").contains("sk-test"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// The API's base URL, to which `/chat/completions` or `/messages` is
    /// appended (a trailing `/` is ignored).
    pub base_url: String,
    /// The API key, sent as `Authorization: Bearer` (OpenAI) or
    /// `x-api-key` (Anthropic). Default: none (local servers need none).
    pub api_key: Option<String>,
    /// How long connecting (DNS, TCP, TLS) may take. Default: 10 s.
    pub connect_timeout: Duration,
    /// How long a whole call may take, from connecting to the end of the
    /// response body (of the stream, when streaming). Default: 120 s.
    pub timeout: Duration,
    /// Bytes of response body read at most; more is a `parse` error, so a
    /// hostile server cannot exhaust memory. Default:
    /// [`DEFAULT_MAX_BODY_BYTES`] (64 MiB).
    pub max_body_bytes: u64,
    /// Extra headers sent with every request (`OpenAI-Organization`,
    /// `anthropic-beta`, a gateway's key). Default: none.
    pub headers: Vec<(String, String)>,
}

impl HttpOptions {
    /// Options for the API at `base_url`, every other field at its default.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(120),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            headers: Vec::new(),
        }
    }

    /// Options for OpenAI ([`OPENAI_BASE_URL`]).
    pub fn openai() -> Self {
        Self::new(OPENAI_BASE_URL)
    }

    /// Options for Anthropic ([`ANTHROPIC_BASE_URL`]).
    pub fn anthropic() -> Self {
        Self::new(ANTHROPIC_BASE_URL)
    }

    /// With API key `key`.
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// With connect timeout `d`.
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// With overall timeout `d`.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// With a body limit of `bytes`.
    pub fn max_body_bytes(mut self, bytes: u64) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// With the extra header `name: value`.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// Shows everything but the API key.
impl fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpOptions")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .field(
                "headers",
                &self.headers.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            )
            .finish()
    }
}
