//! Every escape tried, counted: the line `sandbox: N escapes tried, N
//! refused` that the README quotes.

use super::*;

/// One escape: what to plant in the sandbox, then the journal's calls.
struct Escape {
    name: &'static str,
    plant: fn(&World, &Path),
    calls: fn(&World) -> Vec<Call>,
}

fn nothing(_: &World, _: &Path) {}

fn escapes() -> Vec<Escape> {
    fn one(c: Call) -> Vec<Call> {
        vec![c]
    }
    vec![
        Escape {
            name: "absolute path (write)",
            plant: nothing,
            calls: |w| one(write("c", path_str(&w.home().join(".bashrc")))),
        },
        Escape {
            name: "../ path (write)",
            plant: nothing,
            calls: |_| one(write("c", "../home/.bashrc")),
        },
        Escape {
            name: "a/../../ path (write)",
            plant: nothing,
            calls: |_| one(write("c", "a/../../home/.bashrc")),
        },
        Escape {
            name: "absolute path (read)",
            plant: nothing,
            calls: |w| {
                one(call(
                    "c",
                    "word_count",
                    json!({"path": path_str(&w.outside().join("secret.txt"))}),
                ))
            },
        },
        Escape {
            name: "../ path (read)",
            plant: nothing,
            calls: |_| {
                one(call(
                    "c",
                    "word_count",
                    json!({"path": "../outside/secret.txt"}),
                ))
            },
        },
        Escape {
            name: "absolute path (list)",
            plant: nothing,
            calls: |w| {
                one(call(
                    "c",
                    "list_dir",
                    json!({"path": path_str(&w.outside().join("dir"))}),
                ))
            },
        },
        Escape {
            name: ".. (list)",
            plant: nothing,
            calls: |_| one(call("c", "list_dir", json!({"path": "../outside/dir"}))),
        },
        Escape {
            name: "call id: absolute path of a secret",
            plant: nothing,
            calls: |w| one(write(path_str(&w.outside().join("secret.txt")), "x")),
        },
        Escape {
            name: "call id: /etc/hostname",
            plant: nothing,
            calls: |_| one(write("/etc/hostname", "x")),
        },
        Escape {
            name: "call id: ../../ to a secret",
            plant: nothing,
            calls: |_| one(write("../../outside/secret.txt", "x")),
        },
        Escape {
            name: "call id: ./../../ creating a file",
            plant: nothing,
            calls: |_| one(write("./../../escaped", "x")),
        },
        Escape {
            name: "call id: ../.. ",
            plant: nothing,
            calls: |_| one(write("../..", "x")),
        },
        Escape {
            name: "call id: 1,200 bytes of ../",
            plant: nothing,
            calls: |_| one(write(&"../".repeat(400), "x")),
        },
        Escape {
            name: "symlink to a file (write)",
            plant: |w, sb| symlink(&w.home().join(".bashrc"), &sb.join("rc")),
            calls: |_| one(write("c", "rc")),
        },
        Escape {
            name: "symlink to a file (read)",
            plant: |w, sb| symlink(&w.outside().join("secret.txt"), &sb.join("s")),
            calls: |_| one(call("c", "word_count", json!({"path": "s"}))),
        },
        Escape {
            name: "symlink to a folder (write)",
            plant: |w, sb| symlink(&w.home(), &sb.join("h")),
            calls: |_| one(write("c", "h/.bashrc")),
        },
        Escape {
            name: "symlink to a folder (read)",
            plant: |w, sb| symlink(&w.outside(), &sb.join("o")),
            calls: |_| one(call("c", "word_count", json!({"path": "o/secret.txt"}))),
        },
        Escape {
            name: "symlink to a folder (list)",
            plant: |w, sb| symlink(&w.outside().join("dir"), &sb.join("d")),
            calls: |_| one(call("c", "list_dir", json!({"path": "d"}))),
        },
        Escape {
            name: "dangling symlink (write creates outside)",
            plant: |w, sb| symlink(&w.outside().join("made.txt"), &sb.join("m")),
            calls: |_| one(write("c", "m")),
        },
        Escape {
            name: "symlinked .calls (keyed record)",
            plant: |w, sb| symlink(&w.outside(), &sb.join(".calls")),
            calls: |_| one(write("secret.txt", "x")),
        },
        Escape {
            name: "symlinked .executions.log",
            plant: |w, sb| symlink(&w.home().join(".bashrc"), &sb.join(".executions.log")),
            calls: |_| one(write("c", "x")),
        },
        Escape {
            name: "hard link to a file (write)",
            plant: |w, sb| {
                std::fs::hard_link(w.home().join(".bashrc"), sb.join("hl")).expect("link")
            },
            calls: |_| one(write("c", "hl")),
        },
        Escape {
            name: "hard link to a file (read)",
            plant: |w, sb| {
                std::fs::hard_link(w.outside().join("secret.txt"), sb.join("hl")).expect("link")
            },
            calls: |_| one(call("c", "word_count", json!({"path": "hl"}))),
        },
    ]
}

