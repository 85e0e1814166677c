//! Creating and opening sessions of a [`Journal`]: the methods of the
//! handle that return a [`Session`], here because the session layer sits
//! above the journal's.

use std::any::Any;
use std::sync::{Arc, Weak};

use super::{Session, SessionShared};
use crate::error::Result;
use crate::event::Event;
use crate::journal::{Journal, SessionInfo};
use crate::model::SessionId;

/// The journal's registry entry for a session's shared state.
fn erase(shared: &Arc<SessionShared>) -> Weak<dyn Any + Send + Sync> {
    let any: Arc<dyn Any + Send + Sync> = shared.clone();
    Arc::downgrade(&any)
}

/// The shared state behind a registry entry, if it is still alive. Only
/// this file inserts entries, always of `SessionShared`.
fn shared_of(entry: Option<&Weak<dyn Any + Send + Sync>>) -> Option<Arc<SessionShared>> {
    entry?.upgrade()?.downcast::<SessionShared>().ok()
}

impl Journal {
    /// Creates a new session (it starts with `SessionOpened` at seq 0).
    pub fn create_session(&self) -> Result<Session> {
        self.create_session_with_labels(Vec::new())
    }

    /// Creates a new session with labels (`("agent", "demo")`).
    pub fn create_session_with_labels(&self, labels: Vec<(String, String)>) -> Result<Session> {
        let id = SessionId::new();
        self.create_session_from(id, vec![Event::SessionOpened { labels }])
    }

    /// Creates a session with the given id whose stream starts with `events`
    /// (the first must be `SessionOpened`), atomically.
    pub(crate) fn create_session_from(&self, id: SessionId, events: Vec<Event>) -> Result<Session> {
        let session = Session::empty(self.clone(), id);
        session.append_batch_at(0, events)?;
        self.register(&session);
        Ok(session)
    }

    pub(crate) fn register(&self, session: &Session) {
        let mut open = self.inner.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|_, w| w.strong_count() > 0);
        open.insert(session.id(), erase(&session.shared));
    }

    /// The shared state of session `id`, if a handle to it is open.
    fn open_shared(&self, id: SessionId) -> Option<Arc<SessionShared>> {
        let open = self.inner.open.lock().unwrap_or_else(|p| p.into_inner());
        shared_of(open.get(&id))
    }

    /// Opens a session: loads its latest valid snapshot and replays only the
    /// events after it, verifying each frame. Handles to the same session
    /// within one `Journal` share their state.
    ///
    /// # Errors
    /// [`Error::SessionNotFound`](crate::Error::SessionNotFound);
    /// [`Error::IncompleteSession`](crate::Error::IncompleteSession) for a
    /// session a copy into this journal left in part;
    /// [`Error::Corruption`](crate::Error::Corruption) if a frame other
    /// than the stream's torn tail is damaged (a torn tail is reported by
    /// [`Session::torn_tail`] and cut off at the next append).
    pub fn session(&self, id: SessionId) -> Result<Session> {
        if let Some(shared) = self.open_shared(id) {
            return Ok(Session::from_shared(self.clone(), shared));
        }
        if self.incomplete_copies()?.contains(&id) {
            return Err(crate::error::Error::IncompleteSession(id));
        }
        let session = Session::load(self.clone(), id)?;
        // Another thread may have loaded it meanwhile: keep the first.
        let mut open = self.inner.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(shared) = shared_of(open.get(&id)) {
            return Ok(Session::from_shared(self.clone(), shared));
        }
        open.insert(id, erase(&session.shared));
        Ok(session)
    }

    /// Drops the shared handle of a session (after it was deleted).
    pub(crate) fn forget(&self, id: SessionId) {
        self.inner
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// A summary of every session (reads each session's state).
    pub fn sessions_info(&self) -> Result<Vec<SessionInfo>> {
        self.sessions()?
            .into_iter()
            .map(|id| self.session(id)?.info())
            .collect()
    }
}
