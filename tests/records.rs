//! The record area (`Journal::put_record`) on every store, and the copy
//! intents kept there: a copy that stops half-way leaves no session that
//! shows as whole, through the library and through the binary, and the
//! next `copy` finishes it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use agent_journal::maintenance::ProblemKind;
use agent_journal::{Durability, Error, Event, Journal, JournalConfig, SessionId};

use crate::common::{backends, custom, path_str, run_cli};

#[test]
fn records_are_put_read_and_removed_on_every_store_and_survive_a_reopen() {
    for b in backends() {
        let j = &b.journal;
        assert_eq!(j.record("app", "k").expect("read"), None, "{}", b.name);
        j.put_record("app", "k", b"v1").expect("put");
        j.put_record("app", "k", b"v2").expect("put again");
        j.put_record("app", "a", b"").expect("put");
        j.put_record("other", "k", b"x").expect("put");
        assert_eq!(j.record("app", "k").expect("read"), Some(b"v2".to_vec()));
        assert_eq!(
            j.records("app").expect("list"),
            vec![
                ("a".to_owned(), Vec::new()),
                ("k".to_owned(), b"v2".to_vec())
            ],
            "{}",
            b.name
        );
        j.remove_record("app", "a").expect("remove");
        j.remove_record("app", "never")
            .expect("remove a missing one");
        assert!(
            matches!(
                j.put_record("agent_journal.copying", "k", b""),
                Err(Error::InvalidInput(_))
            ),
            "{}: the journal's own namespace is refused",
            b.name
        );
        assert!(matches!(
            j.put_record("app", "big", &vec![0; (1 << 20) + 1]),
            Err(Error::InvalidInput(_))
        ));
        // Records are not sessions, and no session's events hold them.
        assert!(j.sessions().expect("sessions").is_empty(), "{}", b.name);
    }
    // Durable: a sled database reopened, and a PostgreSQL journal opened
    // again from the URL, read them back.
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let config = || JournalConfig {
        durability: Durability::Buffered,
        ..JournalConfig::default()
    };
    {
        let j = Journal::open_with(&db, config()).expect("open");
        j.put_record("app", "k", b"kept").expect("put");
    }
    let j = Journal::open_with(&db, config()).expect("reopen");
    assert_eq!(j.record("app", "k").expect("read"), Some(b"kept".to_vec()));
    #[cfg(feature = "postgres")]
    if let Some(url) = crate::pg_server::fresh_url() {
        Journal::open_with(&url, config())
            .expect("open")
            .put_record("app", "k", b"kept")
            .expect("put");
        let again = Journal::open_with(&url, config()).expect("again");
        assert_eq!(
            again.record("app", "k").expect("read"),
            Some(b"kept".to_vec())
        );
    }
    // An exported file has none and takes none; an import writes none.
    let file = dir.path().join("x.ajournal");
    j.create_session().expect("session");
    j.export_journal(&[], &file, |_| {}).expect("export");
    let f = Journal::open(&file).expect("open the file");
    assert!(f.records("app").expect("list").is_empty());
    assert!(f.put_record("app", "k", b"v").is_err());
}

/// A source of three sessions of `events` events each (`custom(n)` after
/// `SessionOpened`).
fn source(path: &Path, events: u64) -> (Journal, Vec<SessionId>) {
    let j = Journal::open_with(
        path,
        JournalConfig {
            durability: Durability::Buffered,
            ..JournalConfig::default()
        },
    )
    .expect("open the source");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let s = j.create_session().expect("session");
        let mut n = 1;
        while n < events {
            let end = (n + 500).min(events);
            s.append_batch((n..end).map(custom).collect::<Vec<Event>>())
                .expect("append");
            n = end;
        }
        ids.push(s.id());
    }
    j.flush().expect("flush");
    (j, ids)
}

