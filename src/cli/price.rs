//! What a run cost: a price table per model (US dollars per million input,
//! output, cache-read and cache-write tokens) applied to the tokens each
//! provider call recorded. `stats`, `sessions` and `view` show it.
//!
//! The default table is `src/cli/price/default.json`, built into the
//! binary, with the date its prices were read on. `--prices FILE` (or the
//! environment variable `AGENT_JOURNAL_PRICES`) replaces it with a file of
//! the same shape:
//!
//! ```json
//! {"date": "2025-06-01", "models": {
//!   "gpt-4o": {"input": 2.5, "output": 10, "cache_read": 1.25, "cache_write": 0,
//!              "input_includes_cache": true}}}
//! ```
//!
//! A model is looked up by its exact name, else by the longest name in the
//! table that it starts with followed by `-` (`gpt-4o-2024-08-06` is
//! priced as `gpt-4o`). A model the table does not name has no price: its
//! calls show no cost and the run's total is unknown, never a guess.
//! `input_includes_cache` (default false) says the provider counts cached
//! tokens inside its input tokens (OpenAI does, Anthropic does not): those
//! are then priced once, at the cache-read price.
//!
//! This file is also the one place the command line reads provider-call
//! records ([`provider_call`]): a change of their shape is a change here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use agent_journal::conversation::ConversationEvent;
use agent_journal::{Envelope, Error, Event, ProviderOutcome, Session, TokenUsage};
use chrono::{DateTime, Utc};
use serde::Deserialize;

/// The table built into the binary.
const DEFAULT: &str = include_str!("price/default.json");

/// The price of one model, in US dollars per million tokens.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Price {
    input: f64,
    output: f64,
    #[serde(default)]
    cache_read: f64,
    #[serde(default)]
    cache_write: f64,
    /// The provider's input count includes the cached tokens (default false).
    #[serde(default)]
    input_includes_cache: bool,
}

/// Dollars rounded to a billionth (nano-dollars), so that JSON carries no
/// float noise (`0.001629`, not `0.0016290000000000002`).
pub(crate) fn round(x: f64) -> f64 {
    (x * 1e9).round() / 1e9
}

/// A price table: the date its prices were read on, and a price per model.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Prices {
    /// When the prices were read (free text, `YYYY-MM-DD` by convention).
    pub(crate) date: String,
    models: BTreeMap<String, Price>,
}

impl Prices {
    /// The table of `path`, or the built-in one without a path.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be read, [`Error::InvalidInput`]
    /// naming it if it is not a table (or a price is negative or not finite).
    pub(crate) fn load(path: Option<&Path>) -> Result<Prices, Error> {
        let (text, name) = match path {
            Some(p) => (
                std::fs::read_to_string(p).map_err(|source| Error::Io {
                    context: format!("reading the price table {}", p.display()),
                    source,
                })?,
                p.display().to_string(),
            ),
            None => (DEFAULT.to_owned(), "the built-in price table".to_owned()),
        };
        let prices: Prices = serde_json::from_str(&text)
            .map_err(|e| Error::InvalidInput(format!("{name} is not a price table: {e}")))?;
        for (model, p) in &prices.models {
            for x in [p.input, p.output, p.cache_read, p.cache_write] {
                if !(x.is_finite() && x >= 0.0) {
                    return Err(Error::InvalidInput(format!(
                        "{name}: the price of {model} must be a number >= 0, not {x}"
                    )));
                }
            }
        }
        Ok(prices)
    }

    /// The price of `model`: its own, else that of the longest name in the
    /// table it starts with followed by `-`.
    fn of(&self, model: &str) -> Option<&Price> {
        if let Some(p) = self.models.get(model) {
            return Some(p);
        }
        self.models
            .iter()
            .filter(|(name, _)| {
                model
                    .strip_prefix(name.as_str())
                    .is_some_and(|rest| rest.starts_with('-'))
            })
            .max_by_key(|(name, _)| name.len())
            .map(|(_, p)| p)
    }

