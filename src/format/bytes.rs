//! [`SharedBytes`]: frames and snapshot buffers shared without copying.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An immutable byte buffer shared without copying: a snapshot frame as a
/// store holds it (a sled value, a `Vec`, an `Arc<[u8]>`). A decoded state
/// keeps its message bodies in it, so a snapshot of hundreds of MiB is
/// neither copied when read nor decoded before a message is looked at.
#[derive(Clone)]
pub struct SharedBytes(Arc<dyn AsRef<[u8]> + Send + Sync>);

impl SharedBytes {
    /// Shares `bytes` (moved in, not copied).
    pub fn new(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Self {
        SharedBytes(Arc::new(bytes))
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        (*self.0).as_ref()
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl SharedBytes {
    /// The bytes `range` of these, shared (no copy): they keep the whole
    /// buffer alive.
    ///
    /// # Panics
    /// If `range` is not within the bytes (callers slice ranges they parsed
    /// out of these bytes).
    pub(crate) fn slice(&self, range: std::ops::Range<usize>) -> SharedBytes {
        assert!(range.start <= range.end && range.end <= self.len());
        SharedBytes::new(Slice {
            whole: self.clone(),
            range,
        })
    }
}

/// Part of a shared buffer (see [`SharedBytes::slice`]).
struct Slice {
    whole: SharedBytes,
    range: std::ops::Range<usize>,
}

impl AsRef<[u8]> for Slice {
    fn as_ref(&self) -> &[u8] {
        &self.whole[self.range.clone()]
    }
}

impl From<Vec<u8>> for SharedBytes {
    fn from(v: Vec<u8>) -> Self {
        SharedBytes::new(v)
    }
}

impl From<Arc<[u8]>> for SharedBytes {
    fn from(v: Arc<[u8]>) -> Self {
        SharedBytes::new(v)
    }
}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SharedBytes({} bytes)", self.len())
    }
}
