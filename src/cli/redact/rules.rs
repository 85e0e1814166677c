//! The secrets `export --redact` finds: the rule families of gitleaks'
//! published configuration (`config/gitleaks.toml`) and of detect-secrets'
//! plugins, re-expressed for one combined regular expression, plus the
//! checks that keep ordinary text out.
//!
//! No rule relies on `\b` before a token: a key glued to an identifier
//! (`OPENAI_KEY_sk-proj-...`, `call_AKIA...`) is found. Where a prefix is
//! common in words (`sk-` in `task-`), the character before it is checked in
//! code instead ([`Edge`]), as the `regex` crate has no look-behind, and a
//! token must look random ([`Check`]).

/// What a neighbour of a secret may not be (the character just before it,
/// or just after it); the start and end of the text always pass.
#[derive(Clone, Copy, Debug)]
pub(super) enum Edge {
    /// Anything.
    Any,
    /// Not a lowercase ASCII letter (`sk-` after `ta` is the word `task-`).
    Lower,
    /// Not an uppercase ASCII letter or a digit.
    UpperDigit,
    /// Not an ASCII letter or digit.
    Alnum,
    /// Not a base64 character (`A-Za-z0-9+/`, and `=` after).
    Base64,
}

impl Edge {
    fn allows(self, c: Option<char>, after: bool) -> bool {
        let Some(c) = c else { return true };
        match self {
            Edge::Any => true,
            Edge::Lower => !c.is_ascii_lowercase(),
            Edge::UpperDigit => !(c.is_ascii_uppercase() || c.is_ascii_digit()),
            Edge::Alnum => !c.is_ascii_alphanumeric(),
            Edge::Base64 => {
                !(c.is_ascii_alphanumeric() || c == '+' || c == '/' || after && c == '=')
            }
        }
    }
}

/// What a match must look like to be replaced.
#[derive(Clone, Copy, Debug)]
pub(super) enum Check {
    /// Nothing more: the pattern says enough.
    None,
    /// Two of: a lowercase letter, an uppercase letter, a digit (a random
    /// token after a fixed prefix).
    Mixed,
    /// All three of them (`sk-`, whose prefix is common in text).
    Random,
    /// A lowercase and an uppercase letter (base64 rather than a hex hash).
    Cased,
    /// A letter and a digit.
    Alnum,
    /// An opaque token: a digit, or 16 characters or more of both cases
    /// (not a word such as `Authorization`).
    Opaque,
    /// A generic assignment's value: 8 characters or more, with a letter
    /// and a digit, and not a placeholder (`${VAR}`, `<...>`, `***`).
    Assigned,
    /// HTTP Basic credentials: base64 of `user:password`.
    BasicAuth,
}

impl Check {
    pub(super) fn passes(self, s: &str) -> bool {
        let lower = s.bytes().any(|b| b.is_ascii_lowercase());
        let upper = s.bytes().any(|b| b.is_ascii_uppercase());
        let digit = s.bytes().any(|b| b.is_ascii_digit());
        match self {
            Check::None => true,
            Check::Mixed => (lower as u8 + upper as u8 + digit as u8) >= 2,
            Check::Random => lower && upper && digit,
            Check::Cased => lower && upper,
            Check::Alnum => (lower || upper) && digit,
            Check::Opaque => digit || (lower && upper && s.len() >= 16),
            Check::Assigned => {
                s.chars().count() >= 8
                    && (lower || upper)
                    && digit
                    && !s.starts_with("${")
                    && !s.starts_with('<')
                    && !s.starts_with('*')
            }
            Check::BasicAuth => base64_decode(s)
                .and_then(|b| String::from_utf8(b).ok())
                .is_some_and(|t| t.contains(':') && !t.chars().any(char::is_control)),
        }
    }
}

/// One kind of secret. The part replaced is the group named `secret` if
/// the pattern has one, else the whole match.
pub(super) struct Rule {
    /// Its name, for tests and messages.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) name: &'static str,
    /// The pattern (regex crate syntax; flags inside stay inside).
    pub(super) pattern: &'static str,
    /// What the replaced part must look like.
    pub(super) check: Check,
    /// What may not come just before the replaced part.
    pub(super) before: Edge,
    /// What may not come just after it.
    pub(super) after: Edge,
}

impl Rule {
    /// Whether the replaced part `secret`, between `before` and `after`,
    /// is one.
    pub(super) fn accepts(&self, secret: &str, before: Option<char>, after: Option<char>) -> bool {
        self.before.allows(before, false)
            && self.after.allows(after, true)
            && self.check.passes(secret)
    }
}

const fn rule(name: &'static str, pattern: &'static str, check: Check) -> Rule {
    Rule {
        name,
        pattern,
        check,
        before: Edge::Any,
        after: Edge::Any,
    }
}

const fn edged(
    name: &'static str,
    pattern: &'static str,
    check: Check,
    before: Edge,
    after: Edge,
) -> Rule {
    Rule {
        name,
        pattern,
        check,
        before,
        after,
    }
}

