//! `serve [--port P]`: the timeline of every session of a database over
//! HTTP on 127.0.0.1, live: a session's page polls for the events that land
//! while it is open.
//!
//! Each request opens the database and closes it again, so the server never
//! holds a sled database an agent wants to open; while an agent has it
//! open, requests read it through the agent's read service. Only `GET`, and
//! only with a `Host` of this loopback address (a page of another site
//! cannot read the journal through a DNS name pointed at 127.0.0.1).
//!
//! The server is bounded whatever a client sends (`serve/http.rs`: 16
//! workers, 64 connections waiting, 16 KiB of request head, 10 s to send
//! it, no request body).
//!
//! Routes: `/` (the sessions), `/s/ID` (a session's page), `/api/sessions`
//! (JSON); both lists take the filters of `sessions` as a query string
//! (`?status=unfinished&label=agent%3Ddemo&since=2026-01-02&sort=activity&limit=20`,
//! dates in UTC) and `q`, a text the id or a label must contain (a bad one
//! is a `400`); `/compare/A/B` (two sessions side by side, as `view A
//! --compare B` writes them); `/api/s/ID/events?from=SEQ` (JSON: `status`
//! and the `events` from SEQ on, as `log --json` prints them).

mod http;
mod query;

use std::net::TcpListener;
use std::process::ExitCode;

use agent_journal::{Error, SessionInfo};
use clap::Args;

use crate::cli::global::Global;
use crate::cli::open::{find_session, open_quietly};
use crate::cli::price::{self, Prices};
use crate::cli::view::{Live, compare_page, events_array, fold_json, page, status_word};
use crate::cli::{event_json, render};
use http::{Reply, Request, text};

/// The arguments of `serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    #[command(flatten)]
    prices: crate::cli::global::PricesArg,
    /// The port on 127.0.0.1 (0: any free one; the first line printed
    /// names the address).
    #[arg(long, default_value_t = 4780)]
    port: u16,
}

/// `serve [--port P]`: serves until interrupted.
pub(crate) fn serve(cli: &Global, args: &ServeArgs) -> Result<ExitCode, Error> {
    // The database must exist (and be readable) before we listen.
    drop(open_quietly(&cli.db)?);
    let listener = TcpListener::bind(("127.0.0.1", args.port)).map_err(|e| Error::Io {
        context: format!("listening on 127.0.0.1:{}", args.port),
        source: e,
    })?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(args.port);
    outln!(
        "serving {} on http://127.0.0.1:{port}/ (Ctrl-C stops)",
        cli.db.display()
    );
    let db = cli.db.clone();
    // Read once: a bad table is an error at the start, not on every page.
    let prices = args.prices.load()?;
    http::run(listener, move |request| {
        handle(&request, &db, port, &prices)
    });
    Ok(ExitCode::SUCCESS)
}

fn handle(request: &Request, db: &std::path::Path, port: u16, prices: &Prices) -> Reply {
    let allowed = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    if request.method != "GET" {
        text("405 Method Not Allowed", "only GET\n")
    } else if !request.host.as_ref().is_some_and(|h| allowed.contains(h)) {
        text("403 Forbidden", "wrong Host header\n")
    } else {
        route(db, &request.target, prices).unwrap_or_else(|e| {
            let status = match e {
                Error::InvalidInput(_) | Error::SessionNotFound(_) => "404 Not Found",
                _ => "500 Internal Server Error",
            };
            text(status, format!("{}\n", e.to_string().replace('\n', " ")))
        })
    }
}

