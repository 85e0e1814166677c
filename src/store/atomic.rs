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
use crate::store::private;

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

/// A fresh temporary path beside `target`, its number unpredictable (so
/// that another user cannot plant something under it beforehand; what is
/// made there is made exclusively anyway).
fn temporary(target: &Path) -> Result<PathBuf> {
    let name = name_of(target)?;
    let count = NEXT.fetch_add(1, Ordering::Relaxed);
    let random = u64::from_le_bytes(
        uuid::Uuid::now_v7().as_bytes()[8..16]
            .try_into()
            .unwrap_or([0; 8]),
    );
    let n = random ^ count;
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

/// Writes the file `target` whole or not at all: `write` fills the new
/// temporary file it is given (open for writing, with its path for
/// messages) and syncs it (`FileWriter::finish` and [`write_bytes`] do),
/// which then replaces `target` in one rename, the directory synced after
/// it. An existing regular file keeps its permissions.
///
/// Other users are kept out: the temporary is made new (`O_EXCL`, not
/// following a link, mode 0600) under an unpredictable name; a symbolic
/// link at `target` is followed only if it is this user's own (one planted
/// by another user in a shared folder such as `/tmp` is refused); a target
/// that exists and is not a regular file (`/dev/stdout`, a pipe) is written
/// directly only if it is this user's or the system's (root's), never into
/// another user's FIFO.
///
/// On an error of `write`, the temporary is removed and `target` is as it
/// was.
///
/// # Errors
/// [`Error::UnsafePath`] for another user's link or special file; those of
/// `write`; [`Error::Io`].
pub(crate) fn replace_file<T>(
    target: &Path,
    write: impl FnOnce(File, &Path) -> Result<T>,
) -> Result<T> {
    let target = match std::fs::metadata(target) {
        Ok(m) if !m.is_file() && !m.is_dir() => {
            check_owner(target, &m, "a special file")?;
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(target)
                .map_err(|e| Error::io(format!("opening {}", target.display()), e))?;
            return write(f, target);
        }
        Ok(_) => match std::fs::symlink_metadata(target) {
            Ok(l) if l.file_type().is_symlink() => {
                check_owner(target, &l, "a symbolic link")?;
                std::fs::canonicalize(target)
                    .map_err(|e| Error::io(format!("resolving {}", target.display()), e))?
            }
            _ => target.to_owned(),
        },
        Err(_) => match std::fs::symlink_metadata(target) {
            // A dangling link: never followed (it would make the file it
            // names wherever its owner chose).
            Ok(l) if l.file_type().is_symlink() => {
                return Err(Error::UnsafePath {
                    path: target.to_owned(),
                    reason: "a symbolic link to nothing; not followed".into(),
                });
            }
            _ => target.to_owned(),
        },
    };
    let old = std::fs::metadata(&target).ok().filter(|m| m.is_file());
    create_dirs(parent_of(&target))?;
    remove_stale(&target);
    let tmp = temporary(&target)?;
    let file = private::create_new(&tmp)
        .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
    let result = write(file, &tmp).and_then(|value| {
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

/// Refuses `path` (`what` it is, with metadata `m`) unless it belongs to
/// this user or to root: another user's link or FIFO in a shared folder is
/// not written through.
fn check_owner(path: &Path, m: &std::fs::Metadata, what: &str) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if m.uid() != private::euid() && m.uid() != 0 {
            return Err(Error::UnsafePath {
                path: path.to_owned(),
                reason: format!(
                    "{what} owned by another user (uid {}); not written through",
                    m.uid()
                ),
            });
        }
    }
    #[cfg(not(unix))]
    let _ = (path, m, what);
    Ok(())
}

/// Writes `bytes` to the new file `f` (at `path`) and syncs it: a writer
/// for [`replace_file`].
pub(crate) fn write_bytes(mut f: File, path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
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
    // Made here, exclusively (a link or folder planted under its name
    // makes this fail): `build` then fills a folder that is ours.
    std::fs::create_dir(&tmp).map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
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
