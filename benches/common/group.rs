//! The baseline of row 3: a plain leader/follower group-commit loop, with
//! no library in it.
//!
//! `threads` threads each queue `per` records of `record` bytes, one at a
//! time, and wait until their record is durable. Whoever finds no write in
//! progress becomes the leader: it takes every queued record, writes them
//! with one `pwrite` to a preallocated file (written over from the start,
//! wrapping at its end) and `fdatasync`s it, then wakes the others; records
//! queued meanwhile wait for the next leader. This is the loop a journal's
//! commit path cannot beat on the same disk: the cost of the library over
//! it is what row 3 measures.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Barrier, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The size of the preallocated file the loop writes over.
const FILE_BYTES: u64 = 4 << 20;

#[derive(Default)]
struct Queue {
    /// Records queued and not yet taken by a leader.
    pending: Vec<u8>,
    /// Tickets handed out (one per record).
    requested: u64,
    /// Every ticket `<= durable` is on the disk.
    durable: u64,
    /// A leader is writing.
    writing: bool,
    /// Leaders' write + sync rounds.
    syncs: u64,
}

struct Shared {
    queue: Mutex<Queue>,
    done: Condvar,
    file: File,
    /// The file offset of the next write (the leader's alone).
    at: Mutex<u64>,
}

/// Runs the loop in a new file at `path`; returns the wall time of the
/// `threads * per` records and the number of syncs.
pub fn leader_follower(path: &Path, threads: usize, per: u64, record: usize) -> (Duration, u64) {
    let mut file = File::options()
        .create_new(true)
        .read(true)
        .write(true)
        .open(path)
        .expect("create file");
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..FILE_BYTES / zeros.len() as u64 {
        file.write_all(&zeros).expect("write");
    }
    file.sync_all().expect("fsync");
    let shared = Arc::new(Shared {
        queue: Mutex::new(Queue::default()),
        done: Condvar::new(),
        file,
        at: Mutex::new(0),
    });
    let barrier = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let shared = shared.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let bytes = vec![t as u8 ^ 0x5a; record];
                barrier.wait();
                for _ in 0..per {
                    commit(&shared, &bytes);
                }
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for h in handles {
        h.join().expect("join");
    }
    let took = t.elapsed();
    let syncs = shared.queue.lock().expect("lock").syncs;
    (took, syncs)
}

/// Queues `bytes` and returns once they are durable.
fn commit(shared: &Shared, bytes: &[u8]) {
    let mut q = shared.queue.lock().expect("lock");
    q.pending.extend_from_slice(bytes);
    q.requested += 1;
    let ticket = q.requested;
    while q.durable < ticket {
        if q.writing {
            q = shared.done.wait(q).expect("wait");
            continue;
        }
        q.writing = true;
        let batch = std::mem::take(&mut q.pending);
        let covered = q.requested;
        drop(q);
        write_and_sync(shared, &batch);
        q = shared.queue.lock().expect("lock");
        q.writing = false;
        q.durable = covered;
        q.syncs += 1;
        // Leftover capacity back for the next batch.
        if q.pending.is_empty() {
            let mut batch = batch;
            batch.clear();
            q.pending = batch;
        }
        shared.done.notify_all();
    }
}

fn write_and_sync(shared: &Shared, batch: &[u8]) {
    let mut at = shared.at.lock().expect("lock");
    if *at + batch.len() as u64 > FILE_BYTES {
        *at = 0;
    }
    shared.file.write_all_at(batch, *at).expect("pwrite");
    *at += batch.len() as u64;
    shared.file.sync_data().expect("fdatasync");
}
