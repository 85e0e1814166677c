//! `view SESSION [-o FILE.html]`: the run as one self-contained HTML page
//! (a span tree of the session, its evaluations or turns, provider calls
//! and tool calls with durations, tokens and costs; lanes of the same on a
//! canvas; idle gaps cut to a break; a banner at each crash point; a
//! scrubber that shows the state at any event, with the panel of a
//! provider call; search and filters), and the page that `serve` hands out
//! for each session.
//!
//! Statuses on the page are the library's fold's ([`fold`]): the page
//! looks them up by seq and never ranks them itself. Costs come from the
//! price table ([`crate::cli::price`]).
//!
//! The page loads nothing: its script, style and data are inline, and its
//! Content-Security-Policy forbids any other load (`connect-src 'self'`
//! only for a live page of `serve`, which polls for new events). Every text
//! of the journal reaches the page as JSON (with `<` escaped) and is put in
//! it with `textContent`, so a message cannot inject markup.

use std::path::PathBuf;
use std::process::ExitCode;

use agent_journal::{Error, Journal, Session, SessionId, SessionStatus};
use clap::Args;

use crate::cli::event_json;
use crate::cli::find::session_arg;
use crate::cli::global::Global;
use crate::cli::open::{open_for_reading, read_session};
use crate::cli::output::print_json;
use crate::cli::price::{self, Prices};
use crate::cli::render;
use crate::cli::transfer::write_output;

mod fold;

const TEMPLATE: &str = include_str!("view/timeline.html");
/// The page's script: its files in the order they depend on each other
/// (the fold's statuses and text helpers, the time axis, the span tree,
/// then the page that uses them), inlined as one.
const SCRIPT: &str = concat!(
    include_str!("view/status.js"),
    include_str!("view/axis.js"),
    include_str!("view/tree.js"),
    include_str!("view/panel.js"),
    include_str!("view/timeline.js")
);
const STYLE: &str = include_str!("view/timeline.css");
const COMPARE: &str = include_str!("view/compare.html");

/// The arguments of `view`.
#[derive(Args, Debug)]
pub(crate) struct ViewArgs {
    #[command(flatten)]
    session: crate::cli::find::SessionRef,
    #[command(flatten)]
    prices: crate::cli::global::PricesArg,
    /// The HTML file to write (default: SESSION-ID.html in the current
    /// directory); written whole under a temporary name, then renamed.
    #[arg(short, long, value_name = "FILE.html")]
    output: Option<PathBuf>,
    /// Compare with this other session side by side (a fork, a resumed
    /// run, another run of the prompt), as `diff SESSION OTHER` does:
    /// default file SESSION-ID-vs-OTHER-ID.html.
    #[arg(long, value_name = "OTHER", value_parser = session_arg)]
    compare: Option<String>,
}

/// What a live page (`serve`) adds: where its links and its polls go.
pub(crate) struct Live {
    /// Prefix of a session's page (`/s/`): forks and parents link there.
    pub(crate) link_base: String,
    /// The URL the page polls for new events (`?from=SEQ` is added).
    pub(crate) poll: String,
}

