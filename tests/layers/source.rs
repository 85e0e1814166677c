//! Reads a crate's source as Rust: its module tree (files and inline
//! modules), what each module defines and binds with `use`, and every path
//! its code names, each resolved to the file that defines the item, through
//! `use` bindings, aliases (`use crate as x`) and re-exports.
//!
//! Paths are read from tokens, so a string or a comment never hides or fakes
//! one; `use` trees are read by `syn`, groups, renames and globs included.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use quote::ToTokens;
use syn::{Item, UseTree};

/// A module path from the crate root (`[]` is the root).
pub type ModPath = Vec<String>;

/// A name bound by a `use` in a module.
#[derive(Clone, Debug)]
struct Binding {
    /// The name bound; `None` for a glob (`use a::*`).
    name: Option<String>,
    /// The absolute path it stands for.
    target: ModPath,
    /// Visible outside the module (`pub`, `pub(crate)`, ...): a re-export.
    public: bool,
    /// Visible outside the crate (`pub`): part of the crate's public face
    /// where the module is.
    exported: bool,
}

#[derive(Debug, Default)]
struct Module {
    file: PathBuf,
    /// Names the module defines itself (items and child modules).
    items: BTreeSet<String>,
    /// Those of them declared `pub`.
    pub_items: BTreeSet<String>,
    bindings: Vec<Binding>,
    /// Every identifier its code (not its `use` items) names.
    idents: BTreeSet<String>,
    /// Paths its code names, as written (first segment unresolved).
    paths: Vec<ModPath>,
}

/// One import found in a file: the path as written and the file that
/// defines what it names.
#[derive(Clone, Debug)]
pub struct Import {
    /// The file whose code names the path.
    pub from: PathBuf,
    /// The module path of `from`'s module.
    pub module: ModPath,
    /// The absolute path named.
    pub path: ModPath,
    /// The file that defines the item; `None` when nothing in the crate
    /// does (a macro, or a path that does not compile).
    pub to: Option<PathBuf>,
    /// The files of the `use` bindings the resolution went through.
    pub via: Vec<PathBuf>,
}

/// A crate read from its root file.
#[derive(Debug, Default)]
pub struct Crate {
    modules: BTreeMap<ModPath, Module>,
    /// Files that did not parse, with the parser's message.
    pub errors: Vec<String>,
}

impl Crate {
    /// Reads the crate whose root file is `root` (`src/lib.rs`).
    pub fn read(root: &Path) -> Crate {
        let mut krate = Crate::default();
        let dir = root.parent().unwrap_or(Path::new(".")).to_path_buf();
        krate.read_file(root, Vec::new(), &dir);
        krate
    }

    /// Every file of the crate.
    pub fn files(&self) -> BTreeSet<PathBuf> {
        self.modules.values().map(|m| m.file.clone()).collect()
    }

    /// The module path of the file-level module that `file` holds.
    pub fn module_of(&self, file: &Path) -> Option<ModPath> {
        self.modules
            .iter()
            .filter(|(_, m)| m.file == file)
            .map(|(p, _)| p.clone())
            .min_by_key(Vec::len)
    }

