//! One pass of one combined regular expression over a text: every rule of
//! [`RULES`](super::rules::RULES) and every `--redact-pattern`, each an
//! alternative of its own, so a string costs one search whatever the
//! number of rules.

use agent_journal::Error;
use regex::Regex;

use super::rules::{Check, Edge, RULES, Rule};

/// What replaces a secret.
pub(crate) const MARK: &str = "[REDACTED]";

/// The start every mark has, numbered ones (`[REDACTED:2]`) included.
pub(crate) const MARK_START: &str = "[REDACTED";

/// An alternative of the combined expression.
struct Alt {
    /// Its rule (a `--redact-pattern` has no check and no edges).
    rule: Rule,
    /// The index of the group around the whole alternative.
    group: usize,
    /// The indexes of its groups named `secret...`, in order.
    secrets: Vec<usize>,
}

/// The combined expression and what each of its alternatives is.
pub(crate) struct Scanner {
    re: Regex,
    alts: Vec<Alt>,
}

impl Scanner {
    /// The built-in rules and `extra` patterns (whose group named `secret`,
    /// if any, is the part replaced).
    ///
    /// # Errors
    /// [`Error::InvalidInput`] naming a pattern that is not a valid regex,
    /// or patterns that cannot be combined (the same group name, other
    /// than `secret`, in two of them).
    pub(crate) fn new(extra: &[String]) -> Result<Scanner, Error> {
        let mut rules: Vec<Rule> = RULES
            .iter()
            .map(|r| Rule {
                name: r.name,
                pattern: r.pattern,
                check: r.check,
                before: r.before,
                after: r.after,
            })
            .collect();
        let mut owned = Vec::new();
        for p in extra {
            Regex::new(p)
                .map_err(|e| Error::InvalidInput(format!("--redact-pattern {p:?}: {e}")))?;
            owned.push(p.clone());
        }
        let mut combined = String::new();
        let builtin = rules.len();
        let all: Vec<&str> = rules
            .iter()
            .map(|r| r.pattern)
            .chain(owned.iter().map(String::as_str))
            .collect();
        for (i, p) in all.iter().enumerate() {
            if i > 0 {
                combined.push('|');
            }
            // Each rule's `secret...` groups get names of their own.
            let p = p
                .replace("(?P<secret", &format!("(?P<s{i}x"))
                .replace("(?<secret", &format!("(?P<s{i}x"));
            combined.push_str(&format!("(?P<r{i}>{p})"));
        }
        for _ in builtin..all.len() {
            rules.push(Rule {
                name: "--redact-pattern",
                pattern: "",
                check: Check::None,
                before: Edge::Any,
                after: Edge::Any,
            });
        }
        let re = Regex::new(&combined).map_err(|e| {
            Error::InvalidInput(format!(
                "--redact-pattern: the patterns do not combine (a group name other than `secret` used twice?): {e}"
            ))
        })?;
        let names: Vec<Option<&str>> = re.capture_names().collect();
        let alts = rules
            .into_iter()
            .enumerate()
            .map(|(i, rule)| {
                let group = names
                    .iter()
                    .position(|n| *n == Some(format!("r{i}").as_str()))
                    .unwrap_or(0);
                let prefix = format!("s{i}x");
                let secrets = names
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| n.is_some_and(|n| n.starts_with(&prefix)))
                    .map(|(k, _)| k)
                    .collect();
                Alt {
                    rule,
                    group,
                    secrets,
                }
            })
            .collect();
        Ok(Scanner { re, alts })
    }

    /// `text` with every secret replaced by [`MARK`], and how many were.
    /// A part already marked is left alone (and not counted), so
    /// redacting twice changes nothing the second time.
    pub(crate) fn scan(&self, text: &str) -> (String, usize) {
        let mut out = String::new();
        let n = self.scan_into(text, 0, text.len(), &mut out);
        (out, n)
    }

    /// Appends `text[from..to]`, redacted, to `out`; the count.
    fn scan_into(&self, text: &str, from: usize, to: usize, out: &mut String) -> usize {
        let hay = &text[..to];
        let mut count = 0;
        let mut last = from;
        let mut at = from;
        while at <= to {
            let Some(caps) = self.re.captures_at(hay, at) else {
                break;
            };
            let Some(whole) = caps.get(0) else { break };
            let found = self.alts.iter().find_map(|a| {
                caps.get(a.group)?;
                let secret = a.secrets.iter().find_map(|&k| caps.get(k)).unwrap_or(whole);
                Some((a, secret))
            });
            let accepted = found.filter(|(a, s)| {
                !s.is_empty()
                    && !s.as_str().starts_with(MARK_START)
                    && a.rule.accepts(
                        s.as_str(),
                        text[..s.start()].chars().next_back(),
                        text[s.end()..].chars().next(),
                    )
            });
            let Some((_, secret)) = accepted else {
                // Not a secret: look again from the next character.
                at = whole.start()
                    + hay[whole.start()..]
                        .chars()
                        .next()
                        .map_or(1, char::len_utf8);
                continue;
            };
            out.push_str(&text[last..whole.start()]);
            // What the match spans before its secret (`scheme://user:` of
            // a URL, the keyword of an assignment) may hold a secret too.
            let inner = (whole.start() + 1).min(secret.start());
            let inner = (inner..=secret.start())
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(secret.start());
            out.push_str(&text[whole.start()..inner]);
            count += self.scan_into(text, inner, secret.start(), out);
            out.push_str(MARK);
            count += 1;
            last = secret.end();
            at = secret.end();
        }
        out.push_str(&text[last..to]);
        count
    }

    /// The name of each built-in rule, in order (for tests).
    #[cfg(test)]
    pub(crate) fn rule_names(&self) -> Vec<&'static str> {
        self.alts.iter().map(|a| a.rule.name).collect()
    }
}
