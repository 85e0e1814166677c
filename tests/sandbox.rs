//! The demo's tools never leave their sandbox, whatever a journal holds:
//! through the `agent-journal` binary, as a user runs it.
//!
//! The crafted journals are made with the library (a session whose
//! `sandbox` label names a folder outside, an assistant message whose tool
//! calls carry hostile paths and call ids), exported to an `.ajournal` file
//! and imported with the binary, as a journal received from someone else
//! would be. Every test keeps, beside the sandbox, a "home" with a
//! `.bashrc` and an "outside" folder with a secret, and checks afterwards
//! that not a byte outside changed and no secret reached the conversation.
//!
//! `label`: the session's own data never chooses the folder; `call_ids`:
//! ids are encoded before they become file names, and tools cannot touch the
//! demo's own records; `links`: symbolic and hard links are not followed;
//! `count`: every escape tried, counted (the line the README quotes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use agent_journal::{
    Durability, Journal, JournalConfig, Role, SessionId, ToolCallRecord, ToolStatus,
};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{path_str, run_cli};

mod call_ids;
mod count;
mod label;
mod links;

const SECRET: &str = "TOP-SECRET-7f3a";
/// What `word_count` would say of a secret file: a count no file of the
/// sandbox has, so a read through a link shows even when only counted.
const SECRET_COUNT: &str = "37 words";
const SECRET_NAME: &str = "secret-name-91c2.txt";
const BASHRC: &str = "# my shell settings\n";