/// The built-in rules, most specific first: at one position the first rule
/// that matches is taken.
pub(super) const RULES: &[Rule] = &[
    rule(
        "private-key",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----",
        Check::None,
    ),
    // A block cut short (no END line): its header and body.
    rule(
        "private-key-unterminated",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?:\\[rn]|[\sA-Za-z0-9+/=:,-])*",
        Check::None,
    ),
    edged(
        "anthropic",
        r"sk-ant-[A-Za-z0-9_-]{20,}",
        Check::Mixed,
        Edge::Lower,
        Edge::Any,
    ),
    edged(
        "openai",
        r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}",
        Check::Random,
        Edge::Lower,
        Edge::Any,
    ),
    edged(
        "aws-access-key-id",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|APKA|AROA)[A-Z0-9]{16}",
        Check::None,
        Edge::UpperDigit,
        Edge::UpperDigit,
    ),
    // `aws_secret_access_key = ...`, `"SecretAccessKey": "..."`, "the AWS
    // secret is ...": 40 base64 characters shortly after the keyword.
    edged(
        "aws-secret-access-key",
        r"(?i:aws|secret_?access_?key)[^\n]{0,40}?(?P<secret>[A-Za-z0-9/+]{40})",
        Check::Cased,
        Edge::Base64,
        Edge::Base64,
    ),
    rule("github", r"gh[pousr]_[A-Za-z0-9]{30,}", Check::Mixed),
    rule("github-pat", r"github_pat_[A-Za-z0-9_]{30,}", Check::Mixed),
    rule(
        "gitlab",
        r"gl(?:pat|dt|ptt|rt|cbt|soat|ffct|imt|agent|oas)-[A-Za-z0-9_-]{20,}",
        Check::Mixed,
    ),
    rule(
        "slack-token",
        r"xox[abeoprs]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-z0-9]+",
        Check::Mixed,
    ),
    rule(
        "slack-webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9_/+-]{16,})",
        Check::None,
    ),
    rule(
        "stripe",
        r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9+/]{24,}",
        Check::Mixed,
    ),
    edged(
        "twilio",
        r"(?:SK|AC)[0-9a-fA-F]{32}",
        Check::Alnum,
        Edge::Alnum,
        Edge::Alnum,
    ),
    rule(
        "sendgrid",
        r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
        Check::None,
    ),
    rule("npm", r"npm_[A-Za-z0-9]{36,}", Check::Mixed),
    rule("pypi", r"pypi-AgE[A-Za-z0-9_-]{40,}", Check::None),
    rule("huggingface", r"hf_[A-Za-z0-9]{30,}", Check::Mixed),
    rule(
        "google",
        r"AIza[0-9A-Za-z_-]{35}|ya29\.[0-9A-Za-z_-]{20,}|GOCSPX-[A-Za-z0-9_-]{24,}",
        Check::None,
    ),
    rule(
        "jwt",
        r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        Check::None,
    ),
    rule("digitalocean", r"do[opr]_v1_[a-f0-9]{64}", Check::None),
    edged(
        "mailgun",
        r"key-[a-f0-9]{32}",
        Check::Alnum,
        Edge::Alnum,
        Edge::Alnum,
    ),
    rule(
        "shopify",
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",
        Check::None,
    ),
    rule(
        "azure",
        r"(?i:AccountKey|SharedAccessKey|SharedAccessSignature)=(?P<secret>[A-Za-z0-9+/=%]{20,})|[?&]sig=(?P<secret2>[A-Za-z0-9%+/=]{20,})",
        Check::None,
    ),
    // Groq, xAI, Replicate, Perplexity, Linear, HashiCorp Vault,
    // Databricks, Postman, age.
    rule(
        "other-prefixed",
        r"gsk_[A-Za-z0-9]{40,}|xai-[A-Za-z0-9]{60,}|r8_[A-Za-z0-9]{30,}|pplx-[A-Za-z0-9]{40,}|lin_api_[A-Za-z0-9]{30,}|hvs\.[A-Za-z0-9_-]{24,}|dapi[a-f0-9]{32}|PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}|AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}",
        Check::Mixed,
    ),
    rule(
        "bearer",
        r"(?i:bearer)\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
        Check::Opaque,
    ),
    rule(
        "basic",
        r"(?i:basic)\s+(?P<secret>[A-Za-z0-9+/]{6,}={0,2})",
        Check::BasicAuth,
    ),
    rule(
        "url-password",
        r#"[A-Za-z][A-Za-z0-9+.-]{1,30}://[^/\s:@"'\\]*:(?P<secret>[^@\s/"'\\]+)@"#,
        Check::None,
    ),
    // `password=...`, `"api_key": "..."`, `API_TOKEN: ...`, `--password ...`
    // (detect-secrets' keyword detector, gitleaks' generic-api-key).
    rule(
        "assignment",
        r#"(?i:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key|private[_-]?key|credentials?|session[_-]?key)[A-Za-z0-9_.-]{0,12}(?:\\?["'])?(?:\s*(?:=|:|=>|:=)\s*|[ \t]+)(?:\\?["'`])?(?P<secret>[^\s"'`\\,;&<>(){}\[\]|]+)"#,
        Check::Assigned,
    ),
];

/// Standard or URL-safe base64, padded or not; `None` if it is not.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for b in s.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    if s.len() % 4 == 1 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_basic_credentials() {
        assert_eq!(base64_decode("dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(base64_decode("YTpi").unwrap(), b"a:b");
        assert!(Check::BasicAuth.passes("dXNlcjpwYXNzd29yZA=="));
        assert!(!Check::BasicAuth.passes("authentication"));
        assert!(!Check::BasicAuth.passes("Authentication"));
    }
}
