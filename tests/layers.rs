//! The shape of `src/`: every import points down the layers of
//! `docs/design.md`, never up, and no two modules import each other.
//!
//! It reads the source as text: every `crate::` and `super::` path outside a
//! comment (in `use` lines and inline), grouped imports included, resolved to
//! the file that defines it. The command line (`src/main.rs`, `src/cli/`) is
//! the binary: it may use only the library's public API.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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
    &["lib"],
];

fn layer_of(module: &str) -> Option<usize> {
    let top = module.split("::").next().unwrap_or(module);
    LAYERS.iter().position(|l| l.contains(&top))
}

/// Every `.rs` file under `dir`, as (module path, file).
fn modules(src: &Path, dir: &Path, out: &mut BTreeMap<String, PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .expect("read src")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            modules(src, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(src).expect("under src");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
            let last = parts.pop().expect("file name");
            let stem = last.trim_end_matches(".rs");
            if stem != "mod" {
                parts.push(stem.to_owned());
            }
            out.insert(parts.join("::"), path);
        }
    }
}

/// The code of a line: what comes before a `//` comment (string contents
/// are not parsed; no source line puts `crate::` in a string before `//`).
fn code_of(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a source file names after `crate::` and `super::`, as module
/// paths (`super` resolved against `module`), grouped imports expanded.
fn paths_in(text: &str, module: &str) -> Vec<Vec<String>> {
    // Join the code (comments dropped) so a grouped import may span lines.
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(code_of)
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = Vec::new();
    for (root, base) in [
        ("crate::", Vec::new()),
        ("super::", {
            // `super` is the parent module (of `a/b.rs` and `a/b/mod.rs` alike).
            let mut m: Vec<String> = module.split("::").map(str::to_owned).collect();
            m.pop();
            m
        }),
    ] {
        let mut from = 0;
        while let Some(i) = code[from..].find(root) {
            let start = from + i;
            from = start + root.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| ident_char(c) || c == ':') {
                continue; // `super::super::` is read from its first `super`
            }
            let mut prefix = base.clone();
            let mut rest = &code[from..];
            while let Some(r) = rest.strip_prefix("super::") {
                prefix.pop();
                rest = r;
            }
            collect(rest, prefix, &mut out);
        }
    }
    out
}

/// Reads `a::b::{c, d::e}` from the start of `rest` into full paths.
fn collect(rest: &str, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    let mut s = rest;
    loop {
        if let Some(r) = s.strip_prefix('{') {
            // Split the group at depth-1 commas.
            let mut depth = 1;
            let mut item = String::new();
            for c in r.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (depth == 1 && c == ',') {
                    if !item.trim().is_empty() {
                        collect(item.trim(), path.clone(), out);
                    }
                    item.clear();
                    if depth == 0 {
                        break;
                    }
                } else {
                    item.push(c);
                }
            }
            return;
        }
        let name: String = s.chars().take_while(|&c| ident_char(c)).collect();
        if name.is_empty() {
            break;
        }
        s = &s[name.len()..];
        path.push(name);
        match s.strip_prefix("::") {
            Some(r) => s = r,
            None => break,
        }
    }
    out.push(path);
}

/// The module (a key of `files`) that defines `path`: its longest prefix
/// that is a module.
fn resolve(path: &[String], files: &BTreeMap<String, PathBuf>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| files.contains_key(m))
}

/// The module a file belongs to for the layer rule and the cycle rule:
/// its top-level module (`state::messages::slot` is `state`).
fn top(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

#[test]
fn imports_point_down_the_layers_and_no_two_modules_import_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    modules(&src, &src, &mut files);
    let mut problems = Vec::new();
    // Edges between top-level modules, for the cycle rule.
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &files {
        let text = std::fs::read_to_string(path).expect("read source");
        if module == "main" || top(module) == "cli" {
            // The binary: `crate::` is the binary crate; only `crate::cli`.
            for p in paths_in(&text, module) {
                if p.first().is_some_and(|t| t != "cli") {
                    problems.push(format!(
                        "{}: the command line uses crate::{} (only the public API, agent_journal::...)",
                        path.display(),
                        p.join("::")
                    ));
                }
            }
            continue;
        }
        let Some(from) = layer_of(module) else {
            problems.push(format!(
                "{}: module `{}` is in no layer of tests/layers.rs",
                path.display(),
                top(module)
            ));
            continue;
        };
        for p in paths_in(&text, module) {
            let Some(target) = resolve(&p, &files) else {
                continue; // a macro or an item of lib.rs (`crate::Error`)
            };
            let (a, b) = (top(module), top(&target));
            if a == b || b == "lib" {
                continue;
            }
            let to = layer_of(&target).unwrap_or(usize::MAX);
            if to >= from {
                problems.push(format!(
                    "{}: `{}` (layer {from}) imports `{}` (layer {to}): imports must point down",
                    path.display(),
                    module,
                    target
                ));
            }
            edges.entry(a.to_owned()).or_default().insert(b.to_owned());
        }
    }
    for (a, targets) in &edges {
        for b in targets {
            if edges.get(b).is_some_and(|t| t.contains(a)) && a < b {
                problems.push(format!("`{a}` and `{b}` import each other"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the layers of src/ (see docs/design.md):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_reads_grouped_and_relative_imports() {
    let text = "use crate::{error::{Error, Result}, model::Id};\nuse super::super::x::Y;\n// crate::ignored\nlet v = crate::store::fs::sync_dir(d);";
    let paths: Vec<String> = paths_in(text, "a::b::c")
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "error::Error",
            "error::Result",
            "model::Id",
            "store::fs::sync_dir",
            "a::x::Y"
        ]
    );
}
