//! The shape of `src/`: every import points down the layers of
//! `docs/design.md`, never up; no two modules import each other; no files
//! import each other in a circle, inside a module or across modules; crate
//! code imports an item from the module that defines it, never through a
//! re-export of `lib.rs`; the command line (`src/main.rs`, `src/cli/`) uses
//! only the library's public API; the root exports at most 40 names and
//! every public item has one public path.
//!
//! The source is read as Rust (`layers/source.rs`): `use` trees by a
//! parser, every other path from tokens (a string or a comment neither hides
//! nor fakes one), aliases such as `use crate as x` and re-exports followed
//! to the file that defines the item. `tricks_are_caught` plants each way
//! around the rules in a copy of `src/` and expects the check to fail.

mod source;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use source::Crate;

/// The library's top-level modules, lowest first. A module may import from
/// a lower layer only; modules of one layer do not import each other.
const LAYERS: &[&[&str]] = &[
    &["model", "mem"],
    &["error"],
    &["event"],
    &["format", "provider"],
    &["state"],
    &["store", "snapshot"],
    &["journal"],
    &["session"],
    &["resume", "verify", "transfer"],
    &["maintenance"],
    &["engine"],
    &["lib", "agent"],
];

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

/// The top-level module of a module path (`lib` for the root).
fn top(module: &[String]) -> String {
    module.first().cloned().unwrap_or_else(|| "lib".to_owned())
}

/// What is wrong with the source under `src`, one line each.
pub fn problems(src: &Path) -> Vec<String> {
    let lib_root = src.join("lib.rs");
    let lib = Crate::read(&lib_root);
    let bin = Crate::read(&src.join("main.rs"));
    let mut problems: Vec<String> = lib.errors.iter().chain(&bin.errors).cloned().collect();
    let show = |p: &Path| p.strip_prefix(src).unwrap_or(p).display().to_string();
    let mut file_edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    // One path that makes each edge, to say why files are in a circle.
    let mut why: BTreeMap<(PathBuf, PathBuf), String> = BTreeMap::new();
    let mut module_edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();

    for import in lib.imports() {
        let Some(to) = import.to.clone() else {
            continue;
        };
        let named = format!("crate::{}", import.path.join("::"));
        if !import.module.is_empty() && import.via.contains(&lib_root) {
            problems.push(format!(
                "{}: `{named}` goes through a re-export of lib.rs: import it from {}",
                show(&import.from),
                show(&to)
            ));
        }
        let Some(to_module) = lib.module_of(&to) else {
            continue;
        };
        let (a, b) = (top(&import.module), top(&to_module));
        if a != b && b != "lib" {
            match (layer_of(&a), layer_of(&b)) {
                (Some(from), Some(to)) if to < from => {}
                (Some(from), to) => problems.push(format!(
                    "{}: `{a}` (layer {from}) imports `{named}` from `{b}` (layer {}): imports must point down",
                    show(&import.from),
                    to.map_or("none".to_owned(), |t| t.to_string()),
                )),
                (None, _) => problems.push(format!(
                    "{}: module `{a}` is in no layer of tests/layers.rs",
                    show(&import.from)
                )),
            }
            module_edges.entry(a).or_default().insert(b);
        }
        if import.from != to {
            why.entry((import.from.clone(), to.clone()))
                .or_insert_with(|| import.path.join("::"));
            file_edges.entry(import.from).or_default().insert(to);
        }
    }
    for import in bin.imports() {
        if import.path.first().is_some_and(|t| t != "cli") {
            problems.push(format!(
                "{}: the command line uses crate::{} (only the public API, agent_journal::...)",
                show(&import.from),
                import.path.join("::")
            ));
        }
        match import.to {
            Some(to) if to != import.from => {
                why.entry((import.from.clone(), to.clone()))
                    .or_insert_with(|| import.path.join("::"));
                file_edges.entry(import.from).or_default().insert(to);
            }
            _ => {}
        }
    }
    for (a, targets) in &module_edges {
        for b in targets {
            if a < b && module_edges.get(b).is_some_and(|t| t.contains(a)) {
                problems.push(format!("`{a}` and `{b}` import each other"));
            }
        }
    }
    for circle in circles(&file_edges) {
        let names: Vec<String> = circle.iter().map(|f| show(f)).collect();
        let mut edges = Vec::new();
        for a in &circle {
            for b in file_edges.get(a).into_iter().flatten() {
                if circle.contains(b) {
                    let path = &why[&(a.clone(), b.clone())];
                    edges.push(format!("{} -> {} ({path})", show(a), show(b)));
                }
            }
        }
        problems.push(format!(
            "files import each other in a circle: {}\n    {}",
            names.join(", "),
            edges.join("\n    ")
        ));
    }
    problems
}