/// One tool call of a crafted journal: `(call id, tool, arguments)`.
type Call = (String, &'static str, Value);

fn call(id: &str, tool: &'static str, args: Value) -> Call {
    (id.to_owned(), tool, args)
}

fn write(id: &str, path: &str) -> Call {
    call(
        id,
        "write_file",
        json!({"path": path, "content": "pwned\n"}),
    )
}

/// A temporary world: `home/.bashrc`, `outside/` (a secret, a folder with a
/// secret name), the database `db` and the sandbox `sb`.
struct World {
    dir: TempDir,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().expect("tempdir");
        let w = World { dir };
        std::fs::create_dir_all(w.home()).expect("home");
        std::fs::write(w.home().join(".bashrc"), BASHRC).expect(".bashrc");
        std::fs::create_dir_all(w.outside().join("dir")).expect("outside");
        std::fs::write(w.outside().join("secret.txt"), secret_text()).expect("secret");
        std::fs::write(w.outside().join("dir").join(SECRET_NAME), secret_text()).expect("secret");
        w
    }
    fn root(&self) -> &Path {
        self.dir.path()
    }
    fn home(&self) -> PathBuf {
        self.root().join("home")
    }
    fn outside(&self) -> PathBuf {
        self.root().join("outside")
    }
    fn db(&self) -> PathBuf {
        self.root().join("db")
    }
    fn sb(&self) -> PathBuf {
        self.root().join("sb")
    }

    /// Every file, folder and link of the world except the database, the
    /// crafting leftovers and the sandbox `sandbox`, links not followed.
    fn outside_sandbox(&self, sandbox: &Path) -> BTreeMap<PathBuf, String> {
        let skip = [
            self.db(),
            self.root().join("craft.db"),
            self.root().join("crafted.ajournal"),
            sandbox.to_owned(),
        ];
        let mut out = BTreeMap::new();
        let mut stack = vec![self.root().to_owned()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).expect("read_dir").flatten() {
                let p = entry.path();
                if skip.contains(&p) {
                    continue;
                }
                let md = std::fs::symlink_metadata(&p).expect("metadata");
                let what = if md.file_type().is_symlink() {
                    format!("link to {:?}", std::fs::read_link(&p).expect("link"))
                } else if md.is_dir() {
                    stack.push(p.clone());
                    "folder".to_owned()
                } else if md.is_file() {
                    format!("file {:?}", std::fs::read(&p).expect("read"))
                } else {
                    "other".to_owned()
                };
                out.insert(p, what);
            }
        }
        out
    }

    /// A journal file holding one session labelled as a demo whose sandbox
    /// is `label`, stopped with `calls` pending (`in_doubt` of them started);
    /// imported into the world's database. Returns the session's id.
    fn import_crafted(&self, label: &Path, calls: &[Call], in_doubt: &[&str]) -> String {
        self.import_crafted_into(&self.db(), label, calls, in_doubt)
    }

    /// [`World::import_crafted`] into the journal at `db`.
    fn import_crafted_into(
        &self,
        db: &Path,
        label: &Path,
        calls: &[Call],
        in_doubt: &[&str],
    ) -> String {
        let craft_db = self.root().join("craft.db");
        let file = self.root().join("crafted.ajournal");
        let id = {
            let j = Journal::open_with(
                &craft_db,
                JournalConfig {
                    durability: Durability::Buffered,
                    ..JournalConfig::default()
                },
            )
            .expect("open");
            let s = j
                .create_session_with_labels(vec![
                    ("agent".into(), "demo".into()),
                    ("sandbox".into(), path_str(label).into()),
                ])
                .expect("session");
            let e = s
                .start_evaluation_with_messages(
                    "demo",
                    "file-assistant",
                    "scripted",
                    &[
                        (Role::System, "You are a careful file assistant.".into()),
                        (Role::User, "Do as the journal says.".into()),
                    ],
                )
                .expect("evaluation");
            e.assistant(
                "I'll do it.",
                calls
                    .iter()
                    .map(|(id, tool, args)| {
                        ToolCallRecord::new(id.as_str(), *tool, args.to_string())
                    })
                    .collect(),
            )
            .expect("assistant");
            for id in in_doubt {
                e.tool_started(*id).expect("started");
            }
            std::fs::remove_file(&file).ok();
            j.export_journal(&[s.id()], &file, |_| {}).expect("export");
            s.id().to_string()
        };
        std::fs::remove_dir_all(&craft_db).expect("remove the crafting database");
        let out = run_cli(db, &["import", path_str(&file), "--format", "journal"]);
        assert!(out.status.success(), "import: {}", text(&out.stderr));
        id
    }

    /// `resume ID --json`, with `--sandbox DIR` if given.
    fn resume(&self, id: &str, sandbox: Option<&Path>, extra: &[&str]) -> Output {
        let mut args = vec!["--json", "resume", id];
        if let Some(s) = sandbox {
            args.extend(["--sandbox", path_str(s)]);
        }
        args.extend(extra);
        run_cli(&self.db(), &args)
    }

    /// A resume into a new fork (`--fork`) that must succeed: the fork.
    fn resume_ok(&self, id: &str, sandbox: Option<&Path>) -> SessionId {
        let out = self.resume(id, sandbox, &["--fork"]);
        assert_eq!(out.status.code(), Some(0), "resume: {}", text(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).expect("json");
        v["session"].as_str().expect("session").parse().expect("id")
    }

    fn journal(&self) -> Journal {
        Journal::open_with(
            self.db(),
            JournalConfig {
                create_if_missing: false,
                ..JournalConfig::default()
            },
        )
        .expect("open")
    }

    /// Every tool call of session `id`: call id -> (status, result or error).
    fn calls(&self, id: SessionId) -> BTreeMap<String, (ToolStatus, String)> {
        let j = self.journal();
        let s = j.session(id).expect("session");
        let st = s.state();
        st.tool_calls()
            .iter()
            .map(|c| {
                let said = match (&c.error, c.result) {
                    (Some(e), _) => e.clone(),
                    (None, Some(m)) => st.messages().get(m).expect("result").content.clone(),
                    (None, None) => String::new(),
                };
                (c.call_id.to_string(), (c.status, said))
            })
            .collect()
    }

    /// Every message of every session of the database, as one text.
    fn all_text(&self) -> String {
        let j = self.journal();
        let mut t = String::new();
        for id in j.sessions().expect("sessions") {
            let s = j.session(id).expect("session");
            for m in s.state().messages().iter() {
                t.push_str(&m.content);
                t.push('\n');
            }
        }
        t
    }

    fn sessions(&self) -> usize {
        self.journal().sessions().expect("sessions").len()
    }
}

/// The contents of each secret file: [`SECRET`] and 36 more words.
fn secret_text() -> String {
    format!("{SECRET}{}", " word".repeat(36))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Asserts a refusal: exit 1, one `error: ...` line naming `names`.
fn assert_refused(out: &Output, names: &[&str]) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {stderr}");
    assert!(
        lines[0].starts_with("error: ") || lines[0].starts_with("{\"error\":"),
        "{stderr}"
    );
    for n in names {
        assert!(lines[0].contains(n), "{n:?} in {stderr}");
    }
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    stderr
}

