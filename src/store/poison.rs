//! [`Poison`]: the first failed write of a journal.

use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// Once a write or a sync has failed, what was acknowledged can no longer
/// be promised: every later write is refused with [`Error::Poisoned`]
/// naming the first failure, until the journal is opened again (as fjall
/// and redb do). One per journal, created by it and shared (cheap clones)
/// by everything that writes for it: the session appends, the journal's
/// flushes, imports and deletions, and inside the sled store its group
/// commits, its write-ahead log and its insert thread.
#[derive(Clone, Default)]
pub(crate) struct Poison(Arc<Mutex<Option<String>>>);

impl Poison {
    fn reason(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        // Only ever set once, from None: nothing to be inconsistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `Err(Poisoned)` once a write has failed.
    pub(crate) fn check(&self) -> Result<()> {
        match &*self.reason() {
            Some(reason) => Err(Error::Poisoned(reason.clone())),
            None => Ok(()),
        }
    }

    /// Records a failure; the first one is kept.
    pub(crate) fn set(&self, reason: String) {
        self.reason().get_or_insert(reason);
    }

    /// Records `e` if it is a failure of the disk or of the store (I/O,
    /// storage, an earlier poisoning): the errors after which what was
    /// written is in doubt. A refused input (`Conflict`, `TooLarge`, ...)
    /// changes nothing and poisons nothing.
    pub(crate) fn note(&self, e: &Error) {
        match e {
            Error::Io { .. } | Error::Storage(_) => self.set(e.to_string()),
            Error::Poisoned(reason) => self.set(reason.clone()),
            _ => {}
        }
    }
}

impl std::fmt::Debug for Poison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Poison").field(&*self.reason()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_kept_and_inputs_poison_nothing() {
        let p = Poison::default();
        assert!(p.check().is_ok());
        p.note(&Error::InvalidInput("bad".into()));
        assert!(
            p.check().is_ok(),
            "a refused input is no failure of the disk"
        );
        p.note(&Error::Storage("disk full".into()));
        p.clone().note(&Error::Storage("later".into()));
        assert!(matches!(p.check(), Err(Error::Poisoned(m)) if m.contains("disk full")));
    }
}
