//! Other users of the machine: a second Unix user (`nobody`, through
//! `runuser`, when the tests run as root as in CI) plants links, FIFOs and
//! folders where the journal writes, and never makes it write anywhere but
//! where its user said. One test per place that writes under a shared or
//! user-given folder: the private copy a reader makes, an export, a
//! database folder, a compaction target, the demo's sandbox.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agent_journal::Journal;

use crate::common::{can_switch_user, custom, path_str, run_as_nobody as as_nobody};

const NOBODY: u32 = 65534;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agent-journal")
}

/// A shared folder as `/tmp` is: anyone writes, the sticky bit on.
fn shared_folder(parent: &Path) -> PathBuf {
    let shared = parent.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    shared
}

/// A temporary folder others can enter (tempfile makes them 0700).
fn open_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// A database with one session of three events, readable by everyone and
/// writable by its owner (root) only; returns the session id.
fn readable_database(db: &Path) -> String {
    let journal = Journal::open(db).unwrap();
    let s = journal.create_session().unwrap();
    s.append(custom(1)).unwrap();
    s.append(custom(2)).unwrap();
    let id = s.id().to_string();
    drop((s, journal));
    let chmod = Command::new("chmod")
        .args(["-R", "a+rX,go-w"])
        .arg(db)
        .status()
        .unwrap();
    assert!(chmod.success());
    id
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The reported attack: a reader that may not write the database copies it
/// into scratch space, and another user had planted, under the names such
/// a copy used to take (`agent-journal-read-<pid>-<n>` in the temporary
/// folder), folders of links to the reader's own files. The copy is now
/// made in a fresh private folder: the reader's file is untouched, and the
/// scratch space is gone afterwards.
#[test]
fn a_reader_s_private_copy_never_writes_through_planted_links() {
    if !can_switch_user() {
        return;
    }
    let dir = open_tempdir();
    let db = dir.path().join("db");
    let id = readable_database(&db);
    let tmp = shared_folder(dir.path());
    // The reader's (nobody's) own file, which the links point at.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"the reader's own data").unwrap();
    std::os::unix::fs::chown(&victim, Some(NOBODY), Some(NOBODY)).unwrap();
    // Planted by another user (root plays them here): for the next few
    // hundred pids, the folder a copy used to be made in, holding a link
    // named like each file of the database.
    let last_pid: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .map(|t| t.trim().parse().unwrap_or(0))
        .unwrap_or(0);
    // (Links named like its files only: a folder name planted as a link
    // would make the old copy fail before it wrote anything.)
    let names: Vec<String> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for pid in last_pid..last_pid + 300 {
        let planted = tmp.join(format!("agent-journal-read-{pid}-0"));
        std::fs::create_dir(&planted).unwrap();
        for name in &names {
            std::os::unix::fs::symlink(&victim, planted.join(name)).unwrap();
        }
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let before: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let out = as_nobody(
        bin(),
        &["--db", path_str(&db), "--json", "sessions"],
        &[("TMPDIR", &tmp)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id));
    assert!(stderr(&out).contains("private copy"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"the reader's own data",
        "the reader's file was overwritten through a planted link"
    );
    let after: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(after.len(), before.len(), "the private copy is removed");
}

/// While it exists, the private copy is a new folder only the reader can
/// enter (mode 0700, the reader's), under an unpredictable name.
#[test]
fn the_private_copy_is_a_fresh_folder_only_its_user_can_enter() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    drop(Journal::open(&db).unwrap());
    let journal = Journal::open_private_copy(&db, agent_journal::JournalConfig::default()).unwrap();
    let copy = journal.path().unwrap().to_owned();
    assert_ne!(copy, db);
    let parent = copy.clone();
    let m = std::fs::metadata(&parent).unwrap();
    assert_eq!(m.mode() & 0o777, 0o700, "{}", parent.display());
    assert_eq!(m.uid(), std::fs::metadata(&db).unwrap().uid());
    let name = parent.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("agent-journal-copy-"), "{name}");
    assert!(name.len() >= "agent-journal-copy-".len() + 32, "{name}");
    drop(journal);
    assert!(!parent.exists(), "removed when the journal closes");
}

/// `export -o FILE` into a shared folder where another user planted a link
/// (to a file of ours) or a FIFO under that name: refused, nothing written
/// through it; a link of our own is still followed.
#[test]
fn an_export_into_a_shared_folder_never_writes_through_another_user_s_link_or_fifo() {
    if !can_switch_user() {
        return;
    }
    let dir = open_tempdir();
    let db = dir.path().join("db");
    let id = readable_database(&db);
    let shared = shared_folder(dir.path());
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"mine").unwrap();
    let link = shared.join("run.ajournal");
    let ln = as_nobody("ln", &["-s", path_str(&victim), path_str(&link)], &[]);
    assert!(ln.status.success(), "{}", stderr(&ln));
    let fifo = shared.join("run.txt");
    let mk = as_nobody("mkfifo", &[path_str(&fifo)], &[]);
    assert!(mk.status.success(), "{}", stderr(&mk));
    for target in [&link, &fifo] {
        let out = crate::common::run_cli(
            &db,
            &["export", &id, "--format", "journal", "-o", path_str(target)],
        );
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("another user"), "{}", stderr(&out));
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"mine");
    // No temporary left beside it either.
    let names: Vec<String> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // Our own link is ours to follow.
    let own = dir.path().join("own-link");
    std::os::unix::fs::symlink(&victim, &own).unwrap();
    let out = crate::common::run_cli(
        &db,
        &["export", &id, "--format", "journal", "-o", path_str(&own)],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        std::fs::symlink_metadata(&own)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_ne!(std::fs::read(&victim).unwrap(), b"mine");
}

