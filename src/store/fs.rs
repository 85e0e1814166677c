//! File-system helpers shared by the stores.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

/// fsyncs the directory `dir` (so the names made in it survive power loss).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))
}
