//! [`SharedBytes`]: frames and snapshot buffers shared without copying.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An immutable byte buffer shared without copying: a snapshot frame as a
/// store holds it (a sled value, a `Vec`, an `Arc<[u8]>`). A decoded state
/// keeps its message bodies in it, so a snapshot of hundreds of MiB is
/// neither copied when read nor decoded before a message is looked at.
///
/// A part of a buffer (a slice of it, made by the crate) shares the buffer:
/// it costs no allocation, and the buffer lives while any part of it does.
#[derive(Clone)]
pub struct SharedBytes {
    buf: Arc<dyn AsRef<[u8]> + Send + Sync>,
    start: usize,
    end: usize,
}

impl SharedBytes {
    /// Shares `bytes` (moved in, not copied).
    pub fn new(bytes: impl AsRef<[u8]> + Send + Sync + 'static) -> Self {
        let end = bytes.as_ref().len();
        SharedBytes {
            buf: Arc::new(bytes),
            start: 0,
            end,
        }
    }

    /// The bytes `range` of these, shared (no copy, no allocation): they
    /// keep the whole buffer alive.
    ///
    /// # Panics
    /// If `range` is not within the bytes (callers slice ranges they parsed
    /// out of these bytes).
    pub(crate) fn slice(&self, range: std::ops::Range<usize>) -> SharedBytes {
        assert!(range.start <= range.end && range.end <= self.len());
        SharedBytes {
            buf: self.buf.clone(),
            start: self.start + range.start,
            end: self.start + range.end,
        }
    }
}

impl SharedBytes {
    /// The bytes `range` of these, shared as [`slice`](SharedBytes::slice)
    /// shares them; `None` if `range` is not within them.
    pub(crate) fn try_slice(&self, range: std::ops::Range<usize>) -> Option<SharedBytes> {
        (range.start <= range.end && range.end <= self.len()).then(|| self.slice(range))
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &(*self.buf).as_ref()[self.start..self.end]
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        self
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
