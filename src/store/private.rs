//! Defences against the other users of the machine: private scratch space,
//! files created without following links, and the folders this process
//! agrees to write into.
//!
//! **Scratch space** ([`PrivateDir`]) is a new folder under the temporary
//! directory with an unpredictable name, made by one `mkdir` with mode
//! 0700 that fails if anything is there already (a folder, a file, a link
//! planted under a guessed name), and checked to be ours and private once
//! made. Only its owner can add, replace or remove anything in it, so the
//! paths under it can be used as they are. It is removed when dropped.
//!
//! **New files** in a folder others may write into (an export to `/tmp`)
//! are made by [`create_new`]: `O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600,
//! so a link or a file planted under the name makes the call fail instead
//! of redirecting the write.
//!
//! **Folders we write into** ([`check_private_dir`]): a database or a
//! sandbox folder is written only when it belongs to the user this process
//! runs as and no other user may write into it. Otherwise another user
//! could swap a file we are about to open (sled's `conf`, a log segment)
//! for a link to a file of ours, and we would overwrite it.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// A fresh folder only this user can use, removed (with what it holds)
/// when dropped.
#[derive(Debug)]
pub(crate) struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Makes a new private folder `agent-journal-<what>-<random>` under the
    /// temporary directory (`$TMPDIR`, else `/tmp`).
    ///
    /// # Errors
    /// [`Error::Io`] if it cannot be made; [`Error::UnsafePath`] if what was
    /// made is not a private folder of ours (it never is, unless the
    /// system's `mkdir` misbehaves).
    pub(crate) fn new(what: &str) -> Result<PrivateDir> {
        Self::new_in(&std::env::temp_dir(), what)
    }

    /// [`PrivateDir::new`] under `parent`.
    pub(crate) fn new_in(parent: &Path, what: &str) -> Result<PrivateDir> {
        let mut last = None;
        // A name taken (by chance or by someone who guessed it) is never
        // reused: another random name is tried.
        for _ in 0..16 {
            let path = parent.join(format!("agent-journal-{what}-{}", random_name()));
            match make_private_dir(&path) {
                Ok(()) => {
                    check_private_dir(&path)?;
                    return Ok(PrivateDir { path });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    return Err(Error::io(
                        format!("creating a private folder in {}", parent.display()),
                        e,
                    ));
                }
            }
        }
        Err(Error::io(
            format!("creating a private folder in {}", parent.display()),
            last.unwrap_or_else(|| io::Error::from(io::ErrorKind::AlreadyExists)),
        ))
    }

    /// The folder.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // `remove_dir_all` does not follow links inside the folder.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// 32 hex digits of randomness (a v4-style UUID from the v7 generator's
/// random bits and the clock: unpredictable to another user).
fn random_name() -> String {
    let a = uuid::Uuid::now_v7().simple().to_string();
    let b = uuid::Uuid::now_v7().simple().to_string();
    // The random halves of two v7 ids (their first 12 digits are the time).
    format!("{}{}", &a[16..], &b[16..])
}

/// `mkdir path` with mode 0700: fails if anything is at `path` already, a
/// link included (which it does not follow).
fn make_private_dir(path: &Path) -> io::Result<()> {
    let mut b = std::fs::DirBuilder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(path)
}

/// Creates the new file `path` for writing: refused if anything is there
/// (a link is not followed), mode 0600 before the umask.
pub(crate) fn create_new(path: &Path) -> io::Result<File> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    o.open(path)
}

/// Opens the existing file `path` for reading without following a link at
/// its last component, and only if it is a regular file (a FIFO is opened
/// without blocking, then refused). `Ok(None)` for a link or anything else
/// that is not a regular file.
pub(crate) fn open_regular(path: &Path) -> io::Result<Option<File>> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC);
    }
    let f = match o.open(path) {
        Ok(f) => f,
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(f.metadata()?.is_file().then_some(f))
}

