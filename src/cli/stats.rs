//! `stats SESSION`: where a run's time and tokens went. Tokens per provider
//! call and per model, tool durations (min, median, max per tool),
//! failures, and the time in provider calls against the time in tools.
//! Read in one pass over the events.

use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;

use agent_journal::conversation::ConversationEvent;
use agent_journal::{Error, Event, Outcome, ToolStatus};
use chrono::{DateTime, Utc};
use clap::Args;
use serde_json::json;

use crate::cli::global::Global;
use crate::cli::open::{open_for_reading, read_session};
use crate::cli::output::print_json;
use crate::cli::price;
use crate::cli::render;

/// The arguments of `stats`.
#[derive(Args, Debug)]
pub(crate) struct StatsArgs {
    #[command(flatten)]
    session: crate::cli::find::SessionRef,
    #[command(flatten)]
    prices: crate::cli::global::PricesArg,
}

/// One provider call.
struct Call {
    seq: u64,
    provider: String,
    model: String,
    input: u64,
    output: u64,
    ms: f64,
    ok: bool,
    /// In US dollars; `None` for a model the price table does not name.
    cost: Option<f64>,
}

impl Call {
    fn of(c: &price::CallRecord, prices: &price::Prices) -> Call {
        Call {
            seq: c.seq,
            provider: c.provider.clone(),
            model: c.model.clone(),
            input: c.usage.input_tokens,
            output: c.usage.output_tokens,
            ms: c.finished_at.map_or(0.0, |f| ms(c.started_at, f)),
            ok: c.ok == Some(true),
            cost: prices.cost(&c.model, &c.usage),
        }
    }
}

/// Calls, input and output tokens, milliseconds and cost (unknown as soon
/// as one call's is) of one provider/model.
type ModelTotals = (u64, u64, u64, f64, Option<f64>);

/// One tool call, from its request (or start) to its result.
#[derive(Default)]
struct ToolRun {
    name: String,
    start: Option<DateTime<Utc>>,
    end: Option<DateTime<Utc>>,
    failed: bool,
    started: bool,
}

/// Milliseconds for people: `12.3 ms`, or `4.56 s` from a second on.
fn human(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{:.2} s", ms / 1000.0)
    }
}

fn ms(from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
    (to - from).num_microseconds().unwrap_or(0) as f64 / 1000.0
}