    /// The cost of `usage` on `model` in US dollars, or `None` when the
    /// table has no price for it.
    pub(crate) fn cost(&self, model: &str, usage: &TokenUsage) -> Option<f64> {
        let p = self.of(model)?;
        let input = if p.input_includes_cache {
            usage.input_tokens.saturating_sub(usage.cache_read_tokens)
        } else {
            usage.input_tokens
        };
        let dollars = input as f64 * p.input
            + usage.output_tokens as f64 * p.output
            + usage.cache_read_tokens as f64 * p.cache_read
            + usage.cache_write_tokens as f64 * p.cache_write;
        Some(round(dollars / 1_000_000.0))
    }
}

/// One provider call as the command line reads it, whichever loop made it.
#[derive(Clone, Debug)]
pub(crate) struct CallRecord {
    /// Its key: the seq of an inner-loop call, the id of a conversation's.
    pub(crate) key: String,
    /// The seq of the event that recorded it (the last one, for a
    /// conversation's call recorded at its start and at its end).
    pub(crate) seq: u64,
    pub(crate) provider: String,
    pub(crate) model: String,
    /// Its tokens (zero while a conversation's call has no usage).
    pub(crate) usage: TokenUsage,
    pub(crate) started_at: DateTime<Utc>,
    pub(crate) finished_at: Option<DateTime<Utc>>,
    /// `None` while a conversation's call is in progress.
    pub(crate) ok: Option<bool>,
}

/// The provider call `e` records, if it records one.
pub(crate) fn provider_call(e: &Envelope) -> Option<CallRecord> {
    match &e.event {
        Event::ProviderCall(p) => Some(CallRecord {
            key: e.seq.to_string(),
            seq: e.seq,
            provider: p.provider.clone(),
            model: p.model.clone(),
            usage: p.usage.clone(),
            started_at: p.started_at,
            finished_at: Some(p.finished_at),
            ok: Some(matches!(p.outcome, ProviderOutcome::Ok)),
        }),
        Event::Conversation(c) => match &**c {
            ConversationEvent::ProviderCall(p) => Some(CallRecord {
                key: p.id.to_string(),
                seq: e.seq,
                provider: p.provider.clone(),
                model: p.model.clone(),
                usage: p.usage.clone().unwrap_or_default(),
                started_at: p.started_at,
                finished_at: p.finished_at,
                ok: p.outcome.as_ref().map(|o| o.ok),
            }),
            _ => None,
        },
        _ => None,
    }
}

/// The cost of a run.
#[derive(Clone, Debug, Default)]
pub(crate) struct Costs {
    /// The cost of each provider call by its key ([`CallRecord::key`]);
    /// `None` for a model with no price.
    pub(crate) calls: BTreeMap<String, Option<f64>>,
    /// The models with no price that the run called.
    pub(crate) unpriced: BTreeSet<String>,
}

impl Costs {
    /// Counts `call` (a conversation's call again at its end replaces it).
    pub(crate) fn add(&mut self, prices: &Prices, call: &CallRecord) {
        let cost = prices.cost(&call.model, &call.usage);
        if cost.is_none() {
            self.unpriced.insert(call.model.clone());
        }
        self.calls.insert(call.key.clone(), cost);
    }

    /// The total in US dollars: `None` when a call's model has no price
    /// (a sum without it would be a made-up number), `Some(0.0)` for a run
    /// without provider calls.
    pub(crate) fn total(&self) -> Option<f64> {
        self.calls.values().copied().sum::<Option<f64>>().map(round)
    }

    /// The costs as the page and `--json` take them:
    /// `{"calls": {KEY: usd|null}, "total": usd|null, "unpriced": [model]}`.
    pub(crate) fn json(&self, prices: &Prices) -> serde_json::Value {
        serde_json::json!({"calls": self.calls, "total": self.total(),
                           "unpriced": self.unpriced, "prices_date": prices.date})
    }
}