/// The user this process acts as (its effective uid).
#[cfg(unix)]
#[allow(unsafe_code)]
pub(crate) fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The group this process acts as (its effective gid).
#[cfg(unix)]
#[allow(unsafe_code)]
fn egid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// Refuses a folder that this process should not write into: one that is
/// a link owned by another user, belongs to another user, or that another
/// user may write into (others have write permission, or a group other
/// than this process's own; a sticky folder such as `/tmp` is no
/// exception, since the names in it are ours to make, not theirs to
/// plant).
///
/// # Errors
/// [`Error::UnsafePath`] naming the folder and why; [`Error::Io`] if it
/// cannot be looked at.
pub(crate) fn check_private_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = euid();
        let io = |e| Error::io(format!("looking at {}", dir.display()), e);
        let link = std::fs::symlink_metadata(dir).map_err(io)?;
        if link.file_type().is_symlink() && link.uid() != me {
            return Err(Error::UnsafePath {
                path: dir.to_owned(),
                reason: format!(
                    "a symbolic link owned by another user (uid {}), not followed",
                    link.uid()
                ),
            });
        }
        let m = std::fs::metadata(dir).map_err(io)?;
        if m.uid() != me {
            return Err(Error::UnsafePath {
                path: dir.to_owned(),
                reason: format!(
                    "it belongs to another user (uid {}); only its owner writes into it",
                    m.uid()
                ),
            });
        }
        // Group write is the user's own where the group is their private
        // group (the usual umask 002 setup): accepted when it is this
        // process's group. Others' write never is.
        let group_writes = m.mode() & 0o020 != 0 && m.gid() != egid();
        if m.mode() & 0o002 != 0 || group_writes {
            return Err(Error::UnsafePath {
                path: dir.to_owned(),
                reason: format!(
                    "other users may write into it (mode {:o}); remove their write permission \
                     (chmod go-w)",
                    m.mode() & 0o7777
                ),
            });
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Takes a shared `flock` on `f` without waiting (sled holds an exclusive
/// one on its `db` file while a process has the database open, so this
/// fails then, and keeps a process from opening it until dropped);
/// `Ok(false)` if another process holds the lock.
#[cfg(unix)]
#[allow(unsafe_code)]
pub(crate) fn try_lock_shared(f: &File) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    // SAFETY: flock on a descriptor `f` owns; no memory is passed.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Copies the sled database folder `path` into a new [`PrivateDir`], under
/// a shared lock on its `db` file (so that no process opens it meanwhile).
///
/// # Errors
/// [`Error::Locked`] if a process has it open; [`Error::NotAJournal`] if it
/// holds no `db` file; [`Error::Io`] if it cannot be read or copied.
pub(crate) fn copy_database(path: &Path) -> Result<PrivateDir> {
    let io = |what: &str, e| Error::io(format!("{what} {}", path.display()), e);
    let Some(lock) = open_regular(&path.join("db")).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::NotAJournal {
            path: path.to_owned(),
            reason: "no database here".into(),
        },
        _ => io("reading", e),
    })?
    else {
        return Err(Error::NotAJournal {
            path: path.to_owned(),
            reason: "its `db` is not a regular file".into(),
        });
    };
    #[cfg(unix)]
    if !try_lock_shared(&lock).map_err(|e| io("locking", e))? {
        return Err(Error::Locked {
            path: path.to_owned(),
        });
    }
    let scratch = PrivateDir::new("copy")?;
    copy_tree(path, scratch.path()).map_err(|e| {
        Error::io(
            format!(
                "copying {} into the private folder {}",
                path.display(),
                scratch.path().display()
            ),
            e,
        )
    })?;
    drop(lock);
    Ok(scratch)
}

/// Copies the folders and regular files under `from` into the folder `to`
/// (which must exist and be private: see [`PrivateDir`]). Links, sockets,
/// FIFOs and devices are left out; a source file is opened without
/// following a link, so an entry swapped for a link while copying is left
/// out too; every file is made new (`create_new`).
pub(crate) fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            make_private_dir(&target)?;
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            let Some(mut source) = open_regular(&entry.path())? else {
                continue;
            };
            let mut out = create_new(&target)?;
            io::copy(&mut source, &mut out)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_dir_is_new_private_and_removed() {
        let parent = tempfile::tempdir().expect("tempdir");
        let dir = PrivateDir::new_in(parent.path(), "t").expect("private");
        let path = dir.path().to_owned();
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let m = std::fs::metadata(&path).expect("meta");
            assert_eq!(m.mode() & 0o777, 0o700);
        }
        assert!(check_private_dir(&path).is_ok());
        let other = PrivateDir::new_in(parent.path(), "t").expect("private");
        assert_ne!(other.path(), path, "names are not reused");
        drop(dir);
        assert!(!path.exists());
    }

    #[cfg(unix)]
    #[test]
    fn create_new_refuses_a_planted_link_and_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"mine").expect("victim");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).expect("link");
        assert!(create_new(&link).is_err());
        assert!(create_new(&victim).is_err());
        assert_eq!(std::fs::read(&victim).expect("read"), b"mine");
        assert!(open_regular(&link).expect("open").is_none());
    }

    #[cfg(unix)]
    #[test]
    fn copy_tree_leaves_links_out() {
        let dir = tempfile::tempdir().expect("tempdir");
        let from = dir.path().join("from");
        std::fs::create_dir_all(from.join("sub")).expect("dirs");
        std::fs::write(from.join("a"), b"a").expect("a");
        std::fs::write(from.join("sub/b"), b"b").expect("b");
        std::os::unix::fs::symlink("/etc/hostname", from.join("l")).expect("link");
        let to = PrivateDir::new_in(dir.path(), "copy").expect("private");
        copy_tree(&from, to.path()).expect("copy");
        assert_eq!(std::fs::read(to.path().join("a")).expect("a"), b"a");
        assert_eq!(std::fs::read(to.path().join("sub/b")).expect("b"), b"b");
        assert!(std::fs::symlink_metadata(to.path().join("l")).is_err());
    }
}