/// Copies `from` into the journal at `to` and stops the copy (a panic out
/// of its progress callback, as a crash would) once `stop_after` events
/// were written.
fn copy_and_stop(from: &Journal, to: &Path, stop_after: u64) {
    let dest = Journal::open(to).expect("open the destination");
    let mut written = 0;
    let stopped = catch_unwind(AssertUnwindSafe(|| {
        from.copy_to(&dest, |n| {
            written += n;
            if written >= stop_after {
                panic!("the copy stops here");
            }
        })
    }));
    assert!(stopped.is_err(), "the copy was stopped");
}

/// The events of every session `j` lists.
fn contents(j: &Journal) -> Vec<(SessionId, Vec<agent_journal::Envelope>)> {
    j.sessions()
        .expect("sessions")
        .into_iter()
        .map(|id| {
            (
                id,
                j.session(id).expect("session").events(..).expect("events"),
            )
        })
        .collect()
}

/// A copy stopped after its first 4,096 events (of the first session's
/// 5,000), into the journal at `dest`: nothing shows that session as
/// whole, and `copy` run again finishes every session.
fn a_stopped_copy_is_hidden_and_finished_by_the_next(dest: &Path) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, ids) = source(&dir.path().join("src"), 5000);
    copy_and_stop(&src, dest, 1);
    {
        let j = Journal::open(dest).expect("open");
        // The first session's first chunk is there, and hidden.
        assert!(j.sessions().expect("sessions").is_empty());
        assert!(matches!(
            j.session(ids[0]),
            Err(Error::IncompleteSession(id)) if id == ids[0]
        ));
        let report = j.verify(None, |_| {}).expect("verify");
        assert!(report.has_damage(), "{:?}", report.problems);
        assert!(
            report
                .problems
                .iter()
                .any(|p| p.session == ids[0] && p.kind == ProblemKind::Incomplete),
            "{:?}",
            report.problems
        );
    }
    // Through the binary: not listed, `verify` exits 3 naming it, a read of
    // it by its full id exits 3.
    let out = run_cli(dest, &["--json", "sessions"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&ids[0].to_string()));
    let out = run_cli(dest, &["verify"]);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(
        said.contains("incomplete copy") && said.contains(&ids[0].to_string()),
        "{said}"
    );
    let out = run_cli(dest, &["pending", &ids[0].to_string()]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `copy` again: it replaces what was left, and copies everything.
    drop(src);
    let out = crate::common::cli_command(Path::new("unused"))
        .args([
            "copy",
            "--from",
            path_str(&dir.path().join("src")),
            "--to",
            path_str(dest),
        ])
        .output()
        .expect("copy");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_cli(dest, &["verify"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let src = Journal::open(dir.path().join("src")).expect("open the source");
    let j = Journal::open(dest).expect("open");
    assert_eq!(contents(&j), contents(&src));
    assert_eq!(j.sessions().expect("sessions"), ids);
    // Once whole, a copy again is refused as before: nothing is replaced.
    drop(j);
    let out = crate::common::cli_command(Path::new("unused"))
        .args([
            "copy",
            "--from",
            path_str(&dir.path().join("src")),
            "--to",
            path_str(dest),
        ])
        .output()
        .expect("copy");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
}

#[test]
fn a_copy_to_sled_stopped_half_way_is_hidden_and_the_next_copy_finishes_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    a_stopped_copy_is_hidden_and_finished_by_the_next(&dir.path().join("dest"));
}

#[cfg(feature = "postgres")]
#[test]
fn a_copy_to_postgres_stopped_half_way_is_hidden_and_the_next_copy_finishes_it() {
    let Some(url) = crate::pg_server::fresh_url() else {
        return;
    };
    a_stopped_copy_is_hidden_and_finished_by_the_next(Path::new(&url));
}

#[test]
fn a_session_a_copy_left_in_part_can_be_deleted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (src, ids) = source(&dir.path().join("src"), 5000);
    let dest = dir.path().join("dest");
    copy_and_stop(&src, &dest, 1);
    let j = Journal::open(&dest).expect("open");
    j.delete_session(ids[0], false).expect("delete");
    assert!(j.verify(None, |_| {}).expect("verify").is_clean());
    assert_eq!(j.stream_len(ids[0]).expect("len"), None);
}