/// `view SESSION [-o FILE]`.
pub(crate) fn view(cli: &Global, args: &ViewArgs) -> Result<ExitCode, Error> {
    let journal = open_for_reading(&cli.db)?;
    let s = read_session(&journal, &args.session)?;
    let spinner = crate::cli::output::working("view");
    let (html, default) = match &args.compare {
        Some(other) => {
            let o = read_session(&journal, other)?;
            (
                compare_page(&s, &o)?,
                format!("{}-vs-{}.html", s.id(), o.id()),
            )
        }
        None => (
            page(&journal, &s, None, &args.prices.load()?)?,
            format!("{}.html", s.id()),
        ),
    };
    spinner.finish_and_clear();
    let path = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(default));
    write_output(Some(&path), &html)?;
    if cli.json {
        print_json(&serde_json::json!({
            "schema": event_json::SCHEMA_VERSION,
            "session": s.id().to_string(),
            "events": s.head(),
            "path": path.display().to_string(),
            "bytes": html.len(),
        }))?;
    } else {
        outln!(
            "wrote {} ({} events, {} KiB): open it in a browser; it needs no network",
            path.display(),
            s.head(),
            html.len().div_ceil(1024)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The status word of a session for the page.
pub(crate) fn status_word(s: SessionStatus) -> &'static str {
    match s {
        SessionStatus::Idle => "idle",
        SessionStatus::Unfinished => "unfinished",
        SessionStatus::Finished => "finished",
    }
}

/// The forks of `id` among the sessions of `journal`, with their fork
/// points.
fn forks_of(journal: &Journal, id: SessionId) -> Result<Vec<(SessionId, u64)>, Error> {
    let mut out = Vec::new();
    for other in journal.sessions()? {
        if other == id {
            continue;
        }
        if let Some((parent, at)) = journal.session(other)?.state().forked_from() {
            if parent == id {
                out.push((other, at));
            }
        }
    }
    Ok(out)
}

/// The JSON events `from..to` of `s` as one JSON array, built as text
/// event by event (no tree of the whole session in memory).
pub(crate) fn events_array(s: &Session, from: u64, to: u64) -> Result<String, Error> {
    let mut out = String::from("[");
    s.for_each_event(from..to, |e| {
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(&event_json::event(&e).to_string());
        Ok(())
    })?;
    out.push(']');
    Ok(out)
}

/// The statuses of `s` as the library's fold has them at every seq, and
/// its crash points ([`fold::fold`]).
///
/// # Errors
/// A read of the session's events.
pub(crate) fn fold_json(s: &Session, status: SessionStatus) -> Result<serde_json::Value, Error> {
    Ok(fold::fold(s, status == SessionStatus::Unfinished)?.json)
}

/// JSON text made safe inside a `<script>` element: `<` only ever occurs
/// inside JSON strings, where `\u003c` means the same.
fn script_safe(json: &str) -> String {
    json.replace('<', "\\u003c")
}

/// The whole page for `s`; `live` makes it a page of `serve` that polls
/// for new events; `prices` gives each provider call its cost.
pub(crate) fn page(
    journal: &Journal,
    s: &Session,
    live: Option<&Live>,
    prices: &Prices,
) -> Result<String, Error> {
    let info = s.info()?;
    let session = serde_json::json!({
        "id": s.id().to_string(),
        "short": render::short(s.id()),
        "status": status_word(info.status),
        "labels": info.labels.iter().map(|(k, v)| serde_json::json!([k, v])).collect::<Vec<_>>(),
        "parent": info.forked_from.map(|(p, at)| serde_json::json!({"id": p.to_string(), "at": at})),
        "forks": forks_of(journal, s.id())?.iter()
            .map(|(f, at)| serde_json::json!({"id": f.to_string(), "at": at})).collect::<Vec<_>>(),
    });
    let events = events_array(s, 0, s.head())?;
    let folded = fold_json(s, info.status)?;
    let data = format!(
        "{{\"version\":{},\"session\":{},\"link_base\":{},\"live\":{},\"fold\":{},\"costs\":{},\"events\":{}}}",
        event_json::SCHEMA_VERSION,
        session,
        serde_json::json!(live.map(|l| l.link_base.as_str())),
        serde_json::json!(live.map(|l| l.poll.as_str())),
        folded,
        price::session_costs(s, prices)?.json(prices),
        events
    );
    let html = TEMPLATE
        .replacen(
            "{{TITLE}}",
            &format!("agent-journal · session {}", s.id()),
            1,
        )
        .replacen("{{VERSION}}", env!("CARGO_PKG_VERSION"), 1)
        .replacen(
            "{{CONNECT}}",
            if live.is_some() { "'self'" } else { "'none'" },
            1,
        )
        .replacen("{{CSS}}", STYLE, 1)
        .replacen("{{JS}}", SCRIPT, 1);
    // The data goes in last, so that nothing in it is taken for a slot.
    Ok(html.replacen("{{DATA}}", &script_safe(&data), 1))
}

/// The side-by-side page of `a` and `b`: the comparison `diff A B --json`
/// prints, laid out in two columns (messages after the shared events
/// paired by evaluation and msg; the tool calls that differ). Loads
/// nothing, and puts every text in with `textContent`, as [`page`].
pub(crate) fn compare_page(a: &Session, b: &Session) -> Result<String, Error> {
    let data = crate::cli::diff_sessions::compare(a, b)?;
    let html = COMPARE
        .replacen(
            "{{TITLE}}",
            &format!(
                "agent-journal · {} vs {}",
                render::short(a.id()),
                render::short(b.id())
            ),
            1,
        )
        .replacen("{{VERSION}}", env!("CARGO_PKG_VERSION"), 1);
    Ok(html.replacen("{{DATA}}", &script_safe(&data.to_string()), 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_safe_keeps_json_meaning_and_ends_no_script() {
        let json = serde_json::json!({"t": "</script><img src=x onerror=alert(1)>"}).to_string();
        let safe = script_safe(&json);
        assert!(!safe.contains('<'));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["t"], "</script><img src=x onerror=alert(1)>");
    }

    #[test]
    fn the_template_loads_nothing_from_elsewhere() {
        for text in [TEMPLATE, SCRIPT, STYLE, COMPARE] {
            for needle in ["http:", "https:", "//cdn", "src=\"", "@import", "url("] {
                assert!(!text.contains(needle), "{needle} in the page");
            }
        }
        for slot in ["{{TITLE}}", "{{CSS}}", "{{JS}}", "{{DATA}}", "{{CONNECT}}"] {
            assert_eq!(TEMPLATE.matches(slot).count(), 1, "{slot}");
        }
        for slot in ["{{TITLE}}", "{{DATA}}", "{{VERSION}}"] {
            assert_eq!(COMPARE.matches(slot).count(), 1, "{slot}");
        }
    }
}
