//! How a sandbox file is opened, as both the Unix and the portable
//! implementations of `Dir::file` take it.

/// How a file is opened.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Read only.
    Read,
    /// Write, creating it if missing (the caller truncates it after checks).
    Write,
    /// Append, creating it if missing.
    Append,
}
