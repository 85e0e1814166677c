//! The man pages (`man SUBCOMMAND`, `man --all DIR`) and the hints `demo`
//! prints, as a user who has not run `cargo install` reads them.

use std::path::Path;

use super::aj;
use crate::common::path_str;

/// The subcommands `--help` lists (without `help` itself).
fn subcommands(db: &Path) -> Vec<String> {
    let out = aj(db, &["--help"]);
    assert_eq!(out.code, 0, "{out:?}");
    let list = out
        .stdout
        .split_once("Commands:")
        .map(|(_, rest)| rest)
        .expect("--help lists the commands");
    list.lines()
        .skip(1) // the rest of the "Commands:" line
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// The long flags `SUB --help` names (`--db`, `--from`, ...).
fn long_flags(db: &Path, sub: &str) -> Vec<String> {
    let out = aj(db, &[sub, "--help"]);
    assert_eq!(out.code, 0, "{out:?}");
    let mut flags: Vec<String> = out
        .stdout
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| l.split([' ', ',', '=']))
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_alphanumeric())
                .to_owned()
        })
        .collect();
    flags.dedup();
    flags
}

#[test]
fn every_subcommand_has_a_man_page_naming_its_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let pages = dir.path().join("man");
    std::fs::create_dir(&pages).expect("mkdir");
    let out = aj(&db, &["man", "--all", path_str(&pages)]);
    assert_eq!(out.code, 0, "{out:?}");
    let subs = subcommands(&db);
    assert!(
        subs.len() > 15 && subs.iter().any(|s| s == "log"),
        "{subs:?}"
    );
    let top = std::fs::read_to_string(pages.join("agent-journal.1")).expect("agent-journal.1");
    assert!(top.contains(".TH agent-journal 1"), "{top}");
    for sub in &subs {
        let file = pages.join(format!("agent-journal-{sub}.1"));
        let page = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("no page {}: {e}", file.display()));
        assert!(
            page.contains(&format!(".TH agent-journal-{sub} 1")),
            "{page}"
        );
        // roff escapes each dash: `--from` is `\-\-from`.
        let flags = long_flags(&db, sub);
        assert!(flags.iter().any(|f| f == "--db"), "{sub}: {flags:?}");
        if sub == "log" {
            assert!(flags.iter().any(|f| f == "--from"), "{flags:?}");
        }
        for flag in flags {
            let roff = flag.replace('-', "\\-");
            assert!(page.contains(&roff), "{sub}'s page lacks {flag}:\n{page}");
        }
        // `man SUB` prints the same page.
        let one = aj(&db, &["man", sub]);
        assert_eq!(one.code, 0, "{one:?}");
        assert_eq!(one.stdout, page, "man {sub}");
    }
    // Written whole: nothing but the pages is left in the folder.
    let names = std::fs::read_dir(&pages).expect("read_dir").count();
    assert_eq!(names, subs.len() + 1, "one page each and no leftovers");
    assert!(!db.exists(), "no database is created");
}

#[test]
fn man_of_an_unknown_subcommand_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let out = aj(&db, &["man", "nosuch"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        out.stderr.contains("nosuch") && out.stderr.contains("log"),
        "{out:?}"
    );
    aj(&db, &["--json", "man", "nosuch"]).assert_error(2);
    // Into a folder that does not exist: an error, and nothing made.
    let missing = dir.path().join("missing");
    let out = aj(&db, &["man", "--all", path_str(&missing)]);
    out.assert_error(1);
    assert!(!missing.exists());
}

/// Runs `demo` (its sandbox in `dir`) with `PATH` set to `path`, in `dir`,
/// on the default database (`--db` not given) or `db`; returns its hint lines.
fn demo_hints(dir: &Path, path: &str, db: Option<&Path>) -> Vec<String> {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_agent-journal"));
    c.current_dir(dir)
        .env_remove("AGENT_JOURNAL_DB")
        .env("PATH", path)
        .stdin(std::process::Stdio::null());
    if let Some(db) = db {
        c.arg("--db").arg(db);
    }
    let sandbox = tempfile::tempdir_in(dir).expect("sandbox dir");
    c.args(["demo", "--sandbox"]).arg(sandbox.path().join("sb"));
    let out = super::Out::of(&mut c);
    assert_eq!(out.code, 0, "{out:?}");
    out.stdout
        .lines()
        .skip_while(|l| !l.starts_with("next: "))
        .map(|l| l.trim_start_matches("next: ").trim_start().to_owned())
        .collect()
}

#[test]
fn demo_hints_work_before_cargo_install() {
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = env!("CARGO_BIN_EXE_agent-journal");
    // Not on PATH (the test binary never is): the cargo form, which runs
    // from the checkout; the database is the default one, so no --db.
    let hints = demo_hints(dir.path(), "/usr/bin:/bin", None);
    assert_eq!(hints.len(), 3, "{hints:?}");
    for h in &hints {
        assert!(
            h.starts_with("cargo run --release -- show ")
                || h.starts_with("cargo run --release -- demo "),
            "{hints:?}"
        );
    }
    // Another `agent-journal` first on PATH: still the cargo form.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).expect("mkdir");
    let fake = other.join("agent-journal");
    std::fs::write(&fake, "#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let path = format!("{}:/usr/bin:/bin", other.display());
    let hints = demo_hints(dir.path(), &path, None);
    assert!(
        hints[0].starts_with("cargo run --release -- show "),
        "{hints:?}"
    );
    // A link named agent-journal to this binary on PATH: the short form,
    // with --db when it is not the default; and the hint runs as printed.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    std::os::unix::fs::symlink(exe, bin.join("agent-journal")).expect("symlink");
    let path = format!("{}:/usr/bin:/bin", bin.display());
    let db = dir.path().join("my db");
    let hints = demo_hints(dir.path(), &path, Some(&db));
    let quoted = format!("'{}'", db.display());
    let show = hints[0].split("   ").next().expect("a command").trim();
    assert!(
        show.starts_with(&format!("agent-journal --db {quoted} show ")),
        "{hints:?}"
    );
    let out = super::Out::of(
        std::process::Command::new("/bin/sh")
            .args(["-c", show])
            .env("PATH", &path)
            .current_dir(dir.path()),
    );
    assert_eq!(out.code, 0, "`{show}` as printed: {out:?}");
    assert!(out.stdout.contains("tool call"), "{out:?}");
}