/// The strongly connected components of more than one file (Tarjan).
fn circles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        index: BTreeMap<&'a PathBuf, (usize, usize)>,
        stack: Vec<&'a PathBuf>,
        on_stack: BTreeSet<&'a PathBuf>,
        out: Vec<Vec<PathBuf>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a PathBuf) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[w].1.min(self.index[v].1);
                    if let Some(e) = self.index.get_mut(v) {
                        e.1 = low;
                    }
                } else if self.on_stack.contains(w) {
                    let low = self.index[w].0.min(self.index[v].1);
                    if let Some(e) = self.index.get_mut(v) {
                        e.1 = low;
                    }
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.out
}

/// The most names the crate's root may export (issue 34: a small face).
const ROOT_NAMES: usize = 40;

/// What is wrong with the public face of the crate under `src`: more than
/// [`ROOT_NAMES`] names at the root, or an item a user can reach by two
/// public paths.
pub fn face_problems(src: &Path) -> Vec<String> {
    let lib = Crate::read(&src.join("lib.rs"));
    let paths = lib.public_paths("agent_journal");
    let mut problems = Vec::new();
    let root: BTreeSet<&String> = paths
        .values()
        .flatten()
        .filter(|p| p.matches("::").count() == 1)
        .collect();
    if root.len() > ROOT_NAMES {
        problems.push(format!(
            "the root exports {} names (at most {ROOT_NAMES}): {}",
            root.len(),
            root.iter()
                .map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for ((module, name), reached) in &paths {
        if reached.len() > 1 {
            problems.push(format!(
                "crate::{} has {} public paths: {}",
                module
                    .iter()
                    .chain([name])
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("::"),
                reached.len(),
                reached.join(", ")
            ));
        }
    }
    problems
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn imports_point_down_the_layers_with_no_circles_and_no_detours() {
    let problems = problems(&src());
    assert!(
        problems.is_empty(),
        "the layers of src/ (see docs/design.md), {} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    let lib = Crate::read(&src().join("lib.rs"));
    assert!(lib.files().len() > 100, "the checker reads the whole crate");
    assert!(lib.imports().len() > 1000, "and finds its imports");
}

#[test]
fn the_face_is_small_and_each_item_has_one_public_path() {
    let problems = face_problems(&src());
    assert!(
        problems.is_empty(),
        "the public face of the crate, {} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    let paths = Crate::read(&src().join("lib.rs")).public_paths("agent_journal");
    let reached = |p: &str| paths.values().flatten().any(|q| q == p);
    // The check sees the whole face: root items, public modules, items
    // defined deep inside and re-exported, and modules re-exported.
    for path in [
        "agent_journal::Journal",
        "agent_journal::Durability",
        "agent_journal::state::SessionState",
        "agent_journal::agent::InnerLoop",
        "agent_journal::conversation::ConversationEngine",
        "agent_journal::provider::openai",
        "agent_journal::format::ajournal",
    ] {
        assert!(reached(path), "{path} is not on the face the check reads");
    }
    assert!(paths.len() > 200, "{} items", paths.len());
}

#[test]
fn a_face_too_large_or_an_item_with_two_paths_is_caught() {
    let two_paths = planted_with(face_problems, |s| {
        append(
            &s.join("lib.rs"),
            "\npub use crate::journal::Journal as JournalAgain;\n",
        )
    });
    caught(
        &two_paths,
        "crate::journal::Journal has 2 public paths: agent_journal::Journal, agent_journal::JournalAgain",
        "a second path",
    );
    let crowded = planted_with(face_problems, |s| {
        let consts: String = (0..ROOT_NAMES)
            .map(|i| format!("\n/// Planted.\npub const PLANTED_{i}: u8 = 0;"))
            .collect();
        append(&s.join("lib.rs"), &consts)
    });
    caught(&crowded, "the root exports", "a crowded root");
}

/// A copy of `src/` with `plant` applied, and what the check says of it.
fn planted(plant: impl FnOnce(&Path)) -> Vec<String> {
    planted_with(problems, plant)
}

/// A copy of `src/` with `plant` applied, and what `check` says of it.
fn planted_with(check: fn(&Path) -> Vec<String>, plant: impl FnOnce(&Path)) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(&src(), dir.path());
    plant(dir.path());
    check(dir.path())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("name"));
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}

fn append(file: &Path, text: &str) {
    let mut s = std::fs::read_to_string(file).expect("read");
    s.push_str(text);
    std::fs::write(file, s).expect("write");
}

fn caught(problems: &[String], what: &str, trick: &str) {
    assert!(
        problems.iter().any(|p| p.contains(what)),
        "{trick}: no problem mentions {what:?}:\n{}",
        problems.join("\n")
    );
}

#[test]
fn tricks_are_caught() {
    // (file, what is appended to it, what the check must say): each a way
    // around the rules, planted alone in a copy of `src/`.
    let appended: &[(&str, &str, &[&str])] = &[
        // An item imported through a re-export of lib.rs.
        (
            "verify.rs",
            "use crate::Journal as _ViaLib;",
            &["verify.rs: `crate::Journal` goes through a re-export of lib.rs"],
        ),
        // A public module of lib.rs that is a re-export.
        (
            "maintenance.rs",
            "fn _planted() { let _ = crate::conversation::ConversationEngine::new; }",
            &["maintenance.rs: `crate::conversation::ConversationEngine::new` goes through"],
        ),
        // An alias of the crate, then an upward path through it.
        (
            "model.rs",
            "use crate as up;\nfn _planted() { let _ = up::journal::Journal::open; }",
            &["model.rs: `model` (layer 0) imports `crate::journal::Journal::open`"],
        ),
        // `extern crate self as x`.
        (
            "model.rs",
            "extern crate self as me;\nfn _planted() { let _ = me::session::Session::id; }",
            &["imports `crate::session::Session::id`"],
        ),
        // A `//` inside a string on the same line as an upward path.
        (
            "model.rs",
            "fn _planted() -> &'static str { let _u = \"http://x\"; let _ = crate::store::Durability::Synced; \"\" }",
            &["imports `crate::store::Durability::Synced`"],
        ),
        // A `use` inside a function, and a path inside a macro's arguments.
        (
            "event.rs",
            "fn _planted() { use crate::{state::{SessionState}}; let _ = format!(\"{:?}\", crate::journal::Journal::open as usize); }",
            &[
                "imports `crate::state::SessionState`",
                "imports `crate::journal::Journal::open`",
            ],
        ),
        // The command line reaching into the library's inside.
        (
            "cli/mod.rs",
            "fn _planted() { let _ = crate::store::x; }",
            &["the command line uses crate::store::x"],
        ),
    ];
    for (file, code, expected) in appended {
        let p = planted(|s| append(&s.join(file), &format!("\n{code}\n")));
        for what in *expected {
            caught(&p, what, code);
        }
    }
    // Two files of one module importing each other.
    let p = planted(|s| {
        append(
            &s.join("format/mod.rs"),
            "\nmod planted_a;\nmod planted_b;\n",
        );
        std::fs::write(
            s.join("format/planted_a.rs"),
            "pub(crate) fn a() { super::planted_b::b() }\n",
        )
        .expect("write");
        std::fs::write(
            s.join("format/planted_b.rs"),
            "use super::planted_a::a;\npub(crate) fn b() { a() }\n",
        )
        .expect("write");
    });
    caught(
        &p,
        "format/planted_a.rs, format/planted_b.rs",
        "file circle",
    );
}

#[test]
fn a_re_export_is_followed_to_the_file_that_defines_the_item() {
    let lib = Crate::read(&src().join("lib.rs"));
    let imports = lib.imports();
    let to_error = imports
        .iter()
        .find(|i| i.path == ["error", "Error"])
        .expect("some module imports crate::error::Error");
    assert!(
        to_error
            .to
            .as_ref()
            .is_some_and(|t| t.ends_with("error.rs")),
        "{to_error:?}"
    );
}
