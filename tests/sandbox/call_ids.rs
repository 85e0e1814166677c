//! Call ids are encoded before they become file names, and tools cannot
//! touch the demo's own records.

use super::*;

#[test]
fn a_call_id_naming_a_file_outside_never_reads_it_into_the_conversation() {
    let w = World::new();
    let secret = w.outside().join("secret.txt");
    let ids = [
        path_str(&secret).to_owned(),
        "/etc/hostname".to_owned(),
        "../../outside/secret.txt".to_owned(),
        "./../../outside/secret.txt".to_owned(),
    ];
    let calls: Vec<Call> = ids
        .iter()
        .enumerate()
        .map(|(k, id)| write(id, &format!("out{k}.txt")))
        .collect();
    // In doubt too: a keyed re-run looks for its earlier result first.
    let id = w.import_crafted(&w.sb(), &calls, &[&ids[0], &ids[1]]);
    let fork = w.resume_ok(&id, Some(&w.sb()));
    let got = w.calls(fork);
    for (k, id) in ids.iter().enumerate() {
        assert_eq!(
            got[id.as_str()],
            (
                ToolStatus::Completed,
                format!("wrote 6 bytes to out{k}.txt")
            ),
            "call {id:?} ran for real, not from a file it names"
        );
    }
    let all = w.all_text();
    assert!(!all.contains(SECRET), "{all}");
    let host = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let host = host.trim();
    if host.len() >= 8 {
        assert!(!all.contains(host), "/etc/hostname's contents: {all}");
    }
}

#[test]
fn a_call_id_with_dot_dot_creates_nothing_outside_the_sandbox() {
    let w = World::new();
    let sandbox = w.sb().join("inner");
    let long = "../".repeat(400);
    let too_long = "../".repeat(2000);
    let ids: Vec<String> = [
        "./../../escaped",
        "../../escaped",
        "..",
        ".",
        "",
        "x/../../../escaped",
        "/../../escaped",
        "%2E%2E",
        long.as_str(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut calls: Vec<Call> = ids
        .iter()
        .enumerate()
        .map(|(k, id)| write(id, &format!("f{k}.txt")))
        .collect();
    calls.push(write(&too_long, "long.txt"));
    let id = w.import_crafted(&sandbox, &calls, &[]);
    std::fs::create_dir_all(&sandbox).expect("sandbox");
    let before = w.outside_sandbox(&sandbox);
    let fork = w.resume_ok(&id, Some(&sandbox));
    assert_eq!(
        w.outside_sandbox(&sandbox),
        before,
        "nothing outside changed"
    );
    assert!(!Path::new("/escaped").exists());
    let got = w.calls(fork);
    for (k, id) in ids.iter().enumerate() {
        assert_eq!(
            got[id.as_str()].0,
            ToolStatus::Completed,
            "{id:?}: {:?}",
            got[id.as_str()]
        );
        assert!(sandbox.join(format!("f{k}.txt")).is_file());
    }
    assert_call_refused(&got, &too_long, "6000 bytes", "longer than");
    // One record per call under .calls: distinct ids, distinct records.
    let mut records = 0;
    let mut stack = vec![sandbox.join(".calls")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("calls").flatten() {
            if e.file_type().expect("type").is_dir() {
                stack.push(e.path());
            } else {
                records += 1;
            }
        }
    }
    // The script's own later write_file calls: none (turn 2 reads and lists).
    assert_eq!(records, ids.len(), "one record per call");
}

#[test]
fn tools_cannot_touch_the_demos_own_records() {
    let w = World::new();
    let sb = w.sb();
    let id = w.import_crafted(
        &w.home(),
        &[
            write("a", ".agent-journal-sandbox"),
            write("b", ".calls/c.r"),
            write("c", "./.EXECUTIONS.log"),
            call("d", "word_count", json!({"path": ".calls"})),
        ],
        &[],
    );
    let fork = w.resume_ok(&id, Some(&sb));
    let c = w.calls(fork);
    for id in ["a", "b", "c", "d"] {
        assert_call_refused(
            &c,
            id,
            path_str(&sb.canonicalize().expect("sb")),
            "the demo's own record",
        );
    }
    assert!(
        !sb.join(".calls").join("c.r").exists(),
        "no record was forged"
    );
}
