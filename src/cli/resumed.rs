//! What keeps `resume` from repeating itself: the marker each resume writes
//! where it starts, the search for a session that already resumed from the
//! same crash point (the session itself, a fork of it, its parent, a
//! sibling fork), and the forks `pending` lists.
//!
//! A session and the forks made at its crash point share the tool calls
//! left open there: whichever of them resumes first runs them, and a resume
//! of any other finds that out and does nothing. A resume in place writes
//! its marker right after the crash point; a fork made by `resume --fork`
//! writes it right after its fork point; so "already resumed" is a look at
//! a few events, never a scan of a session.

use agent_journal::{Error, Event, Session, SessionId, SessionStatus};
use serde_json::{Value, json};

/// The kind of the `Custom` event a resume appends before anything runs:
/// its payload is the JSON `{"from", "crash_point", "state"}` (the session
/// resumed, the last seq it had, its state there).
pub(crate) const RESUMED: &str = "agent_journal.resumed";

/// How many events after a crash point may precede a resume's marker.
const WINDOW: u64 = 4;

/// Appends the marker of a resume of `from` (stopped at `crash_point` in
/// `state`) to `target`, the same session or the fork it continues in.
///
/// # Errors
/// The append's.
pub(crate) fn mark(
    target: &Session,
    from: SessionId,
    crash_point: u64,
    state: &str,
) -> Result<u64, Error> {
    let payload = json!({"from": from.to_string(), "crash_point": crash_point, "state": state})
        .to_string()
        .into_bytes();
    target.append(Event::Custom {
        kind: RESUMED.into(),
        payload,
    })
}

/// The text of a marker's payload, as `log` prints it.
pub(crate) fn describe(payload: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(payload).ok()?;
    let from = v["from"].as_str()?;
    // The last 8 digits, as the text shows ids (render::short, which
    // imports this file).
    let short = from.get(from.len().saturating_sub(8)..).unwrap_or(from);
    Some(format!(
        "resumed from seq {} of {short} ({})",
        v["crash_point"].as_u64()?,
        v["state"].as_str().unwrap_or("-")
    ))
}

/// True when `s` holds, within a few events after `at`, the marker of a
/// resume of `from` from its seq `at`.
fn marked(s: &Session, from: SessionId, at: u64) -> Result<bool, Error> {
    let end = s.head().min(at + 1 + WINDOW);
    let mut found = false;
    s.for_each_event(at + 1..end, |e| {
        if let Event::Custom { kind, payload } = &e.event {
            if kind == RESUMED {
                let v: Value = serde_json::from_slice(payload).unwrap_or(Value::Null);
                found |= v["from"] == from.to_string().as_str() && v["crash_point"] == at;
            }
        }
        Ok(())
    })?;
    Ok(found)
}

/// A session that already resumed from the crash point of another.
pub(crate) struct Elsewhere {
    /// That session.
    pub(crate) session: SessionId,
    /// `fork`, `parent` or `sibling fork`: what it is to the one asked about.
    pub(crate) relation: &'static str,
    /// Its status word (`finished`, `unfinished`).
    pub(crate) status: &'static str,
}

impl Elsewhere {
    /// One line for people.
    pub(crate) fn sentence(&self) -> String {
        let next = if self.status == "finished" {
            String::new()
        } else {
            format!("; `resume {}` goes on there", self.session)
        };
        format!(
            "already resumed in its {} {} ({}){next}",
            self.relation, self.session, self.status
        )
    }
}

fn status_word(s: SessionStatus) -> &'static str {
    match s {
        SessionStatus::Idle => "idle",
        SessionStatus::Unfinished => "unfinished",
        SessionStatus::Finished => "finished",
    }
}

fn elsewhere(s: &Session, relation: &'static str) -> Result<Elsewhere, Error> {
    Ok(Elsewhere {
        session: s.id(),
        relation,
        status: status_word(s.info()?.status),
    })
}

/// The session, other than `s`, that already resumed from `s`'s crash
/// point (its last event) and so ran or runs the tool calls left open
/// there: a fork of `s` made there that went on; or, for a fork of which
/// nothing was resumed yet, its parent resumed in place from the fork
/// point, or another fork made at that point that went on.
///
/// # Errors
/// Reading the sessions involved.
pub(crate) fn resumed_elsewhere(s: &Session) -> Result<Option<Elsewhere>, Error> {
    let journal = s.journal();
    let last = s.head().saturating_sub(1);
    // A fork made at `at` reads `0..=at`, holds its fork point at `at + 1`,
    // and went on if it has more.
    let went_on = |id: SessionId, at: u64| -> Result<Option<Session>, Error> {
        let f = journal.session(id)?;
        Ok((f.head() > at + 2).then_some(f))
    };
    for (fork, at) in journal.forks_of(s.id())? {
        if at >= last {
            if let Some(f) = went_on(fork, at)? {
                return elsewhere(&f, "fork").map(Some);
            }
        }
    }
    let origin = s.state().forked_from();
    if let Some((parent, at)) = origin.filter(|(_, at)| last == at + 1) {
        let p = journal.session(parent)?;
        if marked(&p, parent, at)? {
            return elsewhere(&p, "parent").map(Some);
        }
        for (fork, fat) in journal.forks_of(parent)? {
            if fork != s.id() && fat == at {
                if let Some(f) = went_on(fork, fat)? {
                    return elsewhere(&f, "sibling fork").map(Some);
                }
            }
        }
    }
    Ok(None)
}

/// The forks of `s` for `pending`: each `{session, at, status, finished}`,
/// `finished` naming what `open` (the tool calls or turns left open in
/// `s`) the fork has finished, as `done(fork)` tells.
///
/// # Errors
/// Reading the forks.
pub(crate) fn forks_json(
    s: &Session,
    done: impl Fn(&Session) -> Vec<String>,
) -> Result<Vec<Value>, Error> {
    let journal = s.journal();
    let mut out = Vec::new();
    for (fork, at) in journal.forks_of(s.id())? {
        let f = journal.session(fork)?;
        out.push(json!({
            "session": fork.to_string(),
            "at": at,
            "status": status_word(f.info()?.status),
            "finished": done(&f),
        }));
    }
    Ok(out)
}

/// Prints the forks of [`forks_json`] for people.
pub(crate) fn print_forks(forks: &[Value]) {
    if forks.is_empty() {
        return;
    }
    outln!("forks:");
    for f in forks {
        let finished: Vec<&str> = f["finished"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let what = if finished.is_empty() {
            String::new()
        } else {
            format!("; finished what was open here: {}", finished.join(", "))
        };
        outln!(
            "  {} at seq {}: {}{what}",
            f["session"].as_str().unwrap_or(""),
            f["at"],
            f["status"].as_str().unwrap_or("")
        );
    }
}
