//! Timing that holds up on a shared, noisy machine: contestants measured in
//! interleaved chunks, and windows of single appends.

use std::time::Duration;

use super::report::{fmt_dur, thousands};

/// A contestant of [`interleave`]: called with `(first_index, count)` for each
/// chunk, it does that much work and returns the time of the work alone (it
/// prepares its inputs before starting its clock).
pub type Contestant<'a> = Box<dyn FnMut(u64, u64) -> Duration + 'a>;

/// Runs `n` units of work of every contestant in chunks of `chunk`, taking
/// turns chunk by chunk (the one that goes first rotates), so that a burst of
/// load from elsewhere on the machine falls on all of them alike. Returns
/// each contestant's summed time.
pub fn interleave(n: u64, chunk: u64, contestants: &mut [Contestant<'_>]) -> Vec<Duration> {
    let mut total = vec![Duration::ZERO; contestants.len()];
    let mut first = 0;
    let mut round = 0;
    while first < n {
        let count = chunk.min(n - first);
        for k in 0..contestants.len() {
            let i = (round + k) % contestants.len();
            total[i] += (contestants[i])(first, count);
        }
        first += count;
        round += 1;
    }
    total
}

/// The appends whose seq falls in `[from, to)`, timed one by one.
#[derive(Default)]
pub struct Window {
    pub from: u64,
    pub to: u64,
    /// The time of each append in the window, in order.
    pub times: Vec<Duration>,
    /// Appends in the window that wrote a snapshot: (seq, duration).
    pub snapshots: Vec<(u64, Duration)>,
    /// Time spent draining the sled insert queue after chunks of appends.
    drained: Duration,
}

impl Window {
    pub fn new(from: u64, width: u64) -> Window {
        Window {
            from,
            to: from + width,
            times: Vec::with_capacity(width as usize),
            snapshots: Vec::new(),
            drained: Duration::ZERO,
        }
    }

    /// Adds the time spent waiting for the journal's sled insert thread to
    /// catch up with this window's appends (counted in the means, not in
    /// the per-append quantiles).
    pub fn add_drain(&mut self, d: Duration) {
        self.drained += d;
    }

    pub fn add(&mut self, seq: u64, d: Duration, snapshot: bool) {
        if (self.from..self.to).contains(&seq) {
            self.times.push(d);
            if snapshot {
                self.snapshots.push((seq, d));
            }
        }
    }

    fn total(&self) -> Duration {
        self.times.iter().sum::<Duration>() + self.drained
    }

    pub fn mean(&self) -> Duration {
        self.total() / self.times.len().max(1) as u32
    }

    pub fn mean_without_snapshots(&self) -> Duration {
        let snap: Duration = self.snapshots.iter().map(|(_, d)| *d).sum();
        (self.total() - snap) / (self.times.len() - self.snapshots.len()).max(1) as u32
    }

    /// The `q` quantile (0..=1) of the appends' times.
    pub fn quantile(&self, q: f64) -> Duration {
        let mut v = self.times.clone();
        v.sort();
        v.get(((v.len().saturating_sub(1)) as f64 * q).round() as usize)
            .copied()
            .unwrap_or_default()
    }

    /// The time of the appends that took over 1 ms, and how many there were.
    pub fn slow(&self) -> (usize, Duration) {
        let slow: Vec<_> = self
            .times
            .iter()
            .filter(|d| **d > Duration::from_millis(1))
            .collect();
        (slow.len(), slow.into_iter().sum())
    }

    pub fn describe(&self) -> String {
        let snaps = if self.snapshots.is_empty() {
            "no snapshot in it".to_owned()
        } else {
            format!(
                "snapshots at seq {}",
                self.snapshots
                    .iter()
                    .map(|(s, d)| format!("{} ({})", thousands(*s), fmt_dur(*d)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let (slow, slow_time) = self.slow();
        format!(
            "seq {}..{}: mean {} (w/o snapshot appends {}), median {}, p99 {}, max {}; {} appends over 1 ms took {} in all; {}",
            thousands(self.from),
            thousands(self.to),
            fmt_dur(self.mean()),
            fmt_dur(self.mean_without_snapshots()),
            fmt_dur(self.quantile(0.5)),
            fmt_dur(self.quantile(0.99)),
            fmt_dur(self.quantile(1.0)),
            slow,
            fmt_dur(slow_time),
            snaps
        )
    }
}