fn route(db: &std::path::Path, target: &str, prices: &Prices) -> Result<Reply, Error> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let html = |s: String| Reply("200 OK", "text/html; charset=utf-8", s.into_bytes());
    let json = |v: String| Reply("200 OK", "application/json", v.into_bytes());
    let journal = open_quietly(db)?;
    if path == "/" || path == "/api/sessions" {
        let pairs = query::pairs(query);
        let infos = match query::select(&journal, &pairs) {
            Ok(infos) => infos,
            Err(Error::InvalidInput(why)) => {
                return Ok(text("400 Bad Request", format!("{why}\n")));
            }
            Err(e) => return Err(e),
        };
        if path == "/" {
            return Ok(html(index(&infos, &pairs)));
        }
        let list = infos
            .iter()
            .map(|i| {
                let cost = price::session_total(&journal.session(i.id)?, prices)?;
                Ok(render::info_json(i, cost))
            })
            .collect::<Result<Vec<_>, Error>>()?;
        return Ok(json(serde_json::Value::Array(list).to_string()));
    }
    if let Some((a, b)) = path
        .strip_prefix("/compare/")
        .and_then(|p| p.split_once('/'))
    {
        let (a, b) = (find_session(&journal, a)?, find_session(&journal, b)?);
        return Ok(html(compare_page(&a, &b)?));
    }
    if let Some(id) = path.strip_prefix("/s/") {
        let s = find_session(&journal, id)?;
        let live = Live {
            link_base: "/s/".into(),
            poll: format!("/api/s/{}/events", s.id()),
        };
        return Ok(html(page(&journal, &s, Some(&live), prices)?));
    }
    if let Some(id) = path
        .strip_prefix("/api/s/")
        .and_then(|p| p.strip_suffix("/events"))
    {
        let s = find_session(&journal, id)?;
        let from = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("from="))
            .map(|v| v.parse::<u64>())
            .transpose()
            .map_err(|_| Error::InvalidInput(format!("bad query {query:?}")))?
            .unwrap_or(0);
        let head = s.head();
        let info = s.info()?;
        let status = status_word(info.status);
        let events = events_array(&s, from.min(head), head)?;
        // The fold's statuses again, only when there is something new.
        let (fold, costs) = if from < head {
            (
                fold_json(&s, info.status)?.to_string(),
                price::session_costs(&s, prices)?.json(prices).to_string(),
            )
        } else {
            ("null".into(), "null".into())
        };
        return Ok(json(format!(
            "{{\"schema\":{},\"status\":\"{status}\",\"head\":{head},\"fold\":{fold},\"costs\":{costs},\"events\":{events}}}",
            event_json::SCHEMA_VERSION
        )));
    }
    Err(Error::InvalidInput(format!("no page {path:?}")))
}

/// Escapes text for HTML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The filter form of the index, filled in with the query's values.
fn form(pairs: &[(String, String)]) -> String {
    let v = |k: &str| esc(query::value(pairs, k));
    let status = query::value(pairs, "status");
    let options: String = ["", "idle", "unfinished", "finished"]
        .iter()
        .map(|s| {
            let on = if *s == status { " selected" } else { "" };
            format!(
                "<option value=\"{s}\"{on}>{}</option>",
                if s.is_empty() { "any status" } else { s }
            )
        })
        .collect();
    let sort = query::value(pairs, "sort");
    let sorts: String = [
        ("", "oldest first"),
        ("created", "newest first"),
        ("activity", "latest activity first"),
        ("events", "most events first"),
    ]
    .iter()
    .map(|(s, name)| {
        let on = if *s == sort { " selected" } else { "" };
        format!("<option value=\"{s}\"{on}>{name}</option>")
    })
    .collect();
    format!(
        "<form method=\"get\" action=\"/\"><input name=\"q\" placeholder=\"id or label text\" value=\"{}\"> \
<select name=\"status\">{options}</select> <input name=\"label\" placeholder=\"KEY=VALUE\" value=\"{}\"> \
active since <input name=\"since\" placeholder=\"YYYY-MM-DD\" size=\"10\" value=\"{}\"> \
until <input name=\"until\" placeholder=\"YYYY-MM-DD\" size=\"10\" value=\"{}\"> \
<select name=\"sort\">{sorts}</select> <input name=\"limit\" placeholder=\"limit\" size=\"5\" value=\"{}\"> \
<button>Filter</button> <a href=\"/\">all</a></form>",
        v("q"),
        v("label"),
        v("since"),
        v("until"),
        v("limit")
    )
}

/// The page listing the sessions `infos` (those the query `pairs` selects).
fn index(infos: &[SessionInfo], pairs: &[(String, String)]) -> String {
    let mut rows = String::new();
    for i in infos {
        let labels: Vec<String> = i.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let parent = i
            .forked_from
            .map(|(p, at)| {
                format!(
                    "fork of <a href=\"/s/{p}\">{}</a> at {at}",
                    render::short(p)
                )
            })
            .unwrap_or_default();
        rows.push_str(&format!(
            "<tr><td><a href=\"/s/{id}\"><code>{id}</code></a></td><td>{}</td><td>{}</td><td class=\"{st}\">{st}</td><td>{}</td><td>{parent}</td></tr>\n",
            i.created.format("%Y-%m-%d %H:%M:%S UTC"),
            i.events,
            esc(&labels.join(" ")),
            id = i.id,
            st = status_word(i.status),
        ));
    }
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>agent-journal sessions</title>\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
<style>body{{font:14px system-ui,sans-serif;margin:20px;color:#1d2330}}td,th{{padding:3px 10px;text-align:left;border-bottom:1px solid #e3e6ea}}\
.unfinished{{color:#c77c00;font-weight:600}}.finished{{color:#2e8b57}}</style></head><body>\
<h1>Sessions</h1>{}<p>{} sessions. Reload for new ones; a session's page follows its new events.</p>\
<table><tr><th>session</th><th>created</th><th>events</th><th>status</th><th>labels</th><th></th></tr>\n{rows}</table></body></html>",
        form(pairs),
        infos.len()
    )
}
