//! The binary misused or in a hostile place: usage errors exit 2 and
//! create nothing, paths that are not databases and a locked database are
//! one-line errors naming the path (exit 1), and a closed stdout is not a
//! panic.

use std::process::Stdio;

use super::{Demo, aj};
use crate::common::{cli_command, path_str};

#[test]
fn usage_errors_exit_2_and_touch_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let id = agent_journal::SessionId::new().to_string();
    for args in [
        vec!["frobnicate"],
        vec!["log"],
        vec!["log", &id, "--from", "five"],
        vec!["fork", &id],
        vec!["export", &id],
        vec!["export", &id, "--format", "xml"],
        vec!["import", "x.ajournal", "--format", "yaml"],
        vec![],
    ] {
        let out = aj(&db, &args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(!out.stderr.is_empty(), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }
    assert!(!db.exists(), "a usage error created the database");
}

#[test]
fn paths_that_are_not_databases_exit_1_and_are_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing");
    for cmd in [&["sessions"][..], &["verify"], &["log", "0"]] {
        let line = aj(&missing, cmd).assert_error(1).to_owned();
        assert!(line.contains(path_str(&missing)), "{cmd:?}: {line}");
        assert!(!missing.exists(), "{cmd:?} created {}", missing.display());
    }

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "just some notes\n").expect("write");
    let line = aj(&text, &["sessions"]).assert_error(1).to_owned();
    assert!(
        line.contains("not an agent-journal database") && line.contains(path_str(&text)),
        "{line}"
    );
    assert_eq!(
        std::fs::read_to_string(&text).expect("read"),
        "just some notes\n"
    );
}

#[test]
fn a_locked_database_is_reported_by_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    // A process that offers no read service: every command is refused.
    let journal = agent_journal::Journal::open_with(
        &db,
        agent_journal::JournalConfig {
            serve_readers: false,
            ..Default::default()
        },
    )
    .expect("open");
    journal.create_session().expect("create");
    for cmd in [&["sessions"][..], &["demo"]] {
        let line = aj(&db, cmd).assert_error(1).to_owned();
        assert!(
            line.contains("locked") && line.contains(path_str(&db)),
            "{cmd:?}: {line}"
        );
    }
    assert_eq!(journal.sessions().expect("sessions").len(), 1);
    drop(journal);
    // One that does (the default): reading goes through it, writing is
    // still refused by path.
    let journal = agent_journal::Journal::open(&db).expect("open");
    let out = aj(&db, &["sessions", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_lines().len(), 1);
    let line = aj(&db, &["demo"]).assert_error(1).to_owned();
    assert!(
        line.contains("locked") && line.contains(path_str(&db)),
        "{line}"
    );
    drop(journal);
    let out = aj(&db, &["sessions", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_lines().len(), 1);
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    let d = Demo::new();
    for cmd in ["log", "show"] {
        let mut child = cli_command(&d.db)
            .args([cmd, d.id.as_str()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // Close the reading end before the child prints (it opens sled first).
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("panicked") && out.status.code() != Some(101),
            "{cmd}: {:?} {stderr}",
            out.status
        );
    }
}

/// `--no-pager` is a flag of the commands that page (`log`, `show`),
/// `--compress` of the commands that create a database (`demo`, `chat`,
/// `import`, `copy`; `compact` has its own) and `--prices` of those that
/// show a run's cost (`stats`, `sessions`, `view`, `serve`): every other
/// command's help leaves them out and refuses them (exit 2), and so does
/// the top level.
#[test]
fn no_pager_and_compress_belong_to_the_commands_they_change() {
    let d = Demo::new();
    let help = d.run(&["--help"]);
    assert_eq!(help.code, 0, "{help:?}");
    assert!(!help.stdout.contains("--no-pager"), "{help:?}");
    assert!(!help.stdout.contains("--compress"), "{help:?}");
    assert!(!help.stdout.contains("--prices"), "{help:?}");
    let commands: Vec<&str> = help
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() > 20, "{commands:?}");
    let (pagers, creators, costs) = (
        ["log", "show"],
        ["demo", "chat", "import", "copy", "compact"],
        ["stats", "sessions", "view", "serve"],
    );
    for c in &commands {
        let out = d.run(&[c, "--help"]);
        assert_eq!(out.code, 0, "{c}: {out:?}");
        let has = |flag: &str| out.stdout.lines().any(|l| l.trim_start().starts_with(flag));
        assert_eq!(has("--no-pager"), pagers.contains(c), "{c}: {}", out.stdout);
        assert_eq!(
            has("--compress"),
            creators.contains(c),
            "{c}: {}",
            out.stdout
        );
        assert_eq!(has("--prices"), costs.contains(c), "{c}: {}", out.stdout);
    }
    for args in [
        &["compact-history", "--last", "--no-pager"][..],
        &["stats", &d.id, "--no-pager"],
        &["pending", &d.id, "--no-pager"],
        &["--no-pager", "log", &d.id],
        &["export", &d.id, "--compress"],
        &["fork", &d.id, "--at", "3", "--compress"],
        &["log", &d.id, "--compress"],
        &["--compress", "demo"],
        &["log", &d.id, "--prices", "p.json"],
        &["--prices", "p.json", "stats", &d.id],
    ] {
        let out = d.run(args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert!(out.stderr.starts_with("error: "), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    }
    let log = d.run(&["log", &d.id, "--no-pager"]);
    assert_eq!(log.code, 0, "{log:?}");
    assert_eq!(log.stdout.lines().count(), 23, "{log:?}");
    assert_eq!(d.run(&["show", &d.id, "--no-pager"]).code, 0);
    // `import --compress` makes a compressed database.
    let file = d.export_journal("one.ajournal");
    let new = d.dir.path().join("new");
    let out = aj(&new, &["import", path_str(&file), "--compress"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = aj(
        &new,
        &[
            "--json",
            "compact",
            "--to",
            path_str(&d.dir.path().join("c")),
        ],
    )
    .json();
    assert_eq!(v["compressed"], true, "{v}");
}
