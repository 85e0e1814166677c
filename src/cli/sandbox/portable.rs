//! Folders checked by path where `openat` is missing (not Unix): each
//! component is looked at without following links before it is used. A
//! process that swaps a component for a link between the look and the use
//! could still get around it; on Unix nothing is looked up twice.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::mode::Mode;

/// An open folder (its path).
pub(super) struct Dir(PathBuf);

/// The refusal of a symbolic link.
#[derive(Debug)]
struct Link;

impl std::fmt::Display for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a symbolic link")
    }
}

impl std::error::Error for Link {}

/// `name` inside `dir`, if it is one plain name and not a link.
fn child(dir: &Path, name: &str) -> io::Result<PathBuf> {
    let mut parts = Path::new(name).components();
    if !matches!(
        (parts.next(), parts.next()),
        (Some(Component::Normal(_)), None)
    ) {
        return Err(io::Error::other(format!("{name:?} is not a plain name")));
    }
    let p = dir.join(name);
    match std::fs::symlink_metadata(&p) {
        Ok(md) if md.file_type().is_symlink() => Err(io::Error::other(Link)),
        _ => Ok(p),
    }
}

impl Dir {
    pub(super) fn open(path: &Path) -> io::Result<Dir> {
        let md = std::fs::symlink_metadata(path)?;
        if md.file_type().is_symlink() {
            return Err(io::Error::other(Link));
        }
        if !md.is_dir() {
            return Err(io::Error::other("not a folder"));
        }
        Ok(Dir(path.to_owned()))
    }

    pub(super) fn try_clone(&self) -> io::Result<Dir> {
        Ok(Dir(self.0.clone()))
    }

    pub(super) fn dir(&self, name: &str) -> io::Result<Dir> {
        Dir::open(&child(&self.0, name)?)
    }

    pub(super) fn file(&self, name: &str, mode: Mode) -> io::Result<File> {
        let p = child(&self.0, name)?;
        let mut o = std::fs::OpenOptions::new();
        match mode {
            Mode::Read => o.read(true),
            Mode::Write => o.write(true).create(true),
            Mode::Append => o.append(true).create(true),
        };
        o.open(p)
    }

    pub(super) fn mkdir(&self, name: &str) -> io::Result<()> {
        std::fs::create_dir(child(&self.0, name)?)
    }

    pub(super) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        std::fs::rename(child(&self.0, from)?, self.0.join(to))
    }

    pub(super) fn names(&self) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(&self.0)?
            .map(|e| e.map(|e| e.file_name()))
            .collect()
    }

    pub(super) fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

pub(super) fn is_link(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|r| r.is::<Link>())
}

pub(super) fn links(_md: &std::fs::Metadata) -> u64 {
    1
}

pub(super) fn path_bytes(p: &Path) -> Option<Vec<u8>> {
    p.to_str().map(|s| s.as_bytes().to_vec())
}

pub(super) fn path_from(bytes: &[u8]) -> Option<PathBuf> {
    String::from_utf8(bytes.to_vec()).ok().map(PathBuf::from)
}

/// Ownership is not checked off Unix: always `None`.
pub(super) fn not_own(_path: &Path) -> io::Result<Option<String>> {
    Ok(None)
}

/// `mkdir path`: fails if anything is there already.
pub(super) fn make_new_dir(path: &Path) -> io::Result<()> {
    std::fs::create_dir(path)
}
