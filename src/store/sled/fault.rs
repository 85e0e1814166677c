//! How sled's failures become the journal's errors: its error values
//! ([`storage`]), a malformed key in a scan ([`scanned`]) and its panics
//! ([`contained`], [`sled_panicked`], [`panic_message`]).
//!
//! sled 0.34 panics on some damaged pages of its own files (for example in
//! its `serialization.rs`), in whatever call first reads them; the journal
//! promises no panic on any database content, so such a panic becomes
//! [`Error::Corruption`] naming the database file (see `contain.rs` for the
//! boundary every call goes through). A leaf: it uses nothing of the sled
//! store, so the store, its threads and its boundary all use it.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use crate::error::{Error, Result};
use crate::model::SessionId;
use crate::store::sled::keys::split_key;

/// The text of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// The error for a panic of sled while `what` in the database at `path`.
pub(crate) fn sled_panicked(path: &Path, what: &str, payload: &(dyn Any + Send)) -> Error {
    Error::corruption(
        None,
        None,
        None,
        format!(
            "sled failed while {what} in {} ({}): its files are damaged; \
             `salvage` recovers what the write-ahead log and the snapshots still hold",
            path.join("db").display(),
            panic_message(payload)
        ),
    )
}

/// Runs `f`, a call into sled for `what`, turning a panic into
/// [`Error::Corruption`].
pub(crate) fn contained<T>(path: &Path, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(sled_panicked(path, what, &*p)))
}

/// The seq and value of an item of a scan of `session`'s events.
pub(crate) fn scanned(
    session: SessionId,
    item: sled::Result<(sled::IVec, sled::IVec)>,
) -> Result<(u64, sled::IVec)> {
    let (k, v) = item.map_err(|e| storage(e, "reading events"))?;
    match split_key(&k) {
        Some((_, seq)) => Ok((seq, v)),
        None => Err(Error::corruption(
            Some(session),
            None,
            None,
            "malformed key in tree events",
        )),
    }
}

/// The journal's error for sled's error `e` while `context`: I/O stays I/O,
/// sled's corruption is [`Error::Corruption`], anything else
/// [`Error::Storage`].
pub(crate) fn storage(e: sled::Error, context: &str) -> Error {
    match e {
        sled::Error::Io(io) => Error::io(context.to_owned(), io),
        sled::Error::Corruption { at, .. } => Error::corruption(
            None,
            None,
            at.map(|p| p.lid()),
            format!("sled reports corruption while {context}"),
        ),
        other => Error::Storage(format!("{context}: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_inside_is_corruption_naming_the_file() {
        let path = Path::new("/data/agent.db");
        let r: Result<()> = contained(path, "reading", || panic!("bad page"));
        let Err(e) = r else { panic!("contained") };
        assert!(e.is_corruption(), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("/data/agent.db/db") && text.contains("bad page"),
            "{text}"
        );
    }
}
