//! Folders opened without following links: `openat` on Unix.
//!
//! The only `unsafe` code of the command line: calls of `openat`,
//! `mkdirat`, `renameat`, `fstatat` and `fdopendir`/`readdir`, each on a
//! descriptor this module owns and a NUL-terminated name.

use std::ffi::{CStr, CString, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::mode::Mode;

/// An open folder.
pub(super) struct Dir(OwnedFd);

/// A name as C wants it; a NUL byte is refused.
fn c(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::other("a name with a NUL byte"))
}

/// The result of a call that returns -1 and sets errno on failure.
fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Dir {
    /// Opens the folder at `path`; `path` itself must not be a link.
    pub(super) fn open(path: &Path) -> io::Result<Dir> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(path)?;
        Ok(Dir(f.into()))
    }

    /// Another handle on the same folder.
    pub(super) fn try_clone(&self) -> io::Result<Dir> {
        self.0.try_clone().map(Dir)
    }

    fn openat(&self, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
        let mode: libc::c_uint = 0o644;
        // SAFETY: `name` is NUL-terminated and outlives the call, and
        // `self.0` is an open descriptor; `openat` reads nothing else.
        let fd = check(unsafe {
            libc::openat(
                self.0.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                mode,
            )
        })?;
        // SAFETY: `fd` was just opened and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// The folder `name` in this one, if it is a folder and not a link
    /// (a link is `ELOOP`, though Linux reports `ENOTDIR` for it).
    pub(super) fn dir(&self, name: &str) -> io::Result<Dir> {
        let name = c(name)?;
        match self.openat(&name, libc::O_RDONLY | libc::O_DIRECTORY) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) && self.is_link(&name) => {
                Err(io::Error::from_raw_os_error(libc::ELOOP))
            }
            other => other.map(Dir),
        }
    }

    /// Whether `name` in this folder is a symbolic link (for messages).
    fn is_link(&self, name: &CStr) -> bool {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: as in `openat`; `st` is written by `fstatat` and read
        // only when it succeeds.
        let r = unsafe {
            libc::fstatat(
                self.0.as_raw_fd(),
                name.as_ptr(),
                st.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        // SAFETY: `fstatat` succeeded, so `st` is initialized.
        r == 0 && (unsafe { st.assume_init() }.st_mode & libc::S_IFMT) == libc::S_IFLNK
    }

    /// The file `name` in this one, if it is not a link. Opening does not
    /// block (a FIFO is opened, then refused as not a plain file).
    pub(super) fn file(&self, name: &str, mode: Mode) -> io::Result<File> {
        let flags = libc::O_NONBLOCK
            | match mode {
                Mode::Read => libc::O_RDONLY,
                Mode::Write => libc::O_WRONLY | libc::O_CREAT,
                Mode::Append => libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND,
            };
        self.openat(&c(name)?, flags).map(File::from)
    }

    /// Makes the folder `name` in this one.
    pub(super) fn mkdir(&self, name: &str) -> io::Result<()> {
        let name = c(name)?;
        // SAFETY: as in `openat`.
        check(unsafe { libc::mkdirat(self.0.as_raw_fd(), name.as_ptr(), 0o755) }).map(|_| ())
    }

    /// Renames `from` to `to`, both in this folder (a link named `to` is
    /// replaced, not followed).
    pub(super) fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (c(from)?, c(to)?);
        let fd = self.0.as_raw_fd();
        // SAFETY: as in `openat`.
        check(unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) }).map(|_| ())
    }

    /// The names in this folder, without `.` and `..`.
    pub(super) fn names(&self) -> io::Result<Vec<OsString>> {
        let fd = self.0.try_clone()?.into_raw_fd();
        // SAFETY: `fd` is an open descriptor of a folder that nothing
        // else owns; on success the stream owns it (closed by
        // `closedir`), on failure it is closed here.
        let stream = unsafe { libc::fdopendir(fd) };
        if stream.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: `fd` is still ours.
            unsafe { libc::close(fd) };
            return Err(e);
        }
        let mut out = Vec::new();
        loop {
            // SAFETY: `stream` is open until `closedir` below.
            let entry = unsafe { libc::readdir(stream) };
            if entry.is_null() {
                break;
            }
            // SAFETY: `entry` points to an entry valid until the next
            // `readdir`, whose `d_name` is NUL-terminated; it is copied.
            let name = unsafe { CStr::from_ptr((*entry).d_name.as_ptr()) }.to_bytes();
            if name != b"." && name != b".." {
                out.push(OsString::from_vec(name.to_vec()));
            }
        }
        // SAFETY: `stream` is open and not used after this.
        unsafe { libc::closedir(stream) };
        Ok(out)
    }

    /// Makes the folder's entries durable.
    pub(super) fn sync(&self) -> io::Result<()> {
        File::from(self.0.try_clone()?).sync_all()
    }
}

/// Whether `e` is the refusal of a symbolic link by `O_NOFOLLOW`.
pub(super) fn is_link(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// How many names (hard links) the file has.
pub(super) fn links(md: &std::fs::Metadata) -> u64 {
    md.nlink()
}

/// A path's bytes, for the registry.
pub(super) fn path_bytes(p: &Path) -> Option<Vec<u8>> {
    Some(p.as_os_str().as_bytes().to_vec())
}

/// A path from the registry's bytes.
pub(super) fn path_from(bytes: &[u8]) -> Option<PathBuf> {
    Some(PathBuf::from(OsString::from_vec(bytes.to_vec())))
}

/// Why the folder at `path` is not one to run tools in: it (or the link
/// that names it) belongs to another user, or another user may write into
/// it (others, or a group that is not this process's own); `None` if it
/// is this user's alone. Another user's folder could hold links and files
/// of theirs, and see what the tools write.
pub(super) fn not_own(path: &Path) -> io::Result<Option<String>> {
    // SAFETY: geteuid and getegid have no preconditions and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let link = std::fs::symlink_metadata(path)?;
    if link.file_type().is_symlink() && link.uid() != uid {
        return Ok(Some(format!(
            "it is a symbolic link of another user's (uid {})",
            link.uid()
        )));
    }
    let m = std::fs::metadata(path)?;
    if m.uid() != uid {
        return Ok(Some(format!(
            "it belongs to another user (uid {})",
            m.uid()
        )));
    }
    if m.mode() & 0o002 != 0 || (m.mode() & 0o020 != 0 && m.gid() != gid) {
        return Ok(Some(format!(
            "other users may write into it (mode {:o})",
            m.mode() & 0o7777
        )));
    }
    Ok(None)
}

/// `mkdir path`, mode 0700: fails if anything is there already (a link is
/// not followed).
pub(super) fn make_new_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().mode(0o700).create(path)
}
