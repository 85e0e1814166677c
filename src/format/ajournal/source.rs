//! The bytes an exported journal is read from: a slice in memory, or a file
//! read through a window, so that reading a file of any size holds at most
//! the window and one record.

use std::fs::File;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Random access to the bytes of an exported journal.
pub(crate) trait Source {
    /// The number of bytes.
    fn len(&self) -> usize;

    /// The bytes of `range`; `None` if it runs past the end. An I/O error
    /// is kept (see [`Source::take_error`]) and reads as the end.
    fn get(&mut self, range: Range<usize>) -> Option<&[u8]>;

    /// The error of a read that failed, if one did: a reader that saw the
    /// file end early must report it rather than the end.
    fn take_error(&mut self) -> Option<Error> {
        None
    }
}

impl Source for &[u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self)
    }

    fn get(&mut self, range: Range<usize>) -> Option<&[u8]> {
        <[u8]>::get(self, range)
    }
}

/// The bytes a [`FileSource`] reads at once.
const WINDOW: usize = 1 << 20;

/// A file read through a window of [`WINDOW`] bytes (more for a longer
/// record): reading forward costs one `pread` per window.
pub(crate) struct FileSource {
    file: File,
    path: PathBuf,
    len: usize,
    /// The bytes from `start`.
    window: Vec<u8>,
    start: usize,
    /// The first I/O error, if a read failed.
    error: Option<Error>,
}

impl FileSource {
    /// Opens `path`; refuses anything but a regular file (an endless
    /// input such as a device or a pipe is no exported journal).
    pub(crate) fn open(path: &Path) -> Result<FileSource> {
        let io = |e| Error::io(format!("reading {}", path.display()), e);
        let file = File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(Error::NotAJournal {
                path: path.to_owned(),
                reason: "not a regular file".into(),
            });
        }
        let len = usize::try_from(meta.len()).map_err(|_| Error::NotAJournal {
            path: path.to_owned(),
            reason: "larger than this machine can address".into(),
        })?;
        Ok(FileSource {
            file,
            path: path.to_owned(),
            len,
            window: Vec::new(),
            start: 0,
            error: None,
        })
    }

    /// The open file, for reading records at the offsets found.
    pub(crate) fn into_file(self) -> File {
        self.file
    }
}

impl Source for FileSource {
    fn len(&self) -> usize {
        self.len
    }

    fn get(&mut self, range: Range<usize>) -> Option<&[u8]> {
        if range.start > range.end || range.end > self.len {
            return None;
        }
        let end = self.start + self.window.len();
        if range.start < self.start || range.end > end {
            let want = (range.end - range.start)
                .max(WINDOW)
                .min(self.len - range.start);
            self.window.resize(want, 0);
            if want < self.window.capacity() / 4 {
                self.window.shrink_to(want.max(WINDOW));
            }
            self.start = range.start;
            if let Err(e) = self
                .file
                .read_exact_at(&mut self.window, range.start as u64)
            {
                self.window.clear();
                self.error = Some(Error::io(
                    format!(
                        "reading {} at byte offset {}",
                        self.path.display(),
                        range.start
                    ),
                    e,
                ));
                return None;
            }
        }
        let at = range.start - self.start;
        self.window.get(at..at + (range.end - range.start))
    }

    fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_source_reads_what_a_slice_holds_across_its_windows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..(3 * WINDOW + 17))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        std::fs::write(&path, &bytes).expect("write");
        let mut f = FileSource::open(&path).expect("open");
        let mut s: &[u8] = &bytes;
        assert_eq!(Source::len(&f), bytes.len());
        for r in [
            0..10,
            WINDOW - 3..WINDOW + 3,
            5..2 * WINDOW + 9,
            1..2,
            3 * WINDOW..3 * WINDOW + 17,
            3 * WINDOW..3 * WINDOW + 18,
            9..9,
        ] {
            assert_eq!(
                f.get(r.clone()).map(<[u8]>::to_vec),
                Source::get(&mut s, r.clone()).map(<[u8]>::to_vec),
                "{r:?}"
            );
        }
        assert!(f.take_error().is_none());
    }

    #[test]
    fn a_device_is_no_journal() {
        assert!(matches!(
            FileSource::open(Path::new("/dev/zero")),
            Err(Error::NotAJournal { .. })
        ));
    }
}
