//! The session's own data never chooses where the tools run: its `sandbox`
//! label, a registry entry the folder does not confirm, a demo folder of
//! another session.

use super::*;

#[test]
fn an_imported_journal_whose_label_names_home_cannot_overwrite_bashrc() {
    let w = World::new();
    let home = w.home();
    let abs = home.join(".bashrc");
    let id = w.import_crafted(
        &home,
        &[
            write("call_1_1", ".bashrc"),
            write("call_1_2", path_str(&abs)),
            write("call_1_3", "../home/.bashrc"),
        ],
        &["call_1_1"],
    );
    let before = w.outside_sandbox(&w.sb());

    // Without --sandbox: refused before anything is written, fork included.
    for extra in [&[][..], &["--fork"][..]] {
        let out = w.resume(&id, None, extra);
        assert_refused(&out, &[&id, "--sandbox", path_str(&home), "not trusted"]);
    }
    assert_eq!(w.sessions(), 1, "no fork was made");
    assert_eq!(std::fs::read_to_string(&abs).expect(".bashrc"), BASHRC);

    // With --sandbox: everything lands inside it, or is refused naming the path.
    let fork = w.resume_ok(&id, Some(&w.sb()));
    assert_eq!(std::fs::read_to_string(&abs).expect(".bashrc"), BASHRC);
    assert_eq!(
        w.outside_sandbox(&w.sb()),
        before,
        "nothing outside changed"
    );
    let sb = w.sb().canonicalize().expect("sb");
    assert_eq!(
        std::fs::read_to_string(sb.join(".bashrc")).expect("inside"),
        "pwned\n"
    );
    let calls = w.calls(fork);
    assert_eq!(calls["call_1_1"].0, ToolStatus::Completed);
    assert_call_refused(&calls, "call_1_2", path_str(&abs), "absolute path");
    assert_call_refused(&calls, "call_1_3", "../home/.bashrc", "`..`");

    // Choosing a folder for the fork does not make the original trusted;
    // and the original, resumed in that fork, has nothing left to do.
    let j = w.journal();
    assert_eq!(j.record(super::REGISTRY, &id).expect("record"), None);
    drop(j);
    let out = w.resume(&id, None, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["resumed_in"], fork.to_string().as_str(), "{v}");
    assert_eq!(w.sessions(), 2, "nothing more was made");
}

#[test]
fn a_label_naming_the_sandbox_of_another_demo_session_is_not_trusted() {
    let w = World::new();
    let out = run_cli(&w.db(), &["--json", "demo", "--sandbox", path_str(&w.sb())]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let demo_sandbox = PathBuf::from(v["sandbox"].as_str().expect("sandbox"));
    let notes = std::fs::read(demo_sandbox.join("notes.txt")).expect("notes");
    let id = w.import_crafted(&demo_sandbox, &[write("call_1_1", "notes.txt")], &[]);
    assert_refused(&w.resume(&id, None, &[]), &[&id, "--sandbox"]);
    assert_eq!(
        std::fs::read(demo_sandbox.join("notes.txt")).expect("notes"),
        notes
    );
}

#[test]
fn a_forged_registry_entry_is_refused_unless_the_folder_lists_the_session() {
    let w = World::new();
    let home = w.home();
    let id = w.import_crafted(&home, &[write("call_1_1", ".bashrc")], &[]);
    // Someone who can write into the database directory names home there.
    forge_registry(&w, &id, &home);
    let out = w.resume(&id, None, &[]);
    assert_refused(&out, &[&id, path_str(&home), ".agent-journal-sandbox"]);
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).expect("rc"),
        BASHRC
    );
    assert_eq!(w.sessions(), 1);
}

#[test]
fn a_fork_made_by_resume_keeps_its_sandbox_and_resumes_without_naming_it() {
    let w = World::new();
    let id = w.import_crafted(&w.home(), &[write("call_1_1", "first.txt")], &[]);
    let fork = w.resume_ok(&id, Some(&w.sb()));
    // The fork stops again with a call pending (a crash in a later run).
    {
        let j = w.journal();
        let s = j.session(fork).expect("fork");
        let e = s
            .start_evaluation_with_messages(
                "demo",
                "file-assistant",
                "scripted",
                &[(Role::System, "s".into()), (Role::User, "u".into())],
            )
            .expect("evaluation");
        e.assistant(
            "again",
            vec![ToolCallRecord::new(
                "call_1_1",
                "write_file",
                json!({"path": "second.txt", "content": "2"}).to_string(),
            )],
        )
        .expect("assistant");
    }
    let again = w.resume_ok(&fork.to_string(), None);
    let sb = w.sb().canonicalize().expect("sb");
    assert_eq!(
        std::fs::read_to_string(sb.join("second.txt")).expect("second"),
        "2"
    );
    assert_eq!(
        w.calls(again)["call_1_1"],
        (ToolStatus::Completed, "wrote 1 bytes to second.txt".into()),
        "same call id, other evaluation: its own record"
    );
    assert_eq!(
        std::fs::read_to_string(w.home().join(".bashrc")).expect("rc"),
        BASHRC
    );
}