    fn read_file(&mut self, file: &Path, module: ModPath, dir: &Path) {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) => {
                self.errors.push(format!("{}: {e}", file.display()));
                return;
            }
        };
        match syn::parse_file(&text) {
            Ok(parsed) => self.read_items(&parsed.items, module, file, dir),
            Err(e) => self.errors.push(format!("{}: {e}", file.display())),
        }
    }

    /// Reads `items`, the content of `module` held in `file`; child files
    /// are looked for in `dir`.
    fn read_items(&mut self, items: &[Item], module: ModPath, file: &Path, dir: &Path) {
        self.modules.entry(module.clone()).or_default().file = file.to_path_buf();
        for item in items {
            match item {
                Item::Mod(m) => {
                    let name = m.ident.to_string();
                    self.entry(&module).items.insert(name.clone());
                    if matches!(m.vis, syn::Visibility::Public(_)) {
                        self.entry(&module).pub_items.insert(name.clone());
                    }
                    let mut child = module.clone();
                    child.push(name.clone());
                    match &m.content {
                        Some((_, inner)) => self.read_items(inner, child, file, &dir.join(&name)),
                        None => {
                            let flat = dir.join(format!("{name}.rs"));
                            let nested = dir.join(&name).join("mod.rs");
                            let path = if flat.exists() { flat } else { nested };
                            self.read_file(&path, child, &dir.join(&name));
                        }
                    }
                }
                Item::Use(u) => {
                    let public = !matches!(u.vis, syn::Visibility::Inherited);
                    let exported = matches!(u.vis, syn::Visibility::Public(_));
                    let mut out = Vec::new();
                    expand(&u.tree, Vec::new(), &mut out);
                    let m = self.entry(&module);
                    for (path, name) in out {
                        m.bindings.push(Binding {
                            name,
                            target: path,
                            public,
                            exported,
                        });
                    }
                }
                Item::ExternCrate(e) => {
                    if e.ident == "self" {
                        if let Some((_, alias)) = &e.rename {
                            self.entry(&module).bindings.push(Binding {
                                name: Some(alias.to_string()),
                                target: vec!["crate".into()],
                                public: false,
                                exported: false,
                            });
                        }
                    }
                }
                other => {
                    if let Some(name) = item_name(other) {
                        let m = self.entry(&module);
                        if is_pub(other) {
                            m.pub_items.insert(name.clone());
                        }
                        m.items.insert(name);
                    }
                    let tokens = other.to_token_stream();
                    let m = self.entry(&module);
                    scan(tokens, &mut m.paths, &mut m.idents, &mut m.bindings);
                }
            }
        }
        // Paths in `use` bindings are as written: make them absolute now
        // that the module's own names are known.
        let m = self.entry(&module);
        let own: BTreeSet<String> = m.items.clone();
        let bindings = std::mem::take(&mut m.bindings);
        let names: BTreeMap<String, ModPath> = bindings
            .iter()
            .filter_map(|b| Some((b.name.clone()?, b.target.clone())))
            .collect();
        m.bindings = bindings
            .into_iter()
            .filter_map(|b| {
                let target = absolute(&b.target, &module, &own, &names)?;
                Some(Binding { target, ..b })
            })
            .collect();
    }

    fn entry(&mut self, module: &ModPath) -> &mut Module {
        self.modules.entry(module.clone()).or_default()
    }

    /// Every import of every module, resolved.
    pub fn imports(&self) -> Vec<Import> {
        let mut out = Vec::new();
        for (module, m) in &self.modules {
            let own = &m.items;
            let names: BTreeMap<String, ModPath> = m
                .bindings
                .iter()
                .filter_map(|b| Some((b.name.clone()?, b.target.clone())))
                .collect();
            let mut named: Vec<ModPath> = Vec::new();
            for b in &m.bindings {
                // A re-export is the module's face, not its dependency,
                // unless its own code uses the name too.
                let used = match &b.name {
                    Some(n) => !b.public || m.idents.contains(n),
                    None => !b.public,
                };
                if used {
                    named.push(b.target.clone());
                }
            }
            for p in &m.paths {
                if let Some(abs) = absolute(p, module, own, &names) {
                    named.push(abs);
                }
            }
            for path in named {
                let mut via = Vec::new();
                let to = self.resolve(&path, &mut via, 0);
                out.push(Import {
                    from: m.file.clone(),
                    module: module.clone(),
                    path,
                    to,
                    via,
                });
            }
        }
        out
    }

    /// The file that defines what `path` (absolute) names, following `use`
    /// bindings (their files pushed on `via`).
    fn resolve(&self, path: &[String], via: &mut Vec<PathBuf>, depth: usize) -> Option<PathBuf> {
        if depth > 16 {
            return None;
        }
        let k = (0..=path.len())
            .rev()
            .find(|&k| self.modules.contains_key(&path[..k]))?;
        let m = &self.modules[&path[..k]];
        let Some(name) = path.get(k) else {
            return Some(m.file.clone());
        };
        if m.items.contains(name) {
            return Some(m.file.clone());
        }
        for b in &m.bindings {
            if b.name.as_ref() == Some(name) {
                via.push(m.file.clone());
                let mut next = b.target.clone();
                next.extend_from_slice(&path[k + 1..]);
                return self.resolve(&next, via, depth + 1);
            }
        }
        for b in m.bindings.iter().filter(|b| b.name.is_none()) {
            if self.defines(&b.target, name) {
                via.push(m.file.clone());
                let mut next = b.target.clone();
                next.extend_from_slice(&path[k..]);
                return self.resolve(&next, via, depth + 1);
            }
        }
        None
    }

    /// The crate's public face: every item a user can name, as (module
    /// that defines it, its name), with each public path that reaches it
    /// (`agent_journal::a::B`), following `pub mod` and `pub use` from the
    /// root.
    pub fn public_paths(&self, krate: &str) -> BTreeMap<(ModPath, String), Vec<String>> {
        let mut out = BTreeMap::new();
        let mut walked = BTreeSet::new();
        self.walk_public(&[], krate, &mut out, &mut walked);
        out
    }

    fn walk_public(
        &self,
        module: &[String],
        shown: &str,
        out: &mut BTreeMap<(ModPath, String), Vec<String>>,
        walked: &mut BTreeSet<String>,
    ) {
        if !walked.insert(shown.to_owned()) || walked.len() > 10_000 {
            return;
        }
        let Some(m) = self.modules.get(module) else {
            return;
        };
        let mut reached: Vec<(String, ModPath, String)> = m
            .pub_items
            .iter()
            .map(|n| (n.clone(), module.to_vec(), n.clone()))
            .collect();
        for b in m.bindings.iter().filter(|b| b.exported) {
            match &b.name {
                Some(name) => {
                    if let Some((defm, defn)) = self.definition(&b.target, 0) {
                        reached.push((name.clone(), defm, defn));
                    }
                }
                None => {
                    if let Some(target) = self.modules.get(&b.target) {
                        for n in &target.pub_items {
                            reached.push((n.clone(), b.target.clone(), n.clone()));
                        }
                    }
                }
            }
        }
        for (name, defm, defn) in reached {
            let path = format!("{shown}::{name}");
            let mut child = defm.clone();
            child.push(defn.clone());
            out.entry((defm, defn)).or_default().push(path.clone());
            if self.modules.contains_key(&child) {
                self.walk_public(&child, &path, out, walked);
            }
        }
    }

    /// The (module, name) that defines what `path` (absolute) names.
    fn definition(&self, path: &[String], depth: usize) -> Option<(ModPath, String)> {
        if depth > 16 || path.is_empty() {
            return None;
        }
        let k = (0..=path.len())
            .rev()
            .find(|&k| self.modules.contains_key(&path[..k]))?;
        if k == path.len() {
            let (name, parent) = path.split_last()?;
            // A private module and a re-exported item of one name (`mod
            // survey; pub use survey::survey;`): the path names the item.
            let m = &self.modules[parent];
            let item = m.bindings.iter().find(|b| b.name.as_ref() == Some(name));
            match item {
                Some(b) if !m.pub_items.contains(name) && b.target != path => {
                    return self.definition(&b.target.clone(), depth + 1);
                }
                _ => return Some((parent.to_vec(), name.clone())),
            }
        }
        let m = &self.modules[&path[..k]];
        let name = &path[k];
        if m.items.contains(name) {
            return Some((path[..k].to_vec(), name.clone()));
        }
        let b = m.bindings.iter().find(|b| b.name.as_ref() == Some(name))?;
        let mut next = b.target.clone();
        next.extend_from_slice(&path[k + 1..]);
        self.definition(&next, depth + 1)
    }

    fn defines(&self, module: &[String], name: &str) -> bool {
        self.modules.get(module).is_some_and(|m| {
            m.items.contains(name) || m.bindings.iter().any(|b| b.name.as_deref() == Some(name))
        })
    }
}

