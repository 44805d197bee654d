//! Rate limits (`-r`, `--input-rate`): a token bucket fine enough that the wire sees no
//! bursts, changeable while accel runs.
//!
//! Bytes move in quanta of about [`SLICE`] worth at the rate, and each quantum may go only
//! when the stream's own clock says so: after `n` bytes, the next may go `n / rate` seconds
//! later. Credit does not pile up while the other side stalls: the clock never lags more than
//! [`SLICE`] behind now, so after a pause at most one slice's worth goes at once. In any
//! 100 ms window, then, the bytes moved stay within the rate plus a slice and one quantum.
//! (mbuffer sleeps once per block, so the wire sees a block at full speed, then nothing; pv's
//! bucket is 100 ms deep.)

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use crate::stop::Stop;

/// The finest grain of pacing: a quantum is this much worth at the rate, and credit never
/// exceeds it.
const SLICE: Duration = Duration::from_millis(5);

/// The largest quantum: one syscall's worth, whatever the rate.
const MAX_QUANTUM: usize = 1 << 20;

/// How long a pacing sleep lasts at most before looking whether the run is over.
const NAP: Duration = Duration::from_millis(50);

/// The rate limits of a run, in bytes per second (0: none), shared by the threads that move
/// bytes and whoever changes them (the control socket).
#[derive(Debug, Default)]
pub struct Limits {
    /// Writing each output (`-r`).
    pub output: AtomicU64,
    /// Reading the input (`--input-rate`).
    pub input: AtomicU64,
}

impl Limits {
    /// The limits given on the command line.
    pub fn new(output: Option<u64>, input: Option<u64>) -> Limits {
        Limits {
            output: AtomicU64::new(output.unwrap_or(0)),
            input: AtomicU64::new(input.unwrap_or(0)),
        }
    }
}

/// One side's pace: when its next bytes may go.
#[derive(Debug)]
pub struct Pacer<'a> {
    rate: &'a AtomicU64,
    /// The stream's clock: when the bytes moved so far would have moved at the rate.
    due: Option<Instant>,
    /// The rate `due` was kept at; a change starts the clock afresh.
    kept_at: u64,
}

impl<'a> Pacer<'a> {
    /// A pacer for the limit `rate` (which may change at any time).
    pub fn new(rate: &'a AtomicU64) -> Pacer<'a> {
        Pacer { rate, due: None, kept_at: 0 }
    }

    /// The most to move in one go now: a slice's worth at the rate; `None` without a limit.
    pub fn quantum(&self) -> Option<usize> {
        match self.rate.load(Relaxed) {
            0 => None,
            rate => Some(((rate as f64 * SLICE.as_secs_f64()) as usize).clamp(1, MAX_QUANTUM)),
        }
    }

    /// Counts `n` bytes just moved, and waits until the next may go; returns early (leaving
    /// the rest of the wait undone) once the run is over.
    pub fn moved(&mut self, n: usize, stop: &Stop) {
        let rate = self.rate.load(Relaxed);
        if rate == 0 {
            self.due = None;
            return;
        }
        let now = Instant::now();
        let due = match self.due {
            // No credit beyond a slice: a stalled peer cannot save up for a burst.
            Some(due) if self.kept_at == rate => due.max(now - SLICE),
            _ => now,
        };
        let due = due + Duration::from_secs_f64(n as f64 / rate as f64);
        self.due = Some(due);
        self.kept_at = rate;
        while !stop.requested() {
            let now = Instant::now();
            if due <= now || self.rate.load(Relaxed) != rate {
                break;
            }
            std::thread::sleep((due - now).min(NAP));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_are_a_slice_worth() {
        let rate = AtomicU64::new(0);
        let pacer = Pacer::new(&rate);
        assert_eq!(pacer.quantum(), None);
        rate.store(10 << 20, Relaxed);
        assert_eq!(pacer.quantum(), Some(52_428));
        rate.store(10, Relaxed);
        assert_eq!(pacer.quantum(), Some(1));
        rate.store(u64::MAX, Relaxed);
        assert_eq!(pacer.quantum(), Some(MAX_QUANTUM));
    }

    #[test]
    fn bytes_go_no_faster_than_the_rate() {
        // 2 MiB at 20 MiB/s: at least 0.1 s, whatever the machine (a lower bound only).
        let rate = AtomicU64::new(20 << 20);
        let mut pacer = Pacer::new(&rate);
        let stop = Stop::default();
        let started = Instant::now();
        let quantum = pacer.quantum().unwrap();
        for _ in 0..(2 << 20) / quantum {
            pacer.moved(quantum, &stop);
        }
        assert!(started.elapsed() >= Duration::from_millis(95), "{:?}", started.elapsed());
    }

    #[test]
    fn a_stall_banks_no_more_than_a_slice() {
        let rate = AtomicU64::new(1 << 20);
        let mut pacer = Pacer::new(&rate);
        let stop = Stop::default();
        pacer.moved(1, &stop);
        // The other side stalls, as if for a long time: the clock lags far behind now.
        pacer.due = Some(Instant::now() - Duration::from_secs(10));
        let before = Instant::now();
        pacer.moved(1 << 20, &stop);
        // A MiB at 1 MiB/s takes a second, less at most the slice of credit.
        assert!(before.elapsed() >= Duration::from_millis(990) - SLICE, "{:?}", before.elapsed());
    }

    #[test]
    fn a_stopped_run_does_not_wait() {
        let rate = AtomicU64::new(1);
        let mut pacer = Pacer::new(&rate);
        let stop = Stop::default();
        stop.request();
        let before = Instant::now();
        pacer.moved(1 << 20, &stop);
        assert!(before.elapsed() < Duration::from_secs(10));
    }
}
