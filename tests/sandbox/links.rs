//! Symbolic and hard links inside the sandbox are not followed, for reads,
//! writes, listings and the demo's own records.

use super::*;

#[test]
fn a_symlink_inside_the_sandbox_is_not_followed_by_a_resumed_demo() {
    let w = World::new();
    // Event 5 is the assistant message: both write_file calls are pending.
    let out = run_cli(
        &w.db(),
        &["demo", "--sandbox", path_str(&w.sb()), "--crash-after", "5"],
    );
    assert!(!out.status.success());
    let sandbox = std::fs::read_dir(w.sb())
        .expect("sb")
        .flatten()
        .next()
        .expect("the demo's sandbox")
        .path();
    let target = w.outside().join("secret.txt");
    symlink(&target, &sandbox.join("notes.txt"));
    let id = w.journal().sessions().expect("sessions")[0].to_string();
    let before = w.outside_sandbox(&sandbox);

    // A session demo made here resumes without --sandbox.
    let fork = w.resume_ok(&id, None);
    assert_eq!(
        w.outside_sandbox(&sandbox),
        before,
        "nothing outside changed"
    );
    assert_eq!(
        std::fs::read_to_string(&target).expect("target"),
        secret_text()
    );
    let calls = w.calls(fork);
    let notes = sandbox.join("notes.txt");
    assert_call_refused(&calls, "call_1_1", path_str(&notes), "symbolic link");
    assert_eq!(calls["call_1_2"].0, ToolStatus::Completed);
    assert_call_refused(&calls, "call_2_1", path_str(&notes), "symbolic link");
    let all = w.all_text();
    assert!(
        !all.contains(SECRET) && !all.contains(SECRET_COUNT),
        "{all}"
    );
}

#[test]
fn symlinks_and_hard_links_inside_the_sandbox_are_not_followed_for_reads_or_writes() {
    let w = World::new();
    let sb = w.sb();
    std::fs::create_dir_all(&sb).expect("sb");
    let secret = w.outside().join("secret.txt");
    symlink(&secret, &sb.join("linkfile"));
    symlink(&w.outside().join("dir"), &sb.join("linkdir"));
    symlink(&w.outside().join("new.txt"), &sb.join("dangling"));
    std::fs::hard_link(&secret, sb.join("hardlink")).expect("hard link");
    let status = std::process::Command::new("mkfifo")
        .arg(sb.join("fifo"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let id = w.import_crafted(
        &w.home(),
        &[
            write("w_file", "linkfile"),
            write("w_dir", "linkdir/new.txt"),
            write("w_dangling", "dangling"),
            write("w_hard", "hardlink"),
            call("r_file", "word_count", json!({"path": "linkfile"})),
            call(
                "r_dir",
                "word_count",
                json!({"path": format!("linkdir/{SECRET_NAME}")}),
            ),
            call("r_hard", "word_count", json!({"path": "hardlink"})),
            call("r_fifo", "word_count", json!({"path": "fifo"})),
            call("l_dir", "list_dir", json!({"path": "linkdir"})),
            call("l_dir_slash", "list_dir", json!({"path": "linkdir/."})),
        ],
        &[],
    );
    let before = w.outside_sandbox(&sb);
    let fork = w.resume_ok(&id, Some(&sb));
    assert_eq!(w.outside_sandbox(&sb), before, "nothing outside changed");
    assert!(!w.outside().join("new.txt").exists());
    let c = w.calls(fork);
    let at = |p: &str| sb.canonicalize().expect("sb").join(p).display().to_string();
    for (call, path, why) in [
        ("w_file", "linkfile", "symbolic link"),
        ("w_dir", "linkdir", "symbolic link"),
        ("w_dangling", "dangling", "symbolic link"),
        ("w_hard", "hardlink", "hard links"),
        ("r_file", "linkfile", "symbolic link"),
        ("r_dir", "linkdir", "symbolic link"),
        ("r_hard", "hardlink", "hard links"),
        ("r_fifo", "fifo", "not a plain file"),
        ("l_dir", "linkdir", "symbolic link"),
        ("l_dir_slash", "linkdir", "symbolic link"),
    ] {
        assert_call_refused(&c, call, &at(path), why);
    }
    let all = w.all_text();
    for leak in [SECRET, SECRET_NAME, SECRET_COUNT] {
        assert!(!all.contains(leak), "{leak}: {all}");
    }
}

#[test]
fn a_symlinked_calls_folder_or_log_is_not_followed() {
    let w = World::new();
    let sb = w.sb();
    std::fs::create_dir_all(&sb).expect("sb");
    std::fs::create_dir_all(w.outside().join("calls")).expect("calls");
    symlink(&w.outside().join("calls"), &sb.join(".calls"));
    let id = w.import_crafted(&w.home(), &[write("call_1_1", "a.txt")], &["call_1_1"]);
    let before = w.outside_sandbox(&sb);
    let fork = w.resume_ok(&id, Some(&sb));
    assert_eq!(w.outside_sandbox(&sb), before);
    let c = w.calls(fork);
    let calls_dir = sb.canonicalize().expect("sb").join(".calls");
    assert_call_refused(&c, "call_1_1", path_str(&calls_dir), "symbolic link");
    assert!(!sb.join("a.txt").exists(), "refused before writing");

    let w = World::new();
    let sb = w.sb();
    std::fs::create_dir_all(&sb).expect("sb");
    let log = w.outside().join("log");
    std::fs::write(&log, "").expect("log");
    symlink(&log, &sb.join(".executions.log"));
    let id = w.import_crafted(&w.home(), &[write("call_1_1", "a.txt")], &[]);
    let fork = w.resume_ok(&id, Some(&sb));
    assert_eq!(std::fs::read(&log).expect("log"), b"");
    let c = w.calls(fork);
    assert_call_refused(&c, "call_1_1", ".executions.log", "symbolic link");
}
