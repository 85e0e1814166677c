//! `export --redact`: secrets replaced by `[REDACTED]` in every string of
//! what is exported (message contents, tool arguments and results, provider
//! payloads, errors, labels, UTF-8 custom payloads), in every format.
//!
//! The patterns: API keys of OpenAI (`sk-...`, `sk-proj-...`), Anthropic
//! (`sk-ant-...`), AWS access keys (`AKIA...`), GitHub tokens (`ghp_...`,
//! `github_pat_...`), Google API keys (`AIza...`), Slack tokens (`xox.-...`),
//! Stripe secret keys, JSON Web Tokens, private key blocks, the token of
//! `Bearer TOKEN` and the password in `scheme://user:password@host`, plus
//! any `--redact-pattern REGEX` (its whole match, or its group named
//! `secret`).

use agent_journal::{Error, Event};
use regex::Regex;
use serde_json::Value;

/// What replaces a secret.
pub(crate) const MARK: &str = "[REDACTED]";

const BUILT_IN: &[&str] = &[
    r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    r"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}",
    r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",
    r"\bgithub_pat_[A-Za-z0-9_]{30,}",
    r"\bAIza[0-9A-Za-z_-]{35}",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"\b[rs]k_live_[0-9A-Za-z]{16,}",
    r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----",
    r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})",
    r"[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]+:(?P<secret>[^@\s/]+)@",
];

/// The patterns, and how many secrets they replaced so far.
pub(crate) struct Redactor {
    patterns: Vec<Regex>,
    /// Secrets replaced.
    pub(crate) replaced: usize,
}

impl Redactor {
    /// The built-in patterns and `extra` ones.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming a pattern that is not a valid regex.
    pub(crate) fn new(extra: &[String]) -> Result<Redactor, Error> {
        let mut patterns = Vec::new();
        for p in BUILT_IN
            .iter()
            .copied()
            .chain(extra.iter().map(String::as_str))
        {
            patterns.push(
                Regex::new(p)
                    .map_err(|e| Error::InvalidInput(format!("--redact-pattern {p:?}: {e}")))?,
            );
        }
        Ok(Redactor {
            patterns,
            replaced: 0,
        })
    }

    /// `text` with every secret replaced; counts them.
    pub(crate) fn text(&mut self, text: &str) -> String {
        let mut out = text.to_owned();
        for re in &self.patterns {
            if !re.is_match(&out) {
                continue;
            }
            let mut next = String::with_capacity(out.len());
            let mut last = 0;
            for caps in re.captures_iter(&out) {
                let whole = caps.get(0).expect("a match");
                let secret = caps.name("secret").unwrap_or(whole);
                if secret.as_str() == MARK || secret.is_empty() {
                    continue;
                }
                next.push_str(&out[last..secret.start()]);
                next.push_str(MARK);
                last = secret.end();
                self.replaced += 1;
            }
            next.push_str(&out[last..]);
            out = next;
        }
        out
    }

    /// Every string in `v` (not the keys of objects), in place.
    pub(crate) fn value(&mut self, v: &mut Value) {
        match v {
            Value::String(s) => {
                let r = self.text(s);
                *s = r;
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => map.values_mut().for_each(|i| self.value(i)),
            _ => {}
        }
    }

    /// A JSON document (or JSON Lines, one document a line) with every
    /// string redacted, written back in the same layout (pretty if it was
    /// on several lines).
    pub(crate) fn document(&mut self, text: &str, lines: bool) -> Result<String, Error> {
        let redact = |r: &mut Redactor, doc: &str, pretty: bool| -> Result<String, Error> {
            let mut v: Value =
                serde_json::from_str(doc).map_err(|e| Error::InvalidInput(e.to_string()))?;
            r.value(&mut v);
            let out = if pretty {
                serde_json::to_string_pretty(&v)
            } else {
                serde_json::to_string(&v)
            };
            out.map_err(|e| Error::InvalidInput(e.to_string()))
        };
        if lines {
            let mut out = Vec::new();
            for l in text.lines().filter(|l| !l.trim().is_empty()) {
                out.push(redact(self, l, false)?);
            }
            Ok(out.join("\n"))
        } else {
            redact(self, text, text.trim().contains('\n'))
        }
    }

    /// Every string of `event`, in place: through its JSON form, so that
    /// no field is missed; a custom payload is redacted when it is UTF-8.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the event does not go through its JSON
    /// form and back: a secret must never be written because it could not
    /// be replaced.
    pub(crate) fn event(&mut self, event: &mut Event) -> Result<(), Error> {
        if let Event::Custom { payload, .. } = event {
            if let Ok(text) = std::str::from_utf8(payload) {
                let redacted = self.text(text);
                if redacted != text {
                    *payload = redacted.into_bytes();
                }
            }
            return Ok(());
        }
        let cannot = |e: serde_json::Error| {
            Error::InvalidInput(format!("cannot redact a {} event: {e}", event.kind()))
        };
        let mut v = serde_json::to_value(&*event).map_err(cannot)?;
        let before = self.replaced;
        self.value(&mut v);
        if self.replaced != before {
            *event = serde_json::from_value::<Event>(v).map_err(cannot)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_secret_is_replaced_and_the_rest_kept() {
        let mut r = Redactor::new(&["internal-[0-9]{4}".into()]).unwrap();
        let cases = [
            (
                "key sk-proj-abcdefghijklmnopqrstuvwxyz123456 end",
                "key [REDACTED] end",
            ),
            ("sk-ant-api03-abcdefghijklmnopqrstuvwx", "[REDACTED]"),
            ("AKIAABCDEFGHIJKLMNOP", "[REDACTED]"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "[REDACTED]"),
            (
                "Authorization: Bearer abc.def-ghi_jkl",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "postgres://app:hunter2@db:5432/x",
                "postgres://app:[REDACTED]@db:5432/x",
            ),
            ("ticket internal-1234", "ticket [REDACTED]"),
            (
                "nothing secret: sk-short, https://example.com/a@b",
                "nothing secret: sk-short, https://example.com/a@b",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(r.text(input), want, "{input}");
        }
        assert_eq!(r.replaced, 7);
        // Already redacted text is left alone.
        assert_eq!(r.text("Bearer [REDACTED]"), "Bearer [REDACTED]");
        assert!(Redactor::new(&["(".into()]).is_err());
    }

    #[test]
    fn documents_stay_valid_json_whatever_the_pattern_matches() {
        let mut r = Redactor::new(&["\"".into()]).unwrap();
        let doc = r#"{"a": "say \"sk-abcdefghijklmnopqrstuvwxyz\"", "n": 1}"#;
        let out = r.document(doc, false).unwrap();
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["a"], "say [REDACTED][REDACTED][REDACTED]");
        assert_eq!(v["n"], 1);
    }
}