/// Declared `pub` (visible outside the crate where its module is).
fn is_pub(item: &Item) -> bool {
    let vis = match item {
        Item::Const(i) => &i.vis,
        Item::Enum(i) => &i.vis,
        Item::Fn(i) => &i.vis,
        Item::Static(i) => &i.vis,
        Item::Struct(i) => &i.vis,
        Item::Trait(i) => &i.vis,
        Item::TraitAlias(i) => &i.vis,
        Item::Type(i) => &i.vis,
        Item::Union(i) => &i.vis,
        Item::Macro(_) => return false,
        _ => return false,
    };
    matches!(vis, syn::Visibility::Public(_))
}

/// The name an item defines, if it defines one.
fn item_name(item: &Item) -> Option<String> {
    let ident = match item {
        Item::Const(i) => &i.ident,
        Item::Enum(i) => &i.ident,
        Item::Fn(i) => &i.sig.ident,
        Item::Static(i) => &i.ident,
        Item::Struct(i) => &i.ident,
        Item::Trait(i) => &i.ident,
        Item::TraitAlias(i) => &i.ident,
        Item::Type(i) => &i.ident,
        Item::Union(i) => &i.ident,
        Item::Macro(i) => i.ident.as_ref()?,
        _ => return None,
    };
    Some(ident.to_string())
}