/// A database folder another user made (or may write into) is never
/// written: `demo` refuses it (exit 1, naming it), a reading command reads
/// a private copy of it instead, and nothing in it changes.
#[test]
fn a_database_folder_of_another_user_is_read_through_a_copy_and_never_written() {
    if !can_switch_user() {
        return;
    }
    let dir = open_tempdir();
    let shared = shared_folder(dir.path());
    // Planted: an empty folder of nobody's where our database would go.
    let planted = shared.join("agent.db");
    let mk = as_nobody("mkdir", &[path_str(&planted)], &[]);
    assert!(mk.status.success(), "{}", stderr(&mk));
    let out = crate::common::run_cli(&planted, &["demo"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("another user"), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&planted).unwrap().count(), 0);

    // A real database of ours whose folder others may write into: read
    // through a copy, with a warning; not written.
    let db = dir.path().join("db");
    let id = readable_database(&db);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o777)).unwrap();
    let before = crate::common::tree(&db);
    let out = crate::common::run_cli(&db, &["--json", "sessions"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id));
    assert!(
        stderr(&out).contains("other users may write"),
        "{}",
        stderr(&out)
    );
    assert_eq!(crate::common::tree(&db), before, "nothing written");
    let err = Journal::open(&db).unwrap_err();
    assert!(
        matches!(err, agent_journal::Error::UnsafePath { .. }),
        "{err}"
    );
}

/// `compact --to` in a shared folder: a target another user planted (a
/// link to a folder of ours) is refused unless it is an empty folder, and
/// the database is built in a folder of our own made exclusively; a link
/// planted at the target is replaced, never followed.
#[test]
fn compact_into_a_shared_folder_never_builds_inside_another_user_s_link() {
    if !can_switch_user() {
        return;
    }
    let dir = open_tempdir();
    let db = dir.path().join("db");
    readable_database(&db);
    let shared = shared_folder(dir.path());
    let ours = dir.path().join("our-folder");
    std::fs::create_dir(&ours).unwrap();
    let target = shared.join("compacted");
    let ln = as_nobody("ln", &["-s", path_str(&ours), path_str(&target)], &[]);
    assert!(ln.status.success(), "{}", stderr(&ln));
    let out = crate::common::run_cli(&db, &["compact", "--to", path_str(&target)]);
    // Either refused, or built beside it and renamed over the link: never
    // built inside the folder the link names.
    assert_eq!(std::fs::read_dir(&ours).unwrap().count(), 0, "{out:?}");
    if out.status.success() {
        let m = std::fs::symlink_metadata(&target).unwrap();
        assert!(
            m.is_dir() && m.uid() == 0,
            "a folder of ours replaced the link"
        );
    }
}

/// The demo's sandbox: a sandbox root of another user's (`--sandbox DIR`,
/// or `./agent-journal-sandbox` planted in a shared working folder) is
/// refused before any tool runs.
#[test]
fn a_sandbox_folder_of_another_user_is_refused() {
    if !can_switch_user() {
        return;
    }
    let dir = open_tempdir();
    let shared = shared_folder(dir.path());
    let planted = shared.join("sandbox");
    let mk = as_nobody("mkdir", &["-m", "0777", path_str(&planted)], &[]);
    assert!(mk.status.success(), "{}", stderr(&mk));
    let db = dir.path().join("db");
    let out = crate::common::run_cli(&db, &["demo", "--sandbox", path_str(&planted)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("another user"), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_dir(&planted).unwrap().count(),
        0,
        "no tool ran"
    );
    // The default root, beside a database made in the shared folder.
    let root = shared.join("agent-journal-sandbox");
    let mk = as_nobody("mkdir", &["-m", "0777", path_str(&root)], &[]);
    assert!(mk.status.success(), "{}", stderr(&mk));
    let out = crate::common::run_cli(&shared.join("agent-journal.db"), &["demo"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 0, "no tool ran");
}
