//! Finding sessions: the session argument of every command that takes one
//! (an id, a unique prefix or suffix of one, or `--last`), the candidates
//! an ambiguous prefix matches, and the filters and orders of `sessions`.

use agent_journal::{Error, Journal, SessionId, SessionInfo, SessionStatus};
use chrono::{DateTime, Local, NaiveDate, TimeZone, Utc};
use clap::{Args, ValueEnum};

use crate::cli::render;

/// Why an empty or blank session argument is refused.
pub(crate) const BLANK_SESSION: &str =
    "a session id or prefix cannot be empty or blank (it would match every session)";

/// The value parser of every session argument (a full id or a prefix of
/// one): an empty or blank one is a usage error, because the empty string
/// is a prefix of every id (`sessions --delete ""` would pick the only
/// session).
pub(crate) fn session_arg(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err(BLANK_SESSION.into());
    }
    Ok(text.to_owned())
}

/// How many candidates an ambiguous prefix's error names at most.
const CANDIDATES_SHOWN: usize = 10;

/// The session a command works on: `SESSION` (a full id, or a unique
/// prefix or suffix of one) or `--last`, exactly one of them (clap refuses
/// both or neither, exit 2).
#[derive(Args, Debug, Clone)]
#[group(id = "session_ref", required = true, multiple = false)]
pub(crate) struct SessionRef {
    /// Session id (or a unique prefix or suffix of it).
    #[arg(value_name = "SESSION", value_parser = session_arg)]
    session: Option<String>,
    /// Instead of SESSION: the session with the latest activity (its last
    /// event appended last).
    #[arg(long)]
    last: bool,
}

/// A session as a command names it: by id text, or the latest active.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Pick<'a> {
    /// A full id, or a unique prefix or suffix of one.
    Id(&'a str),
    /// The session with the latest activity (`--last`).
    Last,
}

impl<'a> From<&'a str> for Pick<'a> {
    fn from(text: &'a str) -> Self {
        Pick::Id(text)
    }
}

impl<'a> From<&'a String> for Pick<'a> {
    fn from(text: &'a String) -> Self {
        Pick::Id(text)
    }
}

impl<'a> From<&'a SessionRef> for Pick<'a> {
    fn from(r: &'a SessionRef) -> Self {
        match &r.session {
            Some(text) if !r.last => Pick::Id(text),
            // clap makes them exclusive and one required; `--last` wins
            // whatever the caller.
            _ => Pick::Last,
        }
    }
}

/// The session with the latest activity: the greatest last-activity time,
/// ties to the greatest (latest made) id.
///
/// # Errors
///
/// [`Error::InvalidInput`] when the database holds no session; the
/// errors of reading one.
pub(crate) fn last_session(journal: &Journal) -> Result<SessionId, Error> {
    let mut best: Option<(DateTime<Utc>, SessionId)> = None;
    for id in journal.sessions()? {
        let at = journal.session(id)?.info()?.last_activity;
        if best.is_none_or(|b| (at, id) > b) {
            best = Some((at, id));
        }
    }
    best.map(|(_, id)| id)
        .ok_or_else(|| Error::InvalidInput("--last: the database holds no session".to_owned()))
}

/// The error of a prefix that matches more than one session: one line
/// naming each candidate (id, created, status), the first
/// [`CANDIDATES_SHOWN`] of them.
pub(crate) fn ambiguous(journal: &Journal, text: &str, ids: &[SessionId]) -> Error {
    let mut listed: Vec<String> = ids
        .iter()
        .take(CANDIDATES_SHOWN)
        .map(|id| match journal.session(*id).and_then(|s| s.info()) {
            Ok(i) => format!(
                "{id} (created {}, {})",
                crate::cli::output::json_time(i.created),
                render::status(i.status)
            ),
            Err(e) => format!("{id} (unreadable: {e})"),
        })
        .collect();
    if ids.len() > CANDIDATES_SHOWN {
        listed.push(format!("and {} more", ids.len() - CANDIDATES_SHOWN));
    }
    Error::InvalidInput(format!(
        "{text:?} matches {} sessions; give more of the id: {}",
        ids.len(),
        listed.join("; ")
    ))
}