/// Expands a `use` tree into (path as written, name bound); a glob binds
/// no name.
fn expand(tree: &UseTree, prefix: ModPath, out: &mut Vec<(ModPath, Option<String>)>) {
    match tree {
        UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            expand(&p.tree, next, out);
        }
        UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix;
            if name == "self" {
                let bound = path.last().cloned();
                out.push((path, bound));
            } else {
                path.push(name.clone());
                out.push((path, Some(name)));
            }
        }
        UseTree::Rename(r) => {
            let mut path = prefix;
            if r.ident != "self" {
                path.push(r.ident.to_string());
            }
            out.push((path, Some(r.rename.to_string())));
        }
        UseTree::Glob(_) => out.push((prefix, None)),
        UseTree::Group(g) => {
            for t in &g.items {
                expand(t, prefix.clone(), out);
            }
        }
    }
}

/// `path` as written in `module` made absolute (`crate` dropped), or
/// `None` when it names another crate.
fn absolute(
    path: &[String],
    module: &[String],
    own: &BTreeSet<String>,
    names: &BTreeMap<String, ModPath>,
) -> Option<ModPath> {
    let first = path.first()?;
    let mut base: ModPath = match first.as_str() {
        "crate" => Vec::new(),
        "self" => module.to_vec(),
        "super" => {
            let mut b = module.to_vec();
            b.pop();
            b
        }
        name if own.contains(name) => {
            let mut b = module.to_vec();
            b.push(name.to_owned());
            b
        }
        name => {
            let target = names.get(name)?;
            // A binding's target is absolute already, or `crate`-rooted
            // while still unresolved (inside `read_items`).
            let mut b: ModPath = target.clone();
            if b.first().is_some_and(|s| s == "crate") {
                b.remove(0);
            } else if b.first().is_some_and(|s| s == "super" || s == "self") {
                b = absolute(target, module, own, &BTreeMap::new())?;
            }
            b
        }
    };
    let mut rest = &path[1..];
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Collects from `tokens` every path `a::b::c` (not preceded by `::`), every
/// identifier, and the bindings of `use` statements inside code.
fn scan(
    tokens: TokenStream,
    paths: &mut Vec<ModPath>,
    idents: &mut BTreeSet<String>,
    bindings: &mut Vec<Binding>,
) {
    let tts: Vec<TokenTree> = tokens.into_iter().collect();
    let colons = |i: usize| {
        matches!((tts.get(i), tts.get(i + 1)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':')
    };
    let mut i = 0;
    while i < tts.len() {
        match &tts[i] {
            TokenTree::Group(g) => {
                scan(g.stream(), paths, idents, bindings);
                i += 1;
            }
            TokenTree::Ident(id) if id == "use" => {
                // A `use` inside code: up to its `;`, read as a use item.
                let end = (i..tts.len())
                    .find(|&j| matches!(&tts[j], TokenTree::Punct(p) if p.as_char() == ';'))
                    .unwrap_or(tts.len());
                let stream: TokenStream = tts[i..end.min(tts.len())]
                    .iter()
                    .cloned()
                    .chain(tts.get(end).cloned())
                    .collect();
                if let Ok(u) = syn::parse2::<syn::ItemUse>(stream) {
                    let mut out = Vec::new();
                    expand(&u.tree, Vec::new(), &mut out);
                    for (path, name) in out {
                        bindings.push(Binding {
                            name,
                            target: path,
                            public: false,
                            exported: false,
                        });
                    }
                }
                i = end + 1;
            }
            TokenTree::Ident(id) => {
                idents.insert(id.to_string());
                let after_colons = i >= 2 && colons(i - 2);
                if after_colons || !colons(i + 1) {
                    i += 1;
                    continue;
                }
                let mut path = vec![id.to_string()];
                let mut j = i + 1;
                while colons(j) {
                    match tts.get(j + 2) {
                        Some(TokenTree::Ident(next)) => {
                            path.push(next.to_string());
                            idents.insert(next.to_string());
                            j += 3;
                        }
                        Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => break,
                        _ => break,
                    }
                }
                paths.push(path);
                i = j;
            }
            _ => i += 1,
        }
    }
}
