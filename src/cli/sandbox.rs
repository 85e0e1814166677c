//! The demo's sandbox: the one folder its tools may touch, and the record of
//! which folder each session's tools may use.
//!
//! **Paths.** Every path a tool names, and every file name made from a call
//! id, is resolved from an open handle on the sandbox folder, one component
//! at a time, never following a symbolic link (`openat` with `O_NOFOLLOW` on
//! Unix). An absolute path or a `..` is refused before anything is opened;
//! a symbolic link anywhere on the way is refused, not followed, even one
//! put there while a tool runs; a file with more than one name (a hard link
//! may be a name for a file elsewhere) and anything that is not a plain
//! file are refused too. The demo's own files at the top of the folder
//! (`.calls`, `.executions.log`, `.agent-journal-sandbox`) cannot be named
//! by a tool. Call ids become file names only through [`CallRecord`]: every
//! byte outside `[A-Za-z0-9_-]` is percent-encoded, so `..`, `/etc/hostname`
//! or an empty id are plain names inside `.calls`.
//!
//! **Which folder.** A session's events (its `sandbox` label included) never
//! choose the folder: an imported journal keeps its labels. `demo` records
//! the folder it made for a session in the journal's record area
//! ([`Journal::put_record`], namespace `demo.sandboxes`: a sled database's
//! `records` file, a PostgreSQL journal's `records` table), which no
//! session, exported file, import or copy of sessions writes, and
//! the folder itself lists the sessions allowed in it
//! (`.agent-journal-sandbox`). `resume` without `--sandbox` uses a folder
//! only when both agree; otherwise the user names one.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use agent_journal::{Error, Journal, SessionId};

mod calls;
mod mode;
#[cfg(not(unix))]
mod portable;
mod registry;
#[cfg(unix)]
mod unix;

pub(crate) use calls::{CallRecord, encode};
use mode::Mode;
#[cfg(not(unix))]
use portable as sys;
#[cfg(unix)]
use unix as sys;

/// The record of each `write_file` call served, for keyed re-runs.
const CALLS: &str = ".calls";
/// The log of each real execution of `write_file`.
pub(crate) const EXECUTIONS: &str = ".executions.log";
/// The sessions allowed to run their tools in this folder, one id a line.
const ADMITTED: &str = ".agent-journal-sandbox";
/// The top-level names tools cannot touch (compared ignoring ASCII case, for
/// file systems that ignore it).
const RESERVED: [&str; 3] = [CALLS, EXECUTIONS, ADMITTED];
/// The most a file the demo reads for itself may hold (the sandbox marker).
const MAX_OWN_FILE: u64 = 1 << 20;

/// An open sandbox folder.
pub(crate) struct Sandbox {
    /// The folder's canonical path, for messages and the registry.
    path: PathBuf,
    /// The open folder every path is resolved from.
    dir: sys::Dir,
}

impl Sandbox {
    /// A new, empty sandbox folder under `root` (made if missing), for a new
    /// demo run. `root` must be this user's alone ([`Sandbox::chosen`]);
    /// the run's folder is made new in it, mode 0700 (never one that is
    /// there already).
    pub(crate) fn create_under(root: &Path) -> Result<Sandbox, Error> {
        std::fs::create_dir_all(root).map_err(|e| Error::Io {
            context: format!("creating {}", root.display()),
            source: e,
        })?;
        check_own(root)?;
        let path = root.join(SessionId::new().to_string());
        sys::make_new_dir(&path).map_err(|e| Error::Io {
            context: format!("creating sandbox {}", path.display()),
            source: e,
        })?;
        Sandbox::chosen(&path)
    }