/// Whether an escape was refused: nothing outside the sandbox changed and
/// nothing from outside reached the conversation.
fn refused(w: &World, before: &BTreeMap<PathBuf, String>, sandbox: &Path) -> bool {
    let all = w.all_text();
    // A name made from the call id `/etc/hostname` would land beside it.
    let beside_hostname = std::fs::read_dir("/etc")
        .map(|d| {
            d.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("hostname."))
        })
        .unwrap_or(false);
    w.outside_sandbox(sandbox) == *before
        && !all.contains(SECRET)
        && !all.contains(SECRET_NAME)
        && !all.contains(SECRET_COUNT)
        && !Path::new("/escaped").exists()
        && !beside_hostname
}

#[test]
fn every_sandbox_escape_tried_is_refused() {
    let mut tried = 0;
    let mut held = 0;
    let mut report = Vec::new();
    let mut count = |name: &str, ok: bool| {
        tried += 1;
        held += usize::from(ok);
        if !ok {
            report.push(name.to_owned());
        }
    };

    // The session's own data choosing the folder: a label naming home (with
    // and without --fork), a forged registry entry.
    let w = World::new();
    let id = w.import_crafted(&w.home(), &[write("c", ".bashrc")], &[]);
    let before = w.outside_sandbox(&w.sb());
    for extra in [&[][..], &["--fork"][..]] {
        let out = w.resume(&id, None, extra);
        count(
            "label naming home",
            out.status.code() == Some(1) && refused(&w, &before, &w.sb()),
        );
    }
    forge_registry(&w, &id, &w.home());
    let out = w.resume(&id, None, &[]);
    count(
        "forged registry entry",
        out.status.code() == Some(1) && refused(&w, &before, &w.sb()),
    );

    // A label naming the folder of a session demo made here.
    let w = World::new();
    let out = run_cli(&w.db(), &["--json", "demo", "--sandbox", path_str(&w.sb())]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    let theirs = PathBuf::from(v["sandbox"].as_str().expect("sandbox"));
    let id = w.import_crafted(&theirs, &[write("c", "notes.txt")], &[]);
    let before = std::fs::read(theirs.join("notes.txt")).expect("notes");
    let out = w.resume(&id, None, &[]);
    count(
        "label naming another demo session's folder",
        out.status.code() == Some(1)
            && std::fs::read(theirs.join("notes.txt")).expect("notes") == before,
    );

    // Paths, call ids and links, resumed with --sandbox.
    for e in escapes() {
        let w = World::new();
        let sb = w.sb();
        std::fs::create_dir_all(&sb).expect("sb");
        (e.plant)(&w, &sb);
        let calls = (e.calls)(&w);
        let id = w.import_crafted(&w.home(), &calls, &[]);
        let before = w.outside_sandbox(&sb);
        let out = w.resume(&id, Some(&sb), &[]);
        count(
            e.name,
            out.status.code() == Some(0) && refused(&w, &before, &sb),
        );
    }

    println!("sandbox: {tried} escapes tried, {held} refused");
    assert_eq!(held, tried, "escapes not refused: {report:?}");
}
