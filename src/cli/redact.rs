//! `export --redact`: secrets replaced by `[REDACTED]` in every string of
//! what is exported, in every format: message contents, system prompts,
//! tool names, arguments and results, call ids, labels, provider payloads,
//! metadata, errors, custom payloads, and the **keys** of JSON objects as
//! well as their values.
//!
//! What is found: the rule families of gitleaks and detect-secrets
//! (`redact/rules.rs`): private key blocks; API keys of OpenAI, Anthropic,
//! Google (and its OAuth tokens and client secrets), Groq, xAI, Replicate,
//! Perplexity, Hugging Face; AWS access key ids and secret access keys;
//! GitHub, GitLab, Slack (tokens and webhooks), Stripe, Twilio, SendGrid,
//! npm, PyPI, DigitalOcean, Mailgun, Shopify, Azure (account keys, SAS
//! signatures), Linear, Vault, Databricks, Postman and age keys; JWTs; the
//! credentials of `Bearer` and `Basic` authorization; the password of
//! `scheme://user:password@host`; and the value of a generic assignment
//! (`password=`, `secret:`, `token=`, `api_key=`, `--password VALUE`...)
//! when it has 8 characters or more with letters and digits. A key glued to
//! an identifier (`OPENAI_KEY_sk-...`, `call_AKIA...`) is found. Plus any
//! `--redact-pattern REGEX` (its whole match, or its group named `secret`).
//!
//! What is kept: prose (the word "token", `max_tokens: 4096`), UUIDs, hex
//! hashes (a git sha1 near the word "aws" included), and a generic
//! assignment whose value has no digit (`password: letmein`) or contains
//! spaces: a pattern cannot tell such a password from text.
//!
//! A JSON document inside a string (OpenAI tool arguments, a provider
//! payload) keeps its layout when redacting its text leaves it valid with
//! all its keys; otherwise it is redacted as JSON and written compact.
//!
//! Two keys of one object that redact to the same text stay distinct: each
//! of them gets a numbered mark (`[REDACTED:1]`, `[REDACTED:2]`, in the
//! object's key order, the first mark of the key numbered), also when the
//! clash is with a key that was not redacted.
//!
//! The count reported is the number of marks written into the export.

mod rules;
mod scan;

use std::collections::{BTreeMap, BTreeSet};

use agent_journal::{Error, Event};
use serde_json::{Map, Value};

pub(crate) use scan::MARK;
use scan::{MARK_START, Scanner};

/// The patterns, and how many secrets they replaced so far.
pub(crate) struct Redactor {
    scanner: Scanner,
    /// Secrets replaced: marks written into what is exported.
    pub(crate) replaced: usize,
}

impl Redactor {
    /// The built-in patterns and `extra` ones.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming a pattern that is not a valid regex.
    pub(crate) fn new(extra: &[String]) -> Result<Redactor, Error> {
        Ok(Redactor {
            scanner: Scanner::new(extra)?,
            replaced: 0,
        })
    }

    /// `text` with every secret replaced; counts them.
    #[cfg(test)]
    pub(crate) fn text(&mut self, text: &str) -> String {
        let (out, n) = self.scanner.scan(text);
        self.replaced += n;
        out
    }

    /// `text` with every secret replaced, not counted: for what is said
    /// about the export on stderr rather than written into it.
    pub(crate) fn quietly(&self, text: &str) -> String {
        self.scanner.scan(text).0
    }

