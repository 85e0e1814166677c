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
