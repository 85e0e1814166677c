//! What an import may read: a regular file, or standard input named as
//! `/dev/stdin` when it is a pipe, a socket or a redirected file. Any other
//! path that is not a regular file (a FIFO, a character or block device
//! such as `/dev/zero`, a socket) is refused before a byte of it is read:
//! some never end, and a FIFO may block the import for ever.

use std::path::Path;

use crate::error::{Error, Result};

/// The most bytes of one record an import reads before it refuses the
/// input: 32 MiB, twice the default limit of an event
/// (`DEFAULT_MAX_EVENT_BYTES`, 16 MiB; room for the escapes and whitespace of its
/// JSON text). A record is a line of JSON Lines, the message of a Claude
/// Code record (the rest of the record is skipped unread), an element of a
/// request's message list or another member of the request. Refused past
/// it, an import has written nothing; so no input makes an import hold
/// more than about twice this much of one record (the parse of it).
pub const MAX_RECORD_BYTES: u64 = 32 << 20;

/// What an import input is ([`check_input`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// A regular file of this many bytes (it can be read twice).
    File {
        /// Its size when it was checked.
        len: u64,
    },
    /// Standard input (`/dev/stdin`): a pipe or socket, read once.
    Stdin,
}

/// The paths that name standard input.
const STDIN_PATHS: [&str; 3] = ["/dev/stdin", "/dev/fd/0", "/proc/self/fd/0"];

/// What a file type is, in a few words ("a FIFO", "a character device").
pub fn describe(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "not a regular file"
    }
}

/// Checks that `path` (symbolic links followed) is a regular file, or
/// standard input named `/dev/stdin` that is a pipe, a socket or a file.
///
/// # Errors
/// [`Error::InvalidInput`] naming the path and what it is ("not a regular
/// file (a character device); nothing was imported"), without reading it;
/// [`Error::Io`] if it cannot be looked at.
pub fn check_input(path: &Path) -> Result<Input> {
    let meta =
        std::fs::metadata(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    if meta.is_file() {
        return Ok(Input::File { len: meta.len() });
    }
    let kind = meta.file_type();
    let stdin = STDIN_PATHS.iter().any(|p| path == Path::new(p));
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if stdin && (kind.is_fifo() || kind.is_socket()) {
            return Ok(Input::Stdin);
        }
    }
    let _ = stdin;
    Err(Error::InvalidInput(format!(
        "{}: not a regular file ({}); nothing was imported",
        path.display(),
        describe(kind)
    )))
}
