//! Writing a file or a database whole or not at all: under a temporary
//! name beside the target, synced, then renamed into place and the
//! directory synced. A kill at any moment leaves the old state (the target
//! absent, or the old file unchanged) or the whole new one, plus at most a
//! temporary that a later write of the same target removes.
//!
//! A temporary is named `.<target name>.<pid>.<n>.tmp`. It is removed by
//! the next write of the same target once its process is gone (on systems
//! with `/proc`; elsewhere it is left, and ignored).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};
use crate::store::fs::sync_dir;

/// Numbers the temporaries of this process.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// The directory holding `target` (`.` for a bare name).
fn parent_of(target: &Path) -> &Path {
    match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn name_of(target: &Path) -> Result<String> {
    target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::InvalidInput(format!("{} does not name a file", target.display())))
}

/// A fresh temporary path beside `target`.
fn temporary(target: &Path) -> Result<PathBuf> {
    let name = name_of(target)?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Ok(parent_of(target).join(format!(".{name}.{}.{n}.tmp", std::process::id())))
}

/// Whether process `pid` may still be running: `false` only when `/proc`
/// says it is gone.
fn may_be_running(pid: u32) -> bool {
    if pid == std::process::id() || !Path::new("/proc/self").exists() {
        return true;
    }
    Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the temporaries of `target` left by processes that are gone
/// (killed during a write). Best effort: a temporary that cannot be
/// removed is left, and ignored.
pub(crate) fn remove_stale(target: &Path) {
    let Ok(name) = name_of(target) else { return };
    let prefix = format!(".{name}.");
    let Ok(entries) = std::fs::read_dir(parent_of(target)) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(&prefix))
            .and_then(|r| r.strip_suffix(".tmp"))
        else {
            continue;
        };
        let Some((pid, n)) = rest.split_once('.') else {
            continue;
        };
        let (Ok(pid), Ok(_)) = (pid.parse::<u32>(), n.parse::<u64>()) else {
            continue;
        };
        if may_be_running(pid) {
            continue;
        }
        let path = entry.path();
        let _ = match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path),
            _ => std::fs::remove_file(&path),
        };
    }
}

/// Removes a temporary after a failure: the original error is what counts.
fn discard(tmp: &Path) {
    let _ = if tmp.is_dir() {
        std::fs::remove_dir_all(tmp)
    } else {
        std::fs::remove_file(tmp)
    };
}

fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| {
        Error::io(
            format!("renaming {} to {}", from.display(), to.display()),
            e,
        )
    })
}

/// Creates `dir` and its missing parents, and syncs the entry of each one
/// made into its own parent (best effort: a parent we may write in but not
/// open for reading is no reason to fail).
fn create_dirs(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut missing = vec![dir];
    while let Some(p) = missing.last().and_then(|d| d.parent()) {
        if p.as_os_str().is_empty() || p.is_dir() {
            break;
        }
        missing.push(p);
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    for made in missing {
        let _ = sync_dir(parent_of(made));
    }
    Ok(())
}

/// Writes the file `target` whole or not at all: `write` creates and fills
/// the temporary path it is given (and syncs it: `FileWriter::finish` and
/// [`write_bytes`] do), which then replaces `target` in one rename, the
/// directory synced after it. An existing regular file keeps its
/// permissions; a symbolic link is followed (the file it names is
/// replaced). A target that exists and is not a regular file (`/dev/stdout`,
/// a pipe) is written directly: there is nothing there to lose.
///
/// On an error of `write`, the temporary is removed and `target` is as it
/// was.
pub(crate) fn replace_file<T>(target: &Path, write: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let target = match std::fs::metadata(target) {
        Ok(m) if !m.is_file() && !m.is_dir() => return write(target),
        Ok(_) => match std::fs::symlink_metadata(target) {
            Ok(l) if l.file_type().is_symlink() => std::fs::canonicalize(target)
                .map_err(|e| Error::io(format!("resolving {}", target.display()), e))?,
            _ => target.to_owned(),
        },
        Err(_) => target.to_owned(),
    };
    let old = std::fs::metadata(&target).ok().filter(|m| m.is_file());
    create_dirs(parent_of(&target))?;
    remove_stale(&target);
    let tmp = temporary(&target)?;
    let result = write(&tmp).and_then(|value| {
        if let Some(old) = &old {
            std::fs::set_permissions(&tmp, old.permissions())
                .map_err(|e| Error::io(format!("setting permissions of {}", tmp.display()), e))?;
        }
        rename(&tmp, &target)?;
        Ok(value)
    });
    match result {
        Ok(value) => {
            sync_dir(parent_of(&target))?;
            Ok(value)
        }
        Err(e) => {
            discard(&tmp);
            Err(e)
        }
    }
}

/// Creates the file `path`, writes `bytes` and syncs it: a writer for
/// [`replace_file`].
pub(crate) fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut f =
        File::create(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    f.write_all(bytes)
        .and_then(|()| crate::format::ajournal::sync_file(&f))
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))
}

/// Refuses a database target that is there already: a file, or a directory
/// with anything in it (an empty directory is taken, and replaced).
pub(crate) fn check_new_dir(target: &Path) -> Result<()> {
    if target.exists()
        && std::fs::read_dir(target)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(Error::InvalidInput(format!(
            "{} already exists; give a new path",
            target.display()
        )));
    }
    Ok(())
}

/// fsyncs every file and directory under `dir`, and `dir` itself.
fn sync_tree(dir: &Path) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("reading {}", dir.display()), e))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        if kind.is_dir() {
            sync_tree(&path)?;
        } else if kind.is_file() {
            File::open(&path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
        }
    }
    sync_dir(dir)
}

/// Builds the database directory `target` whole or not at all: `build`
/// fills the temporary directory it is given (and must close every handle
/// to it before it returns), which is then synced, file by file, and
/// renamed to `target`, the parent directory synced after it.
///
/// # Errors
/// [`Error::InvalidInput`] if `target` exists and is not an empty
/// directory, checked first and again by the rename itself (which never
/// replaces a non-empty directory); whatever `build` returns. On an error
/// the temporary directory is removed and `target` is as it was.
pub(crate) fn build_dir<T>(target: &Path, build: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    check_new_dir(target)?;
    create_dirs(parent_of(target))?;
    remove_stale(target);
    let tmp = temporary(target)?;
    let result = build(&tmp).and_then(|value| {
        sync_tree(&tmp)?;
        rename(&tmp, target).map_err(|e| {
            if target.exists() {
                Error::InvalidInput(format!(
                    "{} appeared while it was being built; give a new path",
                    target.display()
                ))
            } else {
                e
            }
        })?;
        Ok(value)
    });
    match result {
        Ok(value) => {
            sync_dir(parent_of(target))?;
            Ok(value)
        }
        Err(e) => {
            discard(&tmp);
            Err(e)
        }
    }
}