/// A status `sessions --status` selects.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StatusArg {
    /// No evaluation (or conversation turn) was ever started.
    Idle,
    /// The latest evaluation (or a turn) has not finished: running, or crashed.
    Unfinished,
    /// The latest evaluation (or every turn) finished.
    Finished,
}

impl StatusArg {
    /// Whether a session of status `s` is selected.
    fn matches(self, s: SessionStatus) -> bool {
        matches!(
            (self, s),
            (StatusArg::Idle, SessionStatus::Idle)
                | (StatusArg::Unfinished, SessionStatus::Unfinished)
                | (StatusArg::Finished, SessionStatus::Finished)
        )
    }
}

/// The orders of `sessions --sort`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SortKey {
    /// Newest first (by creation time).
    Created,
    /// Latest activity first.
    Activity,
    /// Most events first.
    Events,
}

/// A time `--since`/`--until` takes: an RFC 3339 instant, or a date.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum When {
    /// An instant.
    At(DateTime<Utc>),
    /// A whole day, in local time (UTC under `--utc`).
    Day(NaiveDate),
}

/// The value parser of `--since`/`--until`: RFC 3339
/// (`2026-01-02T03:04:05Z`, `2026-01-02T03:04:05+01:00`) or `YYYY-MM-DD`.
pub(crate) fn when_arg(text: &str) -> Result<When, String> {
    let text = text.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(When::At(at.with_timezone(&Utc)));
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(When::Day)
        .map_err(|_| {
            "expected an RFC 3339 time (2026-01-02T03:04:05Z) or a date (2026-01-02)".into()
        })
}

/// The value parser of `--label K=V`.
pub(crate) fn label_arg(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

/// The filters and the order of `sessions`.
#[derive(Args, Debug, Default)]
pub(crate) struct ListArgs {
    /// Only sessions of this status (repeat for any of several).
    #[arg(long, value_enum, value_name = "STATUS")]
    status: Vec<StatusArg>,
    /// Only sessions carrying this label (repeat: all must match).
    #[arg(long, value_name = "KEY=VALUE", value_parser = label_arg)]
    label: Vec<(String, String)>,
    /// Only sessions active at or after this time (their last event's):
    /// RFC 3339, or a date YYYY-MM-DD meaning its midnight, local time
    /// (UTC under --utc).
    #[arg(long, value_name = "TIME", value_parser = when_arg)]
    since: Option<When>,
    /// Only sessions whose last activity is at or before this time: RFC
    /// 3339, or a date YYYY-MM-DD meaning the whole of that day, local
    /// time (UTC under --utc).
    #[arg(long, value_name = "TIME", value_parser = when_arg)]
    until: Option<When>,
    /// At most N sessions (the first N of the order).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Order: created (newest first), activity (latest first) or events
    /// (most first). Default: the database's order, oldest first.
    #[arg(long, value_enum, value_name = "KEY")]
    sort: Option<SortKey>,
}

impl ListArgs {
    /// The filters of a query string's pairs (`serve`'s index:
    /// `status`, `label` and `since`, `until`, `limit`, `sort`, each as the
    /// option of the same name takes it; `status` and `label` repeatable).
    /// An empty value is no filter (what an HTML form sends for an empty
    /// field); `q` is left to the caller.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] naming the first key or value refused.
    pub(crate) fn from_pairs(pairs: &[(String, String)]) -> Result<ListArgs, Error> {
        let mut list = ListArgs::default();
        for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
            let bad =
                |why: String| Error::InvalidInput(format!("bad {k}={v:?} in the query: {why}"));
            match k.as_str() {
                "status" => list.status.push(StatusArg::from_str(v, true).map_err(bad)?),
                "label" => list.label.push(label_arg(v).map_err(bad)?),
                "since" => list.since = Some(when_arg(v).map_err(bad)?),
                "until" => list.until = Some(when_arg(v).map_err(bad)?),
                "limit" => list.limit = Some(v.parse().map_err(|_| bad("not a number".into()))?),
                "sort" => list.sort = Some(SortKey::from_str(v, true).map_err(bad)?),
                "q" => {}
                _ => {
                    return Err(Error::InvalidInput(format!(
                        "unknown key {k:?} in the query"
                    )));
                }
            }
        }
        Ok(list)
    }
}

