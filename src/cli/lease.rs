//! `--lease-owner` and `--lease-ttl` of `demo` and `resume`: the run holds
//! the session's lease on a shared store (PostgreSQL), renewed in the
//! background, so that a second worker can take over only once this one has
//! stopped renewing (died, or was paused past the lease), and this one is
//! fenced out if it ever wakes up.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agent_journal::{Error, Journal, Session, SessionId};
use clap::Args;

/// The lease options of a command that drives a session.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct LeaseArgs {
    /// Hold the session's lease as this worker while running (a store
    /// shared between processes: PostgreSQL). Another worker's live lease
    /// refuses the run (exit 4).
    #[arg(long, value_name = "NAME")]
    pub(crate) lease_owner: Option<String>,
    /// Seconds the lease lasts unless renewed; it is renewed every third
    /// of that while the run goes on.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub(crate) lease_ttl: f64,
}

/// A lease held for a run, renewed by a thread until dropped.
pub(crate) struct Held {
    session: Session,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    /// Gives the lease up: the run is over.
    pub(crate) fn release(mut self) -> Result<(), Error> {
        self.stop_renewing();
        self.session.release_lease()
    }

    fn stop_renewing(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // A run that failed keeps its lease until it lapses: its state may
        // need a person before another worker goes on.
        self.stop_renewing();
    }
}

/// Takes the lease of `session` if `--lease-owner` was given.
pub(crate) fn hold(session: &Session, args: &LeaseArgs) -> Result<Option<Held>, Error> {
    let Some(owner) = &args.lease_owner else {
        return Ok(None);
    };
    if !(args.lease_ttl.is_finite() && args.lease_ttl > 0.0) {
        return Err(Error::InvalidInput(format!(
            "--lease-ttl must be a positive number of seconds, not {}",
            args.lease_ttl
        )));
    }
    let ttl = Duration::from_secs_f64(args.lease_ttl);
    session.acquire_lease(owner, ttl)?;
    let stop = Arc::new(AtomicBool::new(false));
    let (s, flag) = (session.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        while !flag.load(Ordering::SeqCst) {
            std::thread::park_timeout(ttl / 3);
            if flag.load(Ordering::SeqCst) || s.renew_lease(ttl).is_err() {
                // Fenced or unreachable: the next append says so.
                return;
            }
        }
    });
    Ok(Some(Held {
        session: session.clone(),
        stop,
        thread: Some(thread),
    }))
}

/// Refuses to drive session `id` while any worker's lease on it is live
/// (the holder and expiry named): this run is a new process, so never the
/// instance that holds it, even under the same `--lease-owner` name.
pub(crate) fn check_free(journal: &Journal, id: SessionId, args: &LeaseArgs) -> Result<(), Error> {
    match journal.lease_of(id)? {
        Some(l) => {
            let owner = if args.lease_owner.as_deref() == Some(l.owner.as_str()) {
                format!("{} (another process started with that name)", l.owner)
            } else {
                l.owner
            };
            Err(Error::LeaseHeld {
                session: id,
                owner,
                expires_at: l.expires_at,
            })
        }
        None => Ok(()),
    }
}