    /// A string of an export redacted (counted), `None` if it holds no
    /// secret. A string that is a JSON object or array keeps its layout
    /// if redacting its text leaves it the same JSON shape; otherwise it
    /// is redacted as JSON (keys too) and written compact.
    fn string(&mut self, s: &str) -> Option<String> {
        let (text, n) = self.scanner.scan(s);
        if n == 0 {
            return None;
        }
        let t = s.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            if let Ok(mut doc) = serde_json::from_str::<Value>(s) {
                let same_shape = serde_json::from_str::<Value>(&text)
                    .is_ok_and(|r| key_count(&r) == key_count(&doc));
                if !same_shape {
                    let before = self.replaced;
                    self.value(&mut doc);
                    match serde_json::to_string(&doc) {
                        Ok(compact) => return Some(compact),
                        Err(_) => self.replaced = before,
                    }
                }
            }
        }
        self.replaced += n;
        Some(text)
    }

    /// Every string in `v`, object keys included, in place.
    pub(crate) fn value(&mut self, v: &mut Value) {
        match v {
            Value::String(s) => {
                if let Some(r) = self.string(s) {
                    *s = r;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::Object(map) => {
                map.values_mut().for_each(|i| self.value(i));
                self.keys(map);
            }
            _ => {}
        }
    }

    /// The keys of `map` redacted, numbered where two would be the same.
    fn keys(&mut self, map: &mut Map<String, Value>) {
        let mut renamed = Vec::new();
        for k in map.keys() {
            let (r, n) = self.scanner.scan(k);
            if n > 0 {
                renamed.push((k.clone(), r, n));
            }
        }
        if renamed.is_empty() {
            return;
        }
        let mut taken: BTreeSet<String> = map
            .keys()
            .filter(|k| !renamed.iter().any(|(old, _, _)| old == *k))
            .cloned()
            .collect();
        let mut uses: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, r, _) in &renamed {
            *uses.entry(r.as_str()).or_default() += 1;
        }
        let mut numbered: BTreeMap<String, usize> = BTreeMap::new();
        let mut moves = Vec::new();
        for (old, r, n) in &renamed {
            let mut name = r.clone();
            if uses[r.as_str()] > 1 || taken.contains(&name) {
                let next = numbered.entry(r.clone()).or_default();
                loop {
                    *next += 1;
                    name = r.replacen(MARK, &format!("{MARK_START}:{next}]"), 1);
                    if !taken.contains(&name) {
                        break;
                    }
                }
            }
            taken.insert(name.clone());
            self.replaced += n;
            moves.push((old.clone(), name));
        }
        let old = std::mem::take(map);
        for (k, v) in old {
            match moves.iter().find(|(o, _)| *o == k) {
                Some((_, name)) => map.insert(name.clone(), v),
                None => map.insert(k, v),
            };
        }
    }

    /// A JSON document (or JSON Lines, one document a line) with every
    /// string and key redacted, written back in the same layout (pretty if
    /// it was on several lines).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when it is not JSON: nothing is written
    /// that could not be redacted.
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
    /// no field is missed (map keys included). A custom payload is redacted
    /// as text when it is UTF-8, else byte for byte (each byte read as one
    /// character, so an ASCII secret inside binary data is found; the
    /// application's own encoding of it may no longer decode).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] when the event does not go through its JSON
    /// form and back: a secret must never be written because it could not
    /// be replaced.
    pub(crate) fn event(&mut self, event: &mut Event) -> Result<(), Error> {
        if let Event::Custom { payload, .. } = event {
            match std::str::from_utf8(payload) {
                Ok(text) => {
                    if let Some(r) = self.string(text) {
                        *payload = r.into_bytes();
                    }
                }
                Err(_) => {
                    let latin1: String = payload.iter().map(|&b| char::from(b)).collect();
                    let (r, n) = self.scanner.scan(&latin1);
                    if n > 0 {
                        // Every character is below 256: the text put in is
                        // ASCII, the rest was bytes.
                        *payload = r.chars().map(|c| c as u32 as u8).collect();
                        self.replaced += n;
                    }
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
            match serde_json::from_value::<Event>(v) {
                Ok(e) => *event = e,
                Err(e) => {
                    self.replaced = before;
                    return Err(cannot(e));
                }
            }
        }
        Ok(())
    }
}

/// How many object keys `v` holds, at every depth.
fn key_count(v: &Value) -> usize {
    match v {
        Value::Array(items) => items.iter().map(key_count).sum(),
        Value::Object(map) => map.len() + map.values().map(key_count).sum::<usize>(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests;