/// `stats SESSION`.
pub(crate) fn stats(cli: &Global, args: &StatsArgs) -> Result<ExitCode, Error> {
    let journal = open_for_reading(&cli.db)?;
    let s = read_session(&journal, &args.session)?;
    let prices = args.prices.load()?;
    let mut calls: Vec<Call> = Vec::new();
    let mut conv_calls: BTreeMap<String, Call> = BTreeMap::new();
    let mut tools: HashMap<String, ToolRun> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let (mut first, mut last) = (None, None);
    let (mut evaluations_failed, mut turns_failed) = (0u64, 0u64);
    let mut request = |id: &str, name: &str, at, tools: &mut HashMap<String, ToolRun>| {
        if !tools.contains_key(id) {
            order.push(id.to_owned());
        }
        let t = tools.entry(id.to_owned()).or_default();
        t.name = name.to_owned();
        t.start.get_or_insert(at);
    };
    // An imported session's events were all written at its import: its
    // times are those its messages and provider calls recorded.
    let mut imported = false;
    s.for_each_event(0..s.head(), |e| {
        if let Event::SessionOpened { labels } = &e.event {
            imported = labels.iter().any(|(k, _)| k == "imported");
        }
        let at = match &e.event {
            Event::Message(m) if imported => Some(m.created_at),
            Event::ProviderCall(p) if imported => Some(p.finished_at),
            _ if imported => None,
            _ => Some(e.at),
        };
        if let Some(at) = at {
            first = Some(first.map_or(at, |f: DateTime<Utc>| f.min(at)));
            last = Some(last.map_or(at, |l: DateTime<Utc>| l.max(at)));
        }
        if let Event::ProviderCall(p) = &e.event
            && imported
        {
            first = Some(first.map_or(p.started_at, |f: DateTime<Utc>| f.min(p.started_at)));
        }
        let e_at = at.unwrap_or(e.at);
        if let Some(c) = price::provider_call(&e) {
            let call = Call::of(&c, &prices);
            if matches!(e.event, Event::ProviderCall(_)) {
                calls.push(call);
            } else {
                // A conversation's call, recorded at its start and its end.
                conv_calls.insert(c.key, call);
            }
        }
        match &e.event {
            Event::Message(m) => {
                for c in &m.tool_calls {
                    request(c.call_id.as_str(), &c.name, e_at, &mut tools);
                }
                if let Some(id) = &m.tool_call_id {
                    if let Some(t) = tools.get_mut(id.as_str()) {
                        t.end.get_or_insert(e_at);
                    }
                }
            }
            Event::ToolStatus {
                call_id, status, ..
            } => {
                let t = tools.entry(call_id.as_str().to_owned()).or_default();
                match status {
                    ToolStatus::Started => {
                        t.started = true;
                        t.start = Some(e.at);
                    }
                    ToolStatus::Completed => t.end = Some(e.at),
                    ToolStatus::Failed => {
                        t.end = Some(e.at);
                        t.failed = true;
                    }
                    ToolStatus::Pending => {}
                }
            }
            Event::EvaluationFinished { outcome, .. } if !matches!(outcome, Outcome::Succeeded) => {
                evaluations_failed += 1;
            }
            Event::Conversation(c) => match &**c {
                ConversationEvent::Message(m) => {
                    for c in &m.tool_calls {
                        request(c.call_id.as_str(), &c.name, e.at, &mut tools);
                    }
                    if let Some(id) = &m.tool_call_id {
                        if let Some(t) = tools.get_mut(id.as_str()) {
                            t.end.get_or_insert(e.at);
                        }
                    }
                }
                ConversationEvent::Turn(t) if t.status.as_str() == "failed" => {
                    turns_failed += 1;
                }
                _ => {}
            },
            _ => {}
        }
        Ok(())
    })?;
    calls.extend(conv_calls.into_values());
    calls.sort_by_key(|c| c.seq);

    // Per model (a cost is unknown as soon as one call's is).
    let mut models: BTreeMap<(String, String), ModelTotals> = BTreeMap::new();
    for c in &calls {
        let m = models
            .entry((c.provider.clone(), c.model.clone()))
            .or_insert((0, 0, 0, 0.0, Some(0.0)));
        m.0 += 1;
        m.1 += c.input;
        m.2 += c.output;
        m.3 += c.ms;
        m.4 = m.4.zip(c.cost).map(|(a, b)| price::round(a + b));
    }
    let cost = calls
        .iter()
        .map(|c| c.cost)
        .sum::<Option<f64>>()
        .map(price::round);
    let unpriced: std::collections::BTreeSet<&str> = calls
        .iter()
        .filter(|c| c.cost.is_none())
        .map(|c| c.model.as_str())
        .collect();
    // Per tool.
    let mut by_tool: BTreeMap<String, (Vec<f64>, u64)> = BTreeMap::new();
    let (mut tool_ms, mut tools_failed, mut in_doubt, mut pending) = (0.0, 0u64, 0u64, 0u64);
    for id in &order {
        let t = &tools[id];
        let entry = by_tool.entry(t.name.clone()).or_default();
        match (t.start, t.end) {
            (Some(a), Some(b)) => {
                let d = ms(a, b);
                tool_ms += d;
                entry.0.push(d);
            }
            _ if t.started => in_doubt += 1,
            _ => pending += 1,
        }
        if t.failed {
            entry.1 += 1;
            tools_failed += 1;
        }
    }
    let provider_ms: f64 = calls.iter().map(|c| c.ms).sum();
    let provider_failed = calls.iter().filter(|c| !c.ok).count();
    let wall = match (first, last) {
        (Some(a), Some(b)) => ms(a, b),
        _ => 0.0,
    };
    let quantiles = |d: &[f64]| -> (f64, f64, f64) {
        let mut d = d.to_vec();
        d.sort_by(f64::total_cmp);
        match d.len() {
            0 => (0.0, 0.0, 0.0),
            n => (d[0], d[n / 2], d[n - 1]),
        }
    };

    if cli.json {
        let round = |x: f64| (x * 1000.0).round() / 1000.0;
        print_json(&json!({
            "session": s.id().to_string(),
            "events": s.head(),
            "wall_ms": round(wall),
            "provider_ms": round(provider_ms),
            "tool_ms": round(tool_ms),
            "cost_usd": cost,
            "unpriced_models": unpriced,
            "prices_date": prices.date,
            "provider_calls": calls.iter().map(|c| json!({
                "seq": c.seq, "provider": c.provider, "model": c.model,
                "input_tokens": c.input, "output_tokens": c.output,
                "ms": round(c.ms), "ok": c.ok, "cost_usd": c.cost,
            })).collect::<Vec<_>>(),
            "models": models.iter().map(|((p, m), v)| json!({
                "provider": p, "model": m, "calls": v.0, "input_tokens": v.1,
                "output_tokens": v.2, "ms": round(v.3), "cost_usd": v.4,
            })).collect::<Vec<_>>(),
            "tools": by_tool.iter().map(|(name, (d, failed))| {
                let (min, median, max) = quantiles(d);
                json!({"name": name, "calls": d.len(), "failed": failed,
                       "min_ms": round(min), "median_ms": round(median), "max_ms": round(max)})
            }).collect::<Vec<_>>(),
            "failures": {
                "tools": tools_failed, "provider_calls": provider_failed,
                "evaluations": evaluations_failed, "turns": turns_failed,
                "in_doubt": in_doubt, "pending": pending,
            },
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "session {}: {} events over {}; {} in provider calls, {} in tools",
        s.id(),
        s.head(),
        human(wall),
        human(provider_ms),
        human(tool_ms)
    );
    outln!(
        "cost: {}{} (prices of {})",
        price::usd(cost),
        if unpriced.is_empty() {
            String::new()
        } else {
            format!(
                ", unknown: no price for {}",
                unpriced.iter().copied().collect::<Vec<_>>().join(", ")
            )
        },
        prices.date
    );
    outln!();
    outln!("provider calls by model:");
    outln!(
        "  {:<28} {:>6} {:>12} {:>12} {:>10} {:>10}",
        "provider/model",
        "calls",
        "input tok",
        "output tok",
        "time",
        "cost"
    );
    for ((p, m), v) in &models {
        outln!(
            "  {:<28} {:>6} {:>12} {:>12} {:>10} {:>10}",
            render::clip(&format!("{p}/{m}"), 28),
            v.0,
            v.1,
            v.2,
            human(v.3),
            price::usd(v.4)
        );
    }
    outln!();
    outln!("provider calls:");
    for c in &calls {
        outln!(
            "  seq {:>6}  {:<24} {:>8} in {:>7} out {:>10} {:>10}{}",
            c.seq,
            render::clip(&format!("{}/{}", c.provider, c.model), 24),
            c.input,
            c.output,
            human(c.ms),
            price::usd(c.cost),
            if c.ok { "" } else { "  FAILED" }
        );
    }
    outln!();
    outln!("tools (durations from request or start to result):");
    outln!(
        "  {:<20} {:>6} {:>7} {:>10} {:>10} {:>10}",
        "tool",
        "calls",
        "failed",
        "min ms",
        "median ms",
        "max ms"
    );
    for (name, (d, failed)) in &by_tool {
        let (min, median, max) = quantiles(d);
        outln!(
            "  {:<20} {:>6} {:>7} {:>10.1} {:>10.1} {:>10.1}",
            render::clip(name, 20),
            d.len(),
            failed,
            min,
            median,
            max
        );
    }
    outln!();
    outln!(
        "failures: {tools_failed} tool calls, {provider_failed} provider calls, {evaluations_failed} evaluations, {turns_failed} turns; {in_doubt} tool calls in doubt, {pending} never started"
    );
    Ok(ExitCode::SUCCESS)
}