/// [`ListArgs`] with its times resolved: what selects a session.
pub(crate) struct Selection<'a> {
    args: &'a ListArgs,
    since: Option<DateTime<Utc>>,
    /// Exclusive.
    until: Option<DateTime<Utc>>,
}

impl ListArgs {
    /// The selection, dates read in local time (UTC if `utc`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for a date that has no midnight in the local
    /// zone, or `--since` after `--until`.
    pub(crate) fn select(&self, utc: bool) -> Result<Selection<'_>, Error> {
        let since = self.since.map(|w| start(w, utc, false)).transpose()?;
        let until = self.until.map(|w| start(w, utc, true)).transpose()?;
        if let (Some(a), Some(b)) = (since, until) {
            if a >= b {
                return Err(Error::InvalidInput(
                    "--since is after --until: no session can match".to_owned(),
                ));
            }
        }
        Ok(Selection {
            args: self,
            since,
            until,
        })
    }

    /// Whether the output must be gathered and sorted before printing.
    pub(crate) fn sorted(&self) -> bool {
        self.sort.is_some()
    }
}

/// The first instant of `w` (`after`: the first instant after it, an
/// exclusive end).
fn start(w: When, utc: bool, after: bool) -> Result<DateTime<Utc>, Error> {
    let day = match w {
        When::At(at) => {
            return Ok(if after {
                at + chrono::Duration::microseconds(1)
            } else {
                at
            });
        }
        When::Day(d) if after => d.succ_opt().unwrap_or(d),
        When::Day(d) => d,
    };
    let midnight = day.and_hms_opt(0, 0, 0).unwrap_or_default();
    if utc {
        return Ok(Utc.from_utc_datetime(&midnight));
    }
    Local
        .from_local_datetime(&midnight)
        .earliest()
        .map(|t| t.with_timezone(&Utc))
        .ok_or_else(|| Error::InvalidInput(format!("{day} has no midnight in the local time zone")))
}

impl Selection<'_> {
    /// Whether `i` passes every filter.
    pub(crate) fn keeps(&self, i: &SessionInfo) -> bool {
        (self.args.status.is_empty() || self.args.status.iter().any(|s| s.matches(i.status)))
            && self
                .args
                .label
                .iter()
                .all(|(k, v)| i.labels.iter().any(|(ik, iv)| ik == k && iv == v))
            && self.since.is_none_or(|t| i.last_activity >= t)
            && self.until.is_none_or(|t| i.last_activity < t)
    }

    /// Whether `printed` sessions reach `--limit`.
    pub(crate) fn full(&self, printed: usize) -> bool {
        self.args.limit.is_some_and(|n| printed >= n)
    }

    /// Sorts `infos` by `--sort` (stable: ties keep the database's order)
    /// and cuts them to `--limit`.
    pub(crate) fn order(&self, infos: &mut Vec<SessionInfo>) {
        match self.args.sort {
            Some(SortKey::Created) => infos.sort_by_key(|i| std::cmp::Reverse(i.created)),
            Some(SortKey::Activity) => infos.sort_by_key(|i| std::cmp::Reverse(i.last_activity)),
            Some(SortKey::Events) => infos.sort_by_key(|i| std::cmp::Reverse(i.events)),
            None => {}
        }
        if let Some(n) = self.args.limit {
            infos.truncate(n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_labels_parse_or_are_refused() {
        assert!(matches!(when_arg("2026-01-02"), Ok(When::Day(_))));
        assert!(matches!(when_arg("2026-01-02T03:04:05Z"), Ok(When::At(_))));
        assert!(matches!(
            when_arg("2026-01-02T03:04:05+01:00"),
            Ok(When::At(_))
        ));
        assert!(when_arg("yesterday").is_err());
        assert!(when_arg("2026-13-01").is_err());
        assert_eq!(label_arg("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert_eq!(label_arg("a="), Ok(("a".into(), String::new())));
        assert!(label_arg("=b").is_err());
        assert!(label_arg("ab").is_err());
    }

    #[test]
    fn a_date_until_covers_its_whole_day() {
        let d = NaiveDate::from_ymd_opt(2026, 1, 2).expect("a date");
        let end = start(When::Day(d), true, true).expect("an end");
        assert_eq!(end.to_rfc3339(), "2026-01-03T00:00:00+00:00");
    }
}