/// Asserts call `id` failed with an error naming `path` and saying `why`.
fn assert_call_refused(
    calls: &BTreeMap<String, (ToolStatus, String)>,
    id: &str,
    path: &str,
    why: &str,
) {
    let (status, said) = calls
        .get(id)
        .unwrap_or_else(|| panic!("no call {id} in {calls:?}"));
    assert_eq!(*status, ToolStatus::Failed, "{id}: {said}");
    assert!(said.contains(path), "{id}: {path:?} in {said:?}");
    assert!(said.contains(why), "{id}: {why:?} in {said:?}");
}

fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}

/// The namespace of the demo's sandbox registry in a journal's records.
const REGISTRY: &str = "demo.sandboxes";

/// Writes a registry entry naming `folder` for session `id` into the
/// world's database, as someone who can write there could.
fn forge_registry(w: &World, id: &str, folder: &Path) {
    let j = Journal::open(w.db()).expect("open");
    j.put_record(REGISTRY, id, path_str(folder).as_bytes())
        .expect("forge");
}

#[test]
fn a_compacted_or_salvaged_database_keeps_its_sessions_sandboxes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let sb = dir.path().join("sb");
    let out = crate::common::run_cli(
        &db,
        &[
            "demo",
            "--sandbox",
            crate::common::path_str(&sb),
            "--crash-after",
            "9",
        ],
    );
    assert!(!out.status.success(), "it crashed");
    let journal = Journal::open(&db).expect("open");
    let id = journal.sessions().expect("sessions")[0].to_string();
    drop(journal);
    for (command, name) in [("compact", "compacted"), ("salvage", "salvaged")] {
        let to = dir.path().join(name);
        let out = crate::common::run_cli(&db, &[command, "--to", crate::common::path_str(&to)]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // No --sandbox: the new database knows the session's folder.
        let out = crate::common::run_cli(&to, &["resume", &id]);
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `demo` then `resume` from another process, without `--sandbox`: the
/// resume finds the folder the demo recorded in the journal's own records
/// (on sled, and on PostgreSQL, where there is no folder to keep a file
/// in); a session imported there with a `sandbox` label still is not
/// resumed in the folder it names.
fn demo_then_resume_finds_its_sandbox(db: &Path, root: &Path) {
    let sb = root.join("sandboxes");
    let out = run_cli(
        db,
        &[
            "--json",
            "demo",
            "--sandbox",
            path_str(&sb),
            "--crash-after",
            "9",
        ],
    );
    assert!(!out.status.success(), "it crashed");
    let j = Journal::open(db).expect("open");
    let id = j.sessions().expect("sessions")[0].to_string();
    let recorded = j.record(REGISTRY, &id).expect("record").expect("recorded");
    assert!(
        String::from_utf8_lossy(&recorded).starts_with(path_str(&sb)),
        "{}",
        String::from_utf8_lossy(&recorded)
    );
    drop(j);
    let out = run_cli(db, &["resume", &id]);
    assert!(out.status.success(), "resume: {}", text(&out.stderr));
    // An imported journal whose label names a folder chooses nothing.
    let w = World::new();
    let home = w.home();
    let imported = w.import_crafted_into(db, &home, &[write("c", ".bashrc")], &[]);
    let j = Journal::open(db).expect("open");
    assert_eq!(j.record(REGISTRY, &imported).expect("record"), None);
    drop(j);
    let out = run_cli(db, &["resume", &imported]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--sandbox"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).expect("rc"),
        BASHRC
    );
}

#[test]
fn demo_then_resume_from_another_process_finds_its_sandbox_on_sled() {
    let dir = tempfile::tempdir().expect("tempdir");
    demo_then_resume_finds_its_sandbox(&dir.path().join("db"), dir.path());
}

#[cfg(feature = "postgres")]
#[test]
fn demo_then_resume_from_another_process_finds_its_sandbox_on_postgres() {
    let Some(url) = crate::pg_server::fresh_url() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    demo_then_resume_finds_its_sandbox(Path::new(&url), dir.path());
}
