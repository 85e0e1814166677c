//! Sessions copied by the binary: `export --format journal` then `import`
//! into another database (and the exported file read as a database of its
//! own), and `fork`.

use super::{Demo, aj, kind};
use crate::common::path_str;

#[test]
fn an_exported_journal_imports_elsewhere_and_serves_read_commands() {
    let d = Demo::new();
    let file = d.path("run.ajournal");
    let out = d.run(&[
        "export",
        &d.id,
        "--format",
        "journal",
        "-o",
        path_str(&file),
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "no progress bar on a pipe: {out:?}");
    assert!(out.stdout.contains("wrote 23 events"), "{out:?}");
    let original = d.run(&["log", &d.id, "--json"]).stdout;

    let other = d.path("other");
    let out = aj(&other, &["import", path_str(&file), "--format", "journal"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains(&d.id), "{out:?}");
    assert_eq!(aj(&other, &["log", &d.id, "--json"]).stdout, original);

    // A second import says the session is here already (exit 0); with
    // --again it is refused (the id is taken); neither changes anything.
    let out = aj(&other, &["import", path_str(&file), "--format", "journal"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains(&format!("already imported as {}", d.id)),
        "{out:?}"
    );
    let line = aj(
        &other,
        &["import", path_str(&file), "--format", "journal", "--again"],
    )
    .assert_error(1)
    .to_owned();
    assert!(
        line.contains(&d.id) && line.contains("already exists"),
        "{line}"
    );
    assert_eq!(aj(&other, &["log", &d.id, "--json"]).stdout, original);
    assert_eq!(aj(&other, &["sessions", "--json"]).json_lines().len(), 1);

    // The file itself is a read-only database.
    let out = aj(&file, &["sessions", "--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.json_lines()[0]["id"], d.id.as_str());
    assert_eq!(out.json_lines()[0]["events"], 23);
    assert_eq!(aj(&file, &["log", &d.id, "--json"]).stdout, original);
    assert_eq!(aj(&file, &["log", &d.id]).lines().len(), 23);
    let out = aj(&file, &["show", &d.id]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("completed"), "{out:?}");
    let out = aj(&file, &["verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");

    // --at belongs to wink exports.
    let out = d.run(&[
        "export",
        &d.id,
        "--format",
        "journal",
        "--at",
        "3",
        "-o",
        path_str(&d.path("x.ajournal")),
    ]);
    out.assert_error(1);
    assert!(!d.path("x.ajournal").exists());

    let out = d.run(&["export", &d.id, "--format", "wink"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = out.json();
    assert_eq!(v["tags"]["session"], d.id.as_str());
    assert_eq!(v["tags"]["seq"], "22");
    assert!(v["slices"].is_array(), "{v}");
}

#[test]
fn fork_shares_the_parents_prefix_then_holds_its_marker() {
    let d = Demo::new();
    let out = d.run(&["fork", &d.id, "--at", "5"]);
    assert_eq!(out.code, 0, "{out:?}");
    let new_id = out
        .stdout
        .strip_prefix("forked session ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("{out:?}"))
        .to_owned();
    assert_ne!(new_id, d.id);

    let parent = d.events(&d.db, &d.id);
    let fork = d.events(&d.db, &new_id);
    assert_eq!(fork.len(), 7, "the parent's events 0..=5, then the marker");
    // The prefix is the parent's own events: same session, seqs and times.
    assert_eq!(fork[..6], parent[..6]);
    assert_eq!(kind(&fork[6]), "forked");
    assert_eq!(fork[6]["seq"], 6);
    assert_eq!(fork[6]["session"], new_id.as_str());
    assert_eq!(fork[6]["parent"], d.id.as_str());
    assert_eq!(fork[6]["parent_seq"], 5);
    let text = d.run(&["log", &new_id]);
    let lines = text.lines();
    assert!(
        lines[0].contains(" session_opened ") && lines[6].contains(" forked "),
        "{text:?}"
    );
    let listed = d.run(&["sessions", "--json"]).json_lines();
    assert_eq!(listed.len(), 2);
    let f = listed.iter().find(|s| s["id"] == new_id.as_str()).unwrap();
    assert_eq!(f["parent"]["id"], d.id.as_str());
    assert_eq!(f["parent"]["at"], 5);
    assert_eq!(d.run(&["verify"]).code, 0);

    // The parent cannot go while the fork reads it.
    let line = d
        .run(&["sessions", "--delete", &d.id, "--force"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("forks") && line.contains(&new_id), "{line}");

    let line = d
        .run(&["fork", &d.id, "--at", "23"])
        .assert_error(1)
        .to_owned();
    assert!(line.contains("seq 23"), "{line}");
    assert_eq!(d.run(&["sessions", "--json"]).json_lines().len(), 2);
}