/// The cost of the provider calls of `s`, in one pass over its events.
///
/// # Errors
/// A read of the session's events.
pub(crate) fn session_costs(s: &Session, prices: &Prices) -> Result<Costs, Error> {
    let mut costs = Costs::default();
    s.for_each_event(0..s.head(), |e| {
        if let Some(call) = provider_call(&e) {
            costs.add(prices, &call);
        }
        Ok(())
    })?;
    Ok(costs)
}

/// The total cost of `s` ([`Costs::total`]), without reading its events
/// when its state counts no provider call.
///
/// # Errors
/// A read of the session's events.
pub(crate) fn session_total(s: &Session, prices: &Prices) -> Result<Option<f64>, Error> {
    let none = {
        let state = s.state();
        state.usage().total().provider_calls == 0 && state.conversation_log().calls().is_empty()
    };
    if none {
        return Ok(Some(0.0));
    }
    Ok(session_costs(s, prices)?.total())
}

/// Dollars for people: `$0.0123`, `$1.23`; `-` when unknown.
pub(crate) fn usd(x: Option<f64>) -> String {
    match x {
        None => "-".to_owned(),
        Some(x) if x < 0.01 => format!("${x:.5}"),
        Some(x) if x < 1.0 => format!("${x:.4}"),
        Some(x) => format!("${x:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> TokenUsage {
        TokenUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: read,
            cache_write_tokens: write,
            ..TokenUsage::default()
        }
    }

    #[test]
    fn the_built_in_table_loads_and_is_dated() {
        let p = Prices::load(None).unwrap();
        assert!(p.date.len() == 10 && p.date.starts_with("20"), "{}", p.date);
        assert!(p.models.len() >= 5);
    }

    #[test]
    fn costs_count_each_kind_of_token_and_cached_input_once() {
        let p = Prices::load(None).unwrap();
        // Anthropic: input excludes the cache; 1M of each kind.
        let c = p
            .cost(
                "claude-sonnet-4-20250514",
                &usage(1_000_000, 1_000_000, 1_000_000, 1_000_000),
            )
            .unwrap();
        assert!((c - (3.0 + 15.0 + 0.3 + 3.75)).abs() < 1e-9, "{c}");
        // OpenAI: 1M input of which 400k cached, 1M output.
        let c = p
            .cost(
                "gpt-4o-2024-08-06",
                &usage(1_000_000, 1_000_000, 400_000, 0),
            )
            .unwrap();
        assert!((c - (0.6 * 2.5 + 10.0 + 0.4 * 1.25)).abs() < 1e-9, "{c}");
        // The longest prefix wins; an unknown model has no cost.
        let mini = p.cost("gpt-4o-mini-2024-07-18", &usage(1_000_000, 0, 0, 0));
        assert!((mini.unwrap() - 0.15).abs() < 1e-9);
        assert_eq!(p.cost("gpt-4oz", &usage(1, 1, 0, 0)), None);
        assert_eq!(p.cost("scripted-1", &usage(1, 1, 0, 0)), None);
    }

    #[test]
    fn a_total_with_an_unpriced_call_is_unknown() {
        let mut c = Costs::default();
        assert_eq!(c.total(), Some(0.0));
        c.calls.insert("1".into(), Some(0.5));
        assert_eq!(c.total(), Some(0.5));
        c.calls.insert("2".into(), None);
        assert_eq!(c.total(), None);
    }

    #[test]
    fn a_bad_table_is_refused_with_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.json");
        std::fs::write(
            &f,
            r#"{"date": "x", "models": {"m": {"input": -1, "output": 1}}}"#,
        )
        .unwrap();
        let e = Prices::load(Some(&f)).unwrap_err();
        assert!(e.to_string().contains("p.json"), "{e}");
        std::fs::write(&f, "{}").unwrap();
        assert!(Prices::load(Some(&f)).is_err());
    }
}