    /// The folder the user named (`--sandbox DIR`), made if missing. It
    /// must be this user's alone: a folder of another user's, one others
    /// may write into, or another user's link to a folder is refused.
    pub(crate) fn chosen(dir: &Path) -> Result<Sandbox, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Io {
            context: format!("opening sandbox {}", dir.display()),
            source: e,
        })?;
        check_own(dir)?;
        dir.canonicalize()
            .map_err(|e| Error::Io {
                context: format!("opening sandbox {}", dir.display()),
                source: e,
            })
            .and_then(|path| Sandbox::open(&path))
    }

    /// Opens the folder at the canonical `path`, which must not be a link.
    fn open(path: &Path) -> Result<Sandbox, Error> {
        let dir = sys::Dir::open(path).map_err(|e| Error::Io {
            context: format!("opening sandbox {}", path.display()),
            source: e,
        })?;
        Ok(Sandbox {
            path: path.to_owned(),
            dir,
        })
    }

    /// The sandbox this database recorded for session `id`, if the folder
    /// agrees. `label` (the session's own claim) is only quoted in the error.
    ///
    /// # Errors
    /// [`Error::InvalidInput`], naming the session and what is missing, when
    /// nothing is recorded for it, the folder cannot be opened (or is now a
    /// link), or the folder does not list the session.
    pub(crate) fn recorded(
        journal: &Journal,
        id: SessionId,
        label: Option<&str>,
    ) -> Result<Sandbox, Error> {
        let refuse = |why: String| {
            let claim = label
                .map(|l| format!("; its own `sandbox` label ({l}) is not trusted"))
                .unwrap_or_default();
            Error::InvalidInput(format!(
                "session {id}: {why}{claim}; to resume it, name a folder for its tools: \
                 resume {id} --sandbox DIR"
            ))
        };
        let Some(path) = registry::lookup(journal, id)? else {
            return Err(refuse(format!(
                "no sandbox is recorded for it in this journal's records (namespace {}: \
                 `demo` records one; an imported or copied session, or a `fork` copy, has \
                 none)",
                registry::NAMESPACE
            )));
        };
        let sandbox = Sandbox::open(&path)
            .map_err(|e| refuse(format!("its recorded sandbox cannot be used: {e}")))?;
        if !sandbox.admits(id).map_err(|e| {
            refuse(format!(
                "cannot read {}: {e}",
                sandbox.path.join(ADMITTED).display()
            ))
        })? {
            return Err(refuse(format!(
                "its recorded sandbox {} does not list it in {ADMITTED}",
                path.display()
            )));
        }
        Ok(sandbox)
    }

    /// Records in this folder and in `journal` that session `id` runs its
    /// tools here, durably, before any of its tools runs.
    pub(crate) fn admit(&self, journal: &Journal, id: SessionId) -> Result<(), Error> {
        let marker = self.path.join(ADMITTED);
        let io = |e: io::Error| Error::Io {
            context: format!("recording session {id} in {}", marker.display()),
            source: e,
        };
        let mut f = self.dir.file(ADMITTED, Mode::Append).map_err(io)?;
        plain_file(&f).map_err(io)?;
        f.write_all(format!("{id}\n").as_bytes())
            .and_then(|()| f.sync_data())
            .and_then(|()| self.dir.sync())
            .map_err(io)?;
        registry::add(journal, id, &self.path)
    }

    /// Whether this folder lists session `id` as allowed.
    fn admits(&self, id: SessionId) -> io::Result<bool> {
        let f = match self.dir.file(ADMITTED, Mode::Read) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            other => other?,
        };
        let text = read_plain(f, MAX_OWN_FILE)?;
        let id = id.to_string();
        Ok(text.lines().any(|l| l.trim() == id))
    }

    /// The folder's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// `path` as shown in messages: inside the sandbox (or as given, if it
    /// is absolute).
    fn show(&self, path: &str) -> String {
        self.path.join(path).display().to_string()
    }

    /// The components of a tool's relative `path`, checked: not absolute,
    /// no `..`, no NUL, and not one of the demo's own files.
    fn components<'p>(&self, path: &'p str) -> Result<Vec<&'p str>, String> {
        let refuse = |why: &str| Err(format!("refused {}: {why}", self.show(path)));
        if path.starts_with('/') || Path::new(path).is_absolute() {
            return refuse("an absolute path; tools take paths inside the sandbox");
        }
        if path.contains('\0') {
            return refuse("a path with a NUL byte");
        }
        let parts: Vec<&str> = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if parts.contains(&"..") {
            return refuse("`..` would leave the sandbox");
        }
        if let Some(first) = parts.first() {
            if RESERVED.iter().any(|r| r.eq_ignore_ascii_case(first)) {
                return refuse("the demo's own record; tools cannot touch it");
            }
        }
        Ok(parts)
    }

    /// Opens the folder `dirs` below the sandbox without following links.
    /// With `create`, missing folders are made.
    fn walk(&self, dirs: &[&str], create: bool) -> Result<sys::Dir, String> {
        let mut dir = self
            .dir
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", self.path.display()))?;
        for (i, name) in dirs.iter().enumerate() {
            let at = dirs[..=i].join("/");
            if create {
                match dir.mkdir(name) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => {
                        return Err(self.failed("cannot create", &at, &e));
                    }
                    _ => {}
                }
            }
            dir = dir
                .dir(name)
                .map_err(|e| self.failed("cannot open", &at, &e))?;
        }
        Ok(dir)
    }

    /// The message of a failed open of `at` (a path inside the sandbox).
    fn failed(&self, what: &str, at: &str, e: &io::Error) -> String {
        if sys::is_link(e) {
            format!(
                "refused {}: a symbolic link, which the sandbox never follows",
                self.show(at)
            )
        } else {
            format!("{what} {}: {e}", self.show(at))
        }
    }

    /// Opens the plain file `path` (a tool's argument) inside the sandbox.
    fn open_file(&self, path: &str, mode: Mode) -> Result<std::fs::File, String> {
        let parts = self.components(path)?;
        let Some((last, dirs)) = parts.split_last() else {
            return Err(format!(
                "refused {}: the sandbox folder itself, not a file",
                self.show(path)
            ));
        };
        let what = if mode == Mode::Read {
            "cannot read"
        } else {
            "cannot write"
        };
        let f = self
            .walk(dirs, false)?
            .file(last, mode)
            .map_err(|e| self.failed(what, path, &e))?;
        plain_file(&f).map_err(|e| format!("refused {}: {e}", self.show(path)))?;
        Ok(f)
    }

    /// The contents of the file `path` inside the sandbox.
    pub(crate) fn read(&self, path: &str) -> Result<String, String> {
        let f = self.open_file(path, Mode::Read)?;
        read_plain(f, u64::MAX).map_err(|e| format!("cannot read {}: {e}", self.show(path)))
    }

    /// Writes `content` to the file `path` inside the sandbox (made if
    /// missing, its folder must exist).
    pub(crate) fn write(&self, path: &str, content: &str) -> Result<(), String> {
        let mut f = self.open_file(path, Mode::Write)?;
        f.set_len(0)
            .and_then(|()| f.write_all(content.as_bytes()))
            .map_err(|e| format!("cannot write {}: {e}", self.show(path)))
    }

    /// The names in the folder `path` inside the sandbox (`.` is the
    /// sandbox), sorted.
    pub(crate) fn list(&self, path: &str) -> Result<Vec<String>, String> {
        let parts = self.components(path)?;
        let mut names: Vec<String> = self
            .walk(&parts, false)?
            .names()
            .map_err(|e| format!("cannot list {}: {e}", self.show(path)))?
            .into_iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    /// Appends `line` to the execution log.
    pub(crate) fn log_execution(&self, line: &str) -> Result<(), String> {
        let fail = |e: io::Error| format!("cannot log to {}: {e}", self.show(EXECUTIONS));
        let mut f = self
            .dir
            .file(EXECUTIONS, Mode::Append)
            .map_err(|e| self.failed("cannot log to", EXECUTIONS, &e))?;
        plain_file(&f).map_err(fail)?;
        f.write_all(format!("{line}\n").as_bytes()).map_err(fail)
    }

    /// The result recorded for a call, if it was served before.
    pub(crate) fn recorded_result(&self, call: &CallRecord) -> Result<Option<String>, String> {
        let mut dir = match self.dir.dir(CALLS) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            other => other.map_err(|e| self.failed("cannot open", CALLS, &e))?,
        };
        let mut at = CALLS.to_owned();
        for name in &call.dirs {
            at = format!("{at}/{name}");
            dir = match dir.dir(name) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                other => other.map_err(|e| self.failed("cannot open", &at, &e))?,
            };
        }
        let at = format!("{at}/{}", call.file);
        let f = match dir.file(&call.file, Mode::Read) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            other => other.map_err(|e| self.failed("cannot read", &at, &e))?,
        };
        plain_file(&f).map_err(|e| format!("refused {}: {e}", self.show(&at)))?;
        read_plain(f, u64::MAX)
            .map(Some)
            .map_err(|e| format!("cannot read {}: {e}", self.show(&at)))
    }

    /// Records `result` as the result of a call (a temporary name, then a
    /// rename, so a crash never leaves half a record).
    pub(crate) fn record_result(&self, call: &CallRecord, result: &str) -> Result<(), String> {
        let mut dirs = vec![CALLS];
        dirs.extend(call.dirs.iter().map(String::as_str));
        let dir = self.walk(&dirs, true)?;
        let at = |name: &str| format!("{}/{name}", dirs.join("/"));
        let tmp = call.temporary();
        let fail =
            |e: io::Error| format!("cannot record the call in {}: {e}", self.show(&at(&tmp)));
        let mut f = dir
            .file(&tmp, Mode::Write)
            .map_err(|e| self.failed("cannot record the call in", &at(&tmp), &e))?;
        plain_file(&f).map_err(fail)?;
        f.set_len(0)
            .and_then(|()| f.write_all(result.as_bytes()))
            .map_err(fail)?;
        dir.rename(&tmp, &call.file).map_err(fail)
    }
}

/// Refuses anything but a plain file with one name.
fn plain_file(f: &std::fs::File) -> io::Result<()> {
    let md = f.metadata()?;
    if !md.file_type().is_file() {
        return Err(io::Error::other("not a plain file"));
    }
    let names = sys::links(&md);
    if names > 1 {
        return Err(io::Error::other(format!(
            "a file with {names} names (hard links), which may be a file outside the sandbox"
        )));
    }
    Ok(())
}

/// Reads a file as UTF-8 text, refusing one over `limit` bytes.
fn read_plain(f: std::fs::File, limit: u64) -> io::Result<String> {
    let mut text = String::new();
    f.take(limit.saturating_add(1)).read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(io::Error::other(format!("larger than {limit} bytes")));
    }
    Ok(text)
}

/// Refuses a folder that is not this user's alone (see `sys::not_own`).
fn check_own(dir: &Path) -> Result<(), Error> {
    let why = sys::not_own(dir).map_err(|e| Error::Io {
        context: format!("looking at {}", dir.display()),
        source: e,
    })?;
    match why {
        None => Ok(()),
        Some(why) => Err(Error::UnsafePath {
            path: dir.to_owned(),
            reason: format!("{why}; tools run only in a folder of this user's alone"),
        }),
    }
}
