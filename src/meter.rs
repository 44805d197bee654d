//! Counters the data path publishes for whoever watches from the side.
//!
//! The input and output threads only ever do relaxed atomic adds and stores here; the progress
//! display, the final report, JSON output and the stall watchdog read [`Snapshot`]s whenever they
//! like. Nothing that watches can slow or block the data.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Live counters of one run.
#[derive(Debug)]
pub struct Meter {
    started: Instant,
    /// Time the process spent stopped (Ctrl-Z), which does not count as running.
    paused_ns: AtomicU64,
    capacity: u64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    peak_fill: AtomicU64,
    /// Bytes by the way they went, indexed by [`Tier`].
    tiers: [AtomicU64; 3],
    input_held: Wait,
    output_starved: Wait,
}

/// The ways a byte can pass through accel, cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Spliced from stdin straight to stdout while nothing was queued (Linux).
    Through = 0,
    /// Queued in one of accel's pipes, spliced in and out without a copy (Linux).
    Pipe = 1,
    /// Copied into accel's memory and out again.
    Memory = 2,
}

/// Time spent in one kind of wait: finished waits added up, plus the one under way.
#[derive(Debug, Default)]
struct Wait {
    total_ns: AtomicU64,
    /// When the wait under way began, in ns since `started` plus one; 0 when not waiting.
    since_ns: AtomicU64,
}

/// What the counters said at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// Time since the run started.
    pub elapsed: Duration,
    /// The buffer size (`-m`).
    pub capacity: u64,
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// Bytes written to the output.
    pub bytes_out: u64,
    /// The most bytes held at once.
    pub peak_fill: u64,
    /// How long input was held back because the buffer was full: the producer was blocked.
    pub producer_blocked: Duration,
    /// How long output waited on an empty buffer: the consumer was starved.
    pub consumer_starved: Duration,
    /// Bytes by the way they went, indexed by [`Tier`].
    pub tiers: [u64; 3],
}

impl Snapshot {
    /// Bytes read but not yet written: what the buffer holds.
    pub fn fill(&self) -> u64 {
        self.bytes_in.saturating_sub(self.bytes_out)
    }
}

impl Meter {
    /// Starts the clock for a buffer of `capacity` bytes.
    pub fn new(capacity: u64) -> Meter {
        Meter {
            started: Instant::now(),
            paused_ns: AtomicU64::new(0),
            capacity,
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            peak_fill: AtomicU64::new(0),
            tiers: Default::default(),
            input_held: Wait::default(),
            output_starved: Wait::default(),
        }
    }

    /// Counts `n` bytes taken into the buffer by way of `tier`, with `fill` bytes now held.
    pub fn add_in(&self, n: usize, fill: usize, tier: Tier) {
        self.tiers[tier as usize].fetch_add(n as u64, Relaxed);
        self.bytes_in.fetch_add(n as u64, Relaxed);
        self.peak_fill.fetch_max(fill as u64, Relaxed);
    }

    /// Counts `n` bytes passed straight through, in and out at once.
    pub fn add_through(&self, n: usize) {
        self.tiers[Tier::Through as usize].fetch_add(n as u64, Relaxed);
        // Out before in would let a snapshot see more out than in; in first.
        self.bytes_in.fetch_add(n as u64, Relaxed);
        self.bytes_out.fetch_add(n as u64, Relaxed);
    }

    /// Counts `n` bytes passed on.
    pub fn add_out(&self, n: usize) {
        self.bytes_out.fetch_add(n as u64, Relaxed);
    }

    /// Marks the start (`true`) or end of a wait of the input for room in the buffer.
    pub fn input_held(&self, waiting: bool) {
        self.input_held.mark(self.now_ns(), waiting);
    }

    /// Marks the start (`true`) or end of a time the consumer had nothing to read from accel:
    /// the output waiting for data, or (splicing straight through) the input waiting for it.
    pub fn output_starved(&self, waiting: bool) {
        self.output_starved.mark(self.now_ns(), waiting);
    }

    /// Reads all counters.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.now_ns();
        // Read out before in, so that a snapshot never shows more out than in.
        let bytes_out = self.bytes_out.load(Relaxed);
        Snapshot {
            elapsed: Duration::from_nanos(now),
            capacity: self.capacity,
            bytes_in: self.bytes_in.load(Relaxed).max(bytes_out),
            bytes_out,
            peak_fill: self.peak_fill.load(Relaxed),
            producer_blocked: self.input_held.read(now),
            consumer_starved: self.output_starved.read(now),
            tiers: self.tiers.each_ref().map(|t| t.load(Relaxed)),
        }
    }

    /// Takes `stopped` out of the clock: the job was stopped for that long (SIGTSTP).
    pub fn pause(&self, stopped: Duration) {
        self.paused_ns.fetch_add(stopped.as_nanos() as u64, Relaxed);
    }

    fn now_ns(&self) -> u64 {
        (self.started.elapsed().as_nanos() as u64).saturating_sub(self.paused_ns.load(Relaxed))
    }
}

impl Wait {
    /// Starts (`true`) or ends a wait. Starting a wait already under way keeps its start, and
    /// ending none does nothing, so two threads may mark the same wait (see the splice engine).
    fn mark(&self, now: u64, waiting: bool) {
        if waiting {
            let _ = self.since_ns.compare_exchange(0, now + 1, Relaxed, Relaxed);
        } else {
            let since = self.since_ns.swap(0, Relaxed);
            if since != 0 {
                self.total_ns.fetch_add(now.saturating_sub(since - 1), Relaxed);
            }
        }
    }

    fn read(&self, now: u64) -> Duration {
        let since = self.since_ns.load(Relaxed);
        let ongoing = if since == 0 { 0 } else { now.saturating_sub(since - 1) };
        Duration::from_nanos(self.total_ns.load(Relaxed) + ongoing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_bytes_and_peak() {
        let meter = Meter::new(100);
        meter.add_in(30, 30, Tier::Memory);
        meter.add_in(50, 80, Tier::Pipe);
        meter.add_out(60);
        meter.add_in(10, 30, Tier::Memory);
        meter.add_through(5);
        let s = meter.snapshot();
        assert_eq!((s.bytes_in, s.bytes_out, s.fill(), s.peak_fill), (95, 65, 30, 80));
        assert_eq!(s.tiers, [5, 50, 40]);
    }

    #[test]
    fn waits_add_up_and_include_the_one_under_way() {
        let meter = Meter::new(1);
        meter.input_held.mark(1_000, true);
        meter.input_held.mark(3_000, false);
        assert_eq!(meter.input_held.read(10_000), Duration::from_nanos(2_000));
        meter.input_held.mark(20_000, true);
        assert_eq!(meter.input_held.read(25_000), Duration::from_nanos(7_000));
        // Ending a wait that never started changes nothing; starting one twice keeps its start.
        meter.output_starved.mark(5_000, false);
        assert_eq!(meter.output_starved.read(9_000), Duration::ZERO);
        meter.output_starved.mark(10_000, true);
        meter.output_starved.mark(12_000, true);
        assert_eq!(meter.output_starved.read(15_000), Duration::from_nanos(5_000));
    }
}
