//! Writing an exported journal.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::{MAGIC, TRAILER_LEN, TRAILER_MARK};
use crate::error::{Error, Result};

/// Writes an exported journal, record by record, then its trailer.
pub(crate) struct FileWriter {
    out: BufWriter<File>,
    path: PathBuf,
    records: u64,
    /// CRC-32 of every byte written so far.
    crc: crc32fast::Hasher,
}

impl FileWriter {
    /// Creates (or truncates) the file and writes the magic.
    #[cfg(test)]
    pub(crate) fn create(path: &Path) -> Result<Self> {
        let f =
            File::create(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        Self::new(f, path)
    }

    /// Writes the magic into the new, empty file `f` (at `path`, named in
    /// messages).
    pub(crate) fn new(f: File, path: &Path) -> Result<Self> {
        let mut w = Self {
            out: BufWriter::new(f),
            path: path.to_owned(),
            records: 0,
            crc: crc32fast::Hasher::new(),
        };
        w.write(MAGIC)?;
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.crc.update(bytes);
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))
    }

    /// Appends one frame.
    pub(crate) fn write_frame(&mut self, frame: &[u8]) -> Result<()> {
        let too_large = || Error::TooLarge {
            size: frame.len() as u64,
            limit: TRAILER_MARK as u64 - 1,
        };
        let len = u32::try_from(frame.len()).map_err(|_| too_large())?;
        if len == TRAILER_MARK {
            return Err(too_large());
        }
        self.write(&len.to_le_bytes())?;
        self.write(frame)?;
        self.records += 1;
        Ok(())
    }

    /// Writes the trailer, flushes and fsyncs the file; returns the number
    /// of records written.
    pub(crate) fn finish(mut self) -> Result<u64> {
        let crc = std::mem::take(&mut self.crc).finalize();
        let mut trailer = [0u8; TRAILER_LEN];
        trailer[..4].copy_from_slice(&TRAILER_MARK.to_le_bytes());
        trailer[4..12].copy_from_slice(&self.records.to_le_bytes());
        trailer[12..].copy_from_slice(&crc.to_le_bytes());
        self.write(&trailer)?;
        let path = self.path.clone();
        let f = self
            .out
            .into_inner()
            .map_err(|e| Error::io(format!("writing {}", path.display()), e.into_error()))?;
        sync_file(&f).map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
        Ok(self.records)
    }
}

/// fsyncs `f`; a file that is not a regular file and cannot be synced (a
/// character device such as `/dev/null`, a pipe: `EINVAL`) is fine, as
/// there is nothing of it to keep.
pub(crate) fn sync_file(f: &File) -> std::io::Result<()> {
    match f.sync_all() {
        Err(e)
            if e.kind() == std::io::ErrorKind::InvalidInput
                && f.metadata().is_ok_and(|m| !m.is_file()) =>
        {
            Ok(())
        }
        other => other,
    }
}
