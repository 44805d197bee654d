//! Counters the data path publishes for whoever watches from the side.
//!
//! The input, output and hash threads only ever do relaxed atomic adds and stores here (and
//! a network output, a few times a second, copies its [`Wire`] counts under a lock that the
//! readers hold only to copy them); the progress display, the final report, JSON output and
//! the stall watchdog read [`Snapshot`]s whenever they like. Nothing that watches can slow or
//! block the data.
//!
//! The backlog's readers (one per output, one per hash) are counted by index, in the order
//! the run gave them; what each is called is the watcher's business.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Live counters of one run.
#[derive(Debug)]
pub struct Meter {
    started: Instant,
    /// Time the process spent stopped (Ctrl-Z), which does not count as running.
    paused_ns: AtomicU64,
    capacity: u64,
    bytes_in: AtomicU64,
    peak_held: AtomicU64,
    /// Bytes by the way they went, indexed by [`Tier`].
    tiers: [AtomicU64; 4],
    /// Bytes held now in memory (and pool pipes), and in the spill file; their peaks.
    held_memory: AtomicU64,
    held_disk: AtomicU64,
    peak_memory: AtomicU64,
    peak_disk: AtomicU64,
    /// A network input over several connections: what its reorder map holds now (frames
    /// that came before their turn), memory beside the buffer's; the most at once.
    held_reorder: AtomicU64,
    peak_reorder: AtomicU64,
    input_held: Wait,
    /// A network input's dropped connections (`--from`).
    input_outages: OutageMeter,
    /// The network input's connections, when its stream came over several.
    input_streams: Mutex<Vec<Stream>>,
    /// A network input's frames as they came off the wire (`--from`): the receiving side's
    /// [`Wire`], a lock as an output's is.
    input_wire: Mutex<Option<Wire>>,
    /// Times the input thread slept in the kernel, told when it ends.
    input_sleeps: AtomicU64,
    readers: Box<[ReaderMeter]>,
}

/// A network peer's dropped connections, and the one under way.
#[derive(Debug, Default)]
struct OutageMeter {
    reconnections: AtomicU64,
    longest_ns: AtomicU64,
    total_ns: AtomicU64,
    resent: AtomicU64,
    /// When the connection dropped, in ns since `started` plus one; 0 while it is up.
    down_since_ns: AtomicU64,
    /// Attempts to connect again in the outage under way.
    tries: AtomicU64,
}

/// A network peer's dropped connections: how many came back, the longest outage, the bytes
/// sent again, and the outage under way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outages {
    /// Connections restored.
    pub reconnections: u64,
    /// The longest time without a connection (of those restored).
    pub longest: Duration,
    /// All the time without a connection (of those restored).
    pub total: Duration,
    /// Bytes sent again after a reconnection (the receiver had not had them).
    pub resent: u64,
    /// The outage under way: the attempts to connect so far, and for how long it has been
    /// down.
    pub down: Option<(u64, Duration)>,
}

/// Which side of the run a network peer is: the input, or output `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// `--from`.
    Input,
    /// The `n`th output, a `--to`.
    Output(usize),
}

/// The counters of one reader of the backlog: an output or a hash.
#[derive(Debug, Default)]
struct ReaderMeter {
    bytes: AtomicU64,
    /// Waiting for data: the buffer held nothing this reader had not taken.
    starved: Wait,
    /// The reader left before the end (its output failed).
    gone: AtomicBool,
    /// Zeros added to fill the last output block (`--pad`).
    padded: AtomicU64,
    /// How its bytes count as delivered ([`Delivery`], as a number).
    delivery: AtomicU8,
    /// [`Delivery::Confirmed`]: bytes the receiver has confirmed its outputs took.
    confirmed: AtomicU64,
    /// [`Delivery::Confirmed`]: the end of the stream was sent; its confirmation is awaited.
    ending_stream: AtomicBool,
    /// A network output's dropped connections.
    outages: OutageMeter,
    /// Times its thread slept in the kernel, told when it ends.
    sleeps: AtomicU64,
    /// A network output's frames on the wire. A lock, not atomics, for a list of levels:
    /// held only to copy a small struct, a few times a second, by either side.
    wire: Mutex<Option<Wire>>,
    /// A network output's connections, when its stream goes over several (`--streams`).
    streams: Mutex<Vec<Stream>>,
}

/// One of the connections of a stream over several (`--streams`): what it carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stream {
    /// Stream bytes it carried (sent, or received; again after a reconnection).
    pub bytes: u64,
    /// Times it connected again after a drop.
    pub reconnections: u64,
    /// Stream bytes it had taken that went again on the others after it dropped.
    pub resent: u64,
    /// Sending, compressing (`--compress`): the level its frames are compressed at now
    /// (each connection adapts on its own); `None`: as they are, or not known (a receiver).
    pub level: Option<i32>,
}

/// A network output's frames on the wire: what compression (`--compress`) made of them; or
/// a network input's, as they came off the wire (its receiving side knows no level: `level`
/// is `None` and `levels` empty; `compressing` says a frame came compressed, and `stored`
/// counts the frames that came as they were).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wire {
    /// Compression was asked for (not `--compress none`).
    pub compressing: bool,
    /// Stream bytes sent in Data frames (again after a reconnection).
    pub stream: u64,
    /// Bytes those frames took on the wire: sealed, with their lengths and trailers.
    pub bytes: u64,
    /// Data frames sent.
    pub frames: u64,
    /// Of those, frames sent as they were, compressing: they would not shrink, or were not
    /// tried.
    pub stored: u64,
    /// The level frames are compressed at now; `None`: as they are.
    pub level: Option<i32>,
    /// The time spent at each level (`None`: frames as they are), lowest first.
    pub levels: Vec<(Option<i32>, Duration)>,
}

impl Wire {
    /// Adds the counts of frames `more` (a receiver's, opened since it last said).
    pub fn add(&mut self, more: &Wire) {
        self.compressing |= more.compressing;
        self.stream += more.stream;
        self.bytes += more.bytes;
        self.frames += more.frames;
        self.stored += more.stored;
    }

    /// The frames of one stream over several connections (`--streams`), `each`
    /// connection's: the counts add up; the level now is the one most connections are at
    /// (the lowest of a tie), and each level's time is averaged over the connections, so
    /// that the times still add up to the run's. `None` when no connection said.
    pub fn over_connections<'a>(each: impl IntoIterator<Item = &'a Wire>) -> Option<Wire> {
        let each: Vec<&Wire> = each.into_iter().collect();
        let mut sum = Wire::default();
        let mut levels: Vec<(Option<i32>, Duration)> = Vec::new();
        let mut now: Vec<(Option<i32>, usize)> = Vec::new();
        for wire in &each {
            sum.add(wire);
            for &(level, time) in &wire.levels {
                match levels.iter_mut().find(|(known, _)| *known == level) {
                    Some((_, total)) => *total += time,
                    None => levels.push((level, time)),
                }
            }
            match now.iter_mut().find(|(known, _)| *known == wire.level) {
                Some((_, count)) => *count += 1,
                None => now.push((wire.level, 1)),
            }
        }
        let connections = u32::try_from(each.len()).ok().filter(|&n| n > 0)?;
        levels.sort();
        sum.levels = levels.into_iter().map(|(level, time)| (level, time / connections)).collect();
        now.sort();
        let most = now.iter().map(|(_, count)| *count).max().unwrap_or(0);
        sum.level = now.iter().find(|(_, count)| *count == most).and_then(|(level, _)| *level);
        Some(sum)
    }

    /// Stream bytes per byte on the wire: above 1, what compression saved.
    pub fn ratio(&self) -> f64 {
        if self.bytes == 0 { 1.0 } else { self.stream as f64 / self.bytes as f64 }
    }
}

/// What an output's bytes written mean: delivered, or only sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Delivery {
    /// Written is delivered: a file, a pipe, a device (and a hash takes what it reads).
    #[default]
    Written,
    /// A network output (`--to`): written is only sent; the receiver confirms what its
    /// outputs took.
    Confirmed,
    /// A network output without confirmations (`--insecure`): written is only sent, and
    /// nobody says what arrived.
    Unconfirmed,
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
    /// Spilled to disk, beyond the memory buffer (`--spill`).
    Disk = 3,
}

/// Bytes by the way they went through accel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tiers {
    /// Spliced straight through while nothing was queued.
    pub through: u64,
    /// Through accel's pool pipes.
    pub pipes: u64,
    /// Through accel's memory.
    pub memory: u64,
    /// Through the spill file.
    pub disk: u64,
}

impl Tiers {
    /// All bytes counted.
    pub fn total(&self) -> u64 {
        self.through
            .saturating_add(self.pipes)
            .saturating_add(self.memory)
            .saturating_add(self.disk)
    }
}

/// `straight through 12 MiB (7%), pool pipes 150 MiB (88%), memory 8.5 MiB (5%)`.
impl fmt::Display for Tiers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.total();
        let share = |n: u64| crate::size::share(n, total);
        let bytes = crate::size::Bytes;
        write!(
            f,
            "straight through {} ({}), pool pipes {} ({}), memory {} ({})",
            bytes(self.through),
            share(self.through),
            bytes(self.pipes),
            share(self.pipes),
            bytes(self.memory),
            share(self.memory)
        )?;
        if self.disk > 0 {
            write!(f, ", spill {} ({})", bytes(self.disk), share(self.disk))?;
        }
        Ok(())
    }
}

/// How often each side's thread woke per MiB it moved: what a wakeup costs the pipeline is a
/// context switch on a CPU the producer and consumer need. Shown by `--debug` at the end.
#[derive(Debug, Clone, PartialEq)]
pub struct Wakeups {
    /// The input thread's, per MiB read.
    pub input: f64,
    /// Each reader's thread's (outputs, then hashes), per MiB it took.
    pub readers: Vec<f64>,
}

impl Wakeups {
    /// The wakeups of an ended run's threads; `None` where the platform does not count them.
    pub fn of(snapshot: &Snapshot) -> Option<Wakeups> {
        if snapshot.input_sleeps == 0 && snapshot.readers.iter().all(|r| r.sleeps == 0) {
            return None;
        }
        let per_mib = |sleeps: u64, bytes: u64| sleeps as f64 / (bytes.max(1) as f64 / MIB);
        Some(Wakeups {
            input: per_mib(snapshot.input_sleeps, snapshot.bytes_in),
            readers: snapshot.readers.iter().map(|r| per_mib(r.sleeps, r.bytes)).collect(),
        })
    }
}

const MIB: f64 = (1 << 20) as f64;

/// `input 14.2, output 3.1 per MiB`; with several readers, `readers 3.1, 3.0`.
impl fmt::Display for Wakeups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "input {:.1}, ", self.input)?;
        let each: Vec<String> = self.readers.iter().map(|n| format!("{n:.1}")).collect();
        match each.as_slice() {
            [one] => write!(f, "output {one}")?,
            _ => write!(f, "readers {}", each.join(", "))?,
        }
        f.write_str(" per MiB")
    }
}

/// Time spent in one kind of wait: finished waits added up, plus the one under way.
#[derive(Debug, Default)]
struct Wait {
    total_ns: AtomicU64,
    /// When the wait under way began, in ns since `started` plus one; 0 when not waiting.
    since_ns: AtomicU64,
}

/// What the counters said at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Time since the run started.
    pub elapsed: Duration,
    /// The buffer size (`-m`).
    pub capacity: u64,
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// Bytes the slowest reader still there has taken: for one output, what it was written.
    pub bytes_out: u64,
    /// The most bytes held at once.
    pub peak_held: u64,
    /// How long input was held back because the buffer was full: the producer was blocked.
    pub producer_blocked: Duration,
    /// How long the slowest reader waited on an empty buffer: the consumer was starved.
    pub consumer_starved: Duration,
    /// Bytes by the way they went.
    pub tiers: Tiers,
    /// Bytes held now in memory (and pool pipes, and a network input's reorder map); the
    /// most at once.
    pub held_memory: u64,
    /// The most held in memory at once (the buffer and a reorder map together).
    pub peak_memory: u64,
    /// Bytes held now in the spill file (`--spill`).
    pub held_disk: u64,
    /// The most held in the spill file at once.
    pub peak_disk: u64,
    /// The most a network input over several connections held in its reorder map at once.
    pub peak_reorder: u64,
    /// Each reader, in the run's order.
    pub readers: Vec<ReaderSnapshot>,
    /// Each reader's frames on the wire, in the same order: a network output's.
    pub wires: Vec<Option<Wire>>,
    /// Each reader's connections, in the same order: a network output's over several
    /// (`--streams`); empty for any other.
    pub streams: Vec<Vec<Stream>>,
    /// The network input's connections, when its stream came over several.
    pub input_streams: Vec<Stream>,
    /// A network input's dropped connections.
    pub input_outages: Outages,
    /// A network input's frames as they came off the wire; `None` for any other input.
    pub input_wire: Option<Wire>,
    /// The rate limits in force (the watcher fills them in; the meter does not know them).
    pub limits: RateLimits,
    /// Lines taken in, where they are counted (accel as `pv -l`; the watcher fills it in).
    pub lines: Option<u64>,
    /// Times the input thread slept in the kernel (waits that blocked and were woken), once
    /// it has ended; 0 where this is not known.
    pub input_sleeps: u64,
}

/// Rate limits in bytes per second; 0 for none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RateLimits {
    /// Writing each output (`-r`).
    pub output: u64,
    /// Reading the input (`--input-rate`).
    pub input: u64,
}

/// One reader's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReaderSnapshot {
    /// Bytes it has taken (written, for an output; hashed, for a hash).
    pub bytes: u64,
    /// How long it waited for data.
    pub starved: Duration,
    /// It left before the end.
    pub gone: bool,
    /// Zeros it added to fill its last block (`--pad`).
    pub padded: u64,
    /// What its bytes written mean.
    pub delivery: Delivery,
    /// [`Delivery::Confirmed`]: bytes the receiver confirmed (at most `bytes`).
    pub confirmed: u64,
    /// [`Delivery::Confirmed`]: the end of the stream was sent, its confirmation awaited.
    pub ending_stream: bool,
    /// A network output's dropped connections.
    pub outages: Outages,
    /// Times its thread slept in the kernel (waits that blocked and were woken), once it has
    /// ended; 0 where this is not known.
    pub sleeps: u64,
}

impl ReaderSnapshot {
    /// Bytes known to have reached their destination: written, or confirmed by the receiver.
    /// Without confirmations (`--insecure`), what was sent: nothing more is known.
    pub fn delivered(&self) -> u64 {
        match self.delivery {
            Delivery::Confirmed => self.confirmed.min(self.bytes),
            Delivery::Written | Delivery::Unconfirmed => self.bytes,
        }
    }

    /// Whether all `total` bytes are known to have reached their destination: never over
    /// plain TCP, where nobody says.
    pub fn delivered_all(&self, total: u64) -> bool {
        self.delivery != Delivery::Unconfirmed && self.delivered() >= total
    }
}

impl Snapshot {
    /// Bytes read but not yet taken by every reader: what the buffer holds.
    pub fn held(&self) -> u64 {
        self.bytes_in.saturating_sub(self.bytes_out)
    }

    /// The reader still there that is furthest behind, and so holds the buffer: the fewest
    /// bytes taken, and of those the one that waited least for data.
    pub fn slowest(&self) -> Option<usize> {
        let live = self.readers.iter().enumerate().filter(|(_, r)| !r.gone);
        live.min_by_key(|(_, r)| (r.bytes, r.starved)).map(|(index, _)| index)
    }
}

// What the two waiting times say: which side of the pipeline held the other up. The verdict
// is the meter's, below the library's report and the watch's words alike, which both name it.

/// The share of the run one side must have spent waiting before it counts as held up.
///
/// A tenth: every run waits a little (for the first bytes, for a scheduler tick, for the buffer
/// to drain at the very end), and a verdict on a few percent of waiting would name a culprit for
/// noise. Above a tenth of the run, the waiting side could have gone at least that much faster,
/// which is worth telling.
const SIGNIFICANT: f64 = 0.10;

/// Runs shorter than this get no verdict: thread start-up and the first reads alone take a good
/// part of it, so the shares of waiting would say more about starting than about the pipeline.
const SHORTEST: Duration = Duration::from_millis(100);

/// Which side of the pipeline held the other up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bottleneck {
    /// The input was the slow side: the output waited on an empty buffer.
    Producer,
    /// The output was the slow side: the input was held back by a full buffer.
    Consumer,
    /// Neither side waited much on the other, or the run was too short to tell.
    None,
}

impl Bottleneck {
    /// The name used in JSON: `producer`, `consumer` or `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Bottleneck::Producer => "producer",
            Bottleneck::Consumer => "consumer",
            Bottleneck::None => "none",
        }
    }
}

/// Names the side that held the other up, if either did.
///
/// The consumer is the bottleneck when the buffer was full (the producer held back) for at
/// least a tenth of the run and for longer than it was empty; the producer, when the buffer was
/// empty (the consumer waiting) for at least a tenth of the run and for longer than it was full.
/// Runs under 0.1 s, and runs in which no byte moved, are [`Bottleneck::None`].
pub fn bottleneck(snapshot: &Snapshot) -> Bottleneck {
    match judge(snapshot) {
        Judgement::Consumer => Bottleneck::Consumer,
        Judgement::Producer => Bottleneck::Producer,
        Judgement::TooShort | Judgement::Idle | Judgement::InTurn | Judgement::Neither => {
            Bottleneck::None
        }
    }
}

/// Why a run got the verdict it got; finer than [`Bottleneck`], for the watch's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    /// The run was too short to tell.
    TooShort,
    /// No byte moved.
    Idle,
    /// The consumer held the producer back.
    Consumer,
    /// The producer kept the consumer waiting.
    Producer,
    /// Both sides waited a significant share, equally long: they took turns.
    InTurn,
    /// Neither side waited a significant share.
    Neither,
}

/// The verdict on `snapshot`, with its reason.
pub fn judge(snapshot: &Snapshot) -> Judgement {
    if snapshot.elapsed < SHORTEST {
        return Judgement::TooShort;
    }
    if snapshot.bytes_in == 0 && snapshot.bytes_out == 0 {
        return Judgement::Idle;
    }
    let significant = snapshot.elapsed.mul_f64(SIGNIFICANT);
    let (full, empty) = (snapshot.producer_blocked, snapshot.consumer_starved);
    if full.max(empty) < significant {
        Judgement::Neither
    } else if full > empty {
        Judgement::Consumer
    } else if empty > full {
        Judgement::Producer
    } else {
        Judgement::InTurn
    }
}

/// When the counters last moved: what the stall watchdogs (the command line's and the
/// library's) have in common; each says in its own words which side is stuck.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Motion {
    /// Bytes in, and bytes taken by all readers together, when they last moved...
    counts: (u64, u64),
    /// ...and when (by the meter's clock).
    at: Duration,
}

impl Motion {
    /// Follows `snapshot`: how long nothing has moved, once that is `timeout` or more. Motion
    /// is a byte read, or taken by a reader; what a receiver confirms moves too (bytes taken
    /// at the far end of a network output).
    pub fn still(&mut self, snapshot: &Snapshot, timeout: Duration) -> Option<Duration> {
        let taken = snapshot
            .readers
            .iter()
            .fold(0u64, |sum, r| sum.wrapping_add(r.bytes).wrapping_add(r.confirmed));
        if (snapshot.bytes_in, taken) != self.counts {
            *self = Motion { counts: (snapshot.bytes_in, taken), at: snapshot.elapsed };
            return None;
        }
        let still = snapshot.elapsed.saturating_sub(self.at);
        (still >= timeout).then_some(still)
    }
}

impl Meter {
    /// Starts the clock for a buffer of `capacity` bytes and `readers` readers.
    pub fn new(capacity: u64, readers: usize) -> Meter {
        Meter {
            started: Instant::now(),
            paused_ns: AtomicU64::new(0),
            capacity,
            bytes_in: AtomicU64::new(0),
            peak_held: AtomicU64::new(0),
            tiers: Default::default(),
            held_memory: AtomicU64::new(0),
            held_disk: AtomicU64::new(0),
            peak_memory: AtomicU64::new(0),
            peak_disk: AtomicU64::new(0),
            held_reorder: AtomicU64::new(0),
            peak_reorder: AtomicU64::new(0),
            input_held: Wait::default(),
            input_outages: OutageMeter::default(),
            input_streams: Mutex::default(),
            input_wire: Mutex::new(None),
            input_sleeps: AtomicU64::new(0),
            readers: (0..readers).map(|_| ReaderMeter::default()).collect(),
        }
    }

    /// Counts `n` bytes taken into the buffer by way of `tier`, with `fill` bytes now held.
    pub fn add_in(&self, n: usize, fill: usize, tier: Tier) {
        self.tiers[tier as usize].fetch_add(n as u64, Relaxed);
        self.bytes_in.fetch_add(n as u64, Relaxed);
        self.peak_held.fetch_max(fill as u64, Relaxed);
    }

    /// Counts `n` bytes spliced straight through to the only reader, in and out at once.
    pub fn add_through(&self, n: usize) {
        self.add_passed_by(n, Tier::Through);
    }

    /// Counts `n` bytes read into memory and written on to the only reader at once, by the
    /// input thread, without queueing them.
    pub fn add_passed(&self, n: usize) {
        self.add_passed_by(n, Tier::Memory);
    }

    fn add_passed_by(&self, n: usize, tier: Tier) {
        self.tiers[tier as usize].fetch_add(n as u64, Relaxed);
        // Out before in would let a snapshot see more out than in; in first.
        self.bytes_in.fetch_add(n as u64, Relaxed);
        self.readers[0].bytes.fetch_add(n as u64, Relaxed);
    }

    /// How many readers the buffer has: outputs, then hashes.
    pub fn readers(&self) -> usize {
        self.readers.len()
    }

    /// Says how much the buffer holds now, in memory and in the spill file.
    pub fn held(&self, memory: u64, disk: u64) {
        // Stored, then the other's loaded, in one order for both (SeqCst): of two threads
        // that change the buffer and the reorder map at once, one sees both, and the peak
        // is of what was held together.
        self.held_memory.store(memory, SeqCst);
        self.held_disk.store(disk, Relaxed);
        self.peak_memory.fetch_max(memory + self.held_reorder.load(SeqCst), Relaxed);
        self.peak_disk.fetch_max(disk, Relaxed);
    }

    /// Says how much a network input over several connections holds in its reorder map
    /// now: memory too, counted with the buffer's.
    pub fn reordered(&self, held: u64) {
        self.held_reorder.store(held, SeqCst);
        self.peak_memory.fetch_max(held + self.held_memory.load(SeqCst), Relaxed);
        self.peak_reorder.fetch_max(held, Relaxed);
    }

    /// Counts `n` bytes taken by reader `reader`.
    pub fn add_out(&self, reader: usize, n: usize) {
        self.readers[reader].bytes.fetch_add(n as u64, Relaxed);
    }

    /// Bytes reader `reader` has taken so far.
    pub fn reader_bytes(&self, reader: usize) -> u64 {
        self.readers[reader].bytes.load(Relaxed)
    }

    /// Counts `n` zeros reader `reader` added to fill its last block.
    pub fn add_padding(&self, reader: usize, n: usize) {
        self.readers[reader].padded.fetch_add(n as u64, Relaxed);
    }

    /// Says what reader `reader`'s bytes written mean (before the run).
    pub fn set_delivery(&self, reader: usize, delivery: Delivery) {
        self.readers[reader].delivery.store(delivery as u8, Relaxed);
    }

    /// Reader `reader`'s receiver has confirmed `count` bytes; `ending`: the end of its
    /// stream was sent and its confirmation is awaited.
    pub fn confirmed(&self, reader: usize, count: u64, ending_stream: bool) {
        self.readers[reader].confirmed.fetch_max(count, Relaxed);
        self.readers[reader].ending_stream.store(ending_stream, Relaxed);
    }

    /// `peer`'s connections so far, when its stream goes over several (`--streams`).
    pub fn streams(&self, peer: Peer, streams: Vec<Stream>) {
        let slot = match peer {
            Peer::Input => &self.input_streams,
            Peer::Output(index) => &self.readers[index].streams,
        };
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = streams;
    }

    /// Reader `reader`'s frames on the wire so far (a network output).
    pub fn wire(&self, reader: usize, wire: Wire) {
        *self.readers[reader].wire.lock().unwrap_or_else(PoisonError::into_inner) = Some(wire);
    }

    /// A network input's frames off the wire so far (`--from`).
    pub fn input_wire(&self, wire: Wire) {
        *self.input_wire.lock().unwrap_or_else(PoisonError::into_inner) = Some(wire);
    }

    /// Marks reader `reader` as gone before the end.
    pub fn reader_gone(&self, reader: usize) {
        self.readers[reader].gone.store(true, Relaxed);
    }

    /// Tells how many times the input thread slept in the kernel, as it ends.
    pub fn input_slept(&self, sleeps: u64) {
        self.input_sleeps.store(sleeps, Relaxed);
    }

    /// Tells how many times reader `reader`'s thread slept in the kernel, as it ends.
    pub fn reader_slept(&self, reader: usize, sleeps: u64) {
        self.readers[reader].sleeps.store(sleeps, Relaxed);
    }

    /// Marks the start (`true`) or end of a wait of the input for room in the buffer.
    pub fn input_held(&self, waiting: bool) {
        self.input_held.mark(self.now_ns(), waiting);
    }

    /// Marks the start (`true`) or end of a time reader `reader` had nothing to take: waiting
    /// for data, or (splicing straight through) the input waiting for it on its behalf.
    pub fn reader_starved(&self, reader: usize, waiting: bool) {
        self.readers[reader].starved.mark(self.now_ns(), waiting);
    }

    /// Whether reader `reader` waits for data now: what is there is less than it takes (a
    /// whole output block, its start watermark), or nothing.
    pub fn reader_waiting(&self, reader: usize) -> bool {
        self.readers[reader].starved.under_way()
    }

    /// Whether the input is held now: the buffer is full, or memory was refused.
    pub fn input_waiting(&self) -> bool {
        self.input_held.under_way()
    }

    /// Reads all counters.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.now_ns();
        // Readers before input, so that a snapshot never shows more out than in.
        let readers: Vec<ReaderSnapshot> = self
            .readers
            .iter()
            .map(|r| ReaderSnapshot {
                bytes: r.bytes.load(Relaxed),
                starved: r.starved.read(now),
                gone: r.gone.load(Relaxed),
                padded: r.padded.load(Relaxed),
                delivery: match r.delivery.load(Relaxed) {
                    1 => Delivery::Confirmed,
                    2 => Delivery::Unconfirmed,
                    _ => Delivery::Written,
                },
                confirmed: r.confirmed.load(Relaxed),
                ending_stream: r.ending_stream.load(Relaxed),
                outages: r.outages.read(now),
                sleeps: r.sleeps.load(Relaxed),
            })
            .collect();
        let wires = self
            .readers
            .iter()
            .map(|r| r.wire.lock().unwrap_or_else(PoisonError::into_inner).clone())
            .collect();
        let read = |streams: &Mutex<Vec<Stream>>| {
            streams.lock().unwrap_or_else(PoisonError::into_inner).clone()
        };
        let streams = self.readers.iter().map(|r| read(&r.streams)).collect();
        let input_streams = read(&self.input_streams);
        let [through, pipes, memory, disk] = self.tiers.each_ref().map(|t| t.load(Relaxed));
        let mut snapshot = Snapshot {
            elapsed: Duration::from_nanos(now),
            capacity: self.capacity,
            bytes_in: self.bytes_in.load(Relaxed),
            bytes_out: 0,
            peak_held: self.peak_held.load(Relaxed),
            producer_blocked: self.input_held.read(now),
            consumer_starved: Duration::ZERO,
            tiers: Tiers { through, pipes, memory, disk },
            held_memory: self.held_memory.load(Relaxed) + self.held_reorder.load(Relaxed),
            peak_memory: self.peak_memory.load(Relaxed),
            held_disk: self.held_disk.load(Relaxed),
            peak_disk: self.peak_disk.load(Relaxed),
            peak_reorder: self.peak_reorder.load(Relaxed),
            readers,
            wires,
            streams,
            input_streams,
            input_outages: self.input_outages.read(now),
            input_wire: self.input_wire.lock().unwrap_or_else(PoisonError::into_inner).clone(),
            limits: RateLimits::default(),
            lines: None,
            input_sleeps: self.input_sleeps.load(Relaxed),
        };
        // The reader still there furthest behind; once none is (the run ended on a failed or
        // stopped output), the one furthest behind of all, so that what was delivered is not
        // shown as nothing.
        let behind = snapshot.slowest().or_else(|| {
            let all = snapshot.readers.iter().enumerate();
            all.min_by_key(|(_, r)| r.bytes).map(|(index, _)| index)
        });
        if let Some(behind) = behind {
            snapshot.bytes_out = snapshot.readers[behind].bytes;
            snapshot.consumer_starved = snapshot.readers[behind].starved;
        }
        snapshot.bytes_in = snapshot.bytes_in.max(snapshot.bytes_out);
        snapshot
    }

    fn outages(&self, peer: Peer) -> &OutageMeter {
        match peer {
            Peer::Input => &self.input_outages,
            Peer::Output(index) => &self.readers[index].outages,
        }
    }

    /// `peer`'s connection dropped (if it was up).
    pub fn connection_down(&self, peer: Peer) {
        let outages = self.outages(peer);
        let _ = outages.down_since_ns.compare_exchange(0, self.now_ns() + 1, Relaxed, Relaxed);
        outages.tries.store(0, Relaxed);
    }

    /// `peer` tries to connect again, for the `tries`th time in this outage.
    pub fn reconnecting(&self, peer: Peer, tries: u64) {
        self.outages(peer).tries.store(tries, Relaxed);
    }

    /// `peer`'s connection is back; `resent` bytes go again.
    pub fn reconnected(&self, peer: Peer, resent: u64) {
        let outages = self.outages(peer);
        let since = outages.down_since_ns.swap(0, Relaxed);
        let lasted = self.now_ns().saturating_sub(since.saturating_sub(1));
        outages.longest_ns.fetch_max(lasted, Relaxed);
        outages.total_ns.fetch_add(lasted, Relaxed);
        outages.reconnections.fetch_add(1, Relaxed);
        outages.resent.fetch_add(resent, Relaxed);
    }

    /// Takes `stopped` out of the clock: the job was stopped for that long (Ctrl-Z).
    pub fn pause(&self, stopped: Duration) {
        self.paused_ns.fetch_add(stopped.as_nanos() as u64, Relaxed);
    }

    fn now_ns(&self) -> u64 {
        (self.started.elapsed().as_nanos() as u64).saturating_sub(self.paused_ns.load(Relaxed))
    }
}

impl OutageMeter {
    fn read(&self, now: u64) -> Outages {
        let since = self.down_since_ns.load(Relaxed);
        Outages {
            reconnections: self.reconnections.load(Relaxed),
            longest: Duration::from_nanos(self.longest_ns.load(Relaxed)),
            total: Duration::from_nanos(self.total_ns.load(Relaxed)),
            resent: self.resent.load(Relaxed),
            down: (since > 0).then(|| {
                let lasted = Duration::from_nanos(now.saturating_sub(since - 1));
                (self.tries.load(Relaxed), lasted)
            }),
        }
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

    fn under_way(&self) -> bool {
        self.since_ns.load(Relaxed) != 0
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

    /// Motion is a byte read or taken (or confirmed); stillness is counted from the last.
    #[test]
    fn motion_says_how_long_nothing_moved_once_it_is_long_enough() {
        let at = |secs: u64, bytes_in: u64, taken: u64, confirmed: u64| Snapshot {
            elapsed: Duration::from_secs(secs),
            bytes_in,
            readers: vec![ReaderSnapshot { bytes: taken, confirmed, ..Default::default() }],
            ..Default::default()
        };
        let timeout = Duration::from_secs(5);
        let mut motion = Motion::default();
        assert_eq!(motion.still(&at(1, 10, 0, 0), timeout), None, "read: moved");
        assert_eq!(motion.still(&at(5, 10, 0, 0), timeout), None, "still for 4 s");
        assert_eq!(motion.still(&at(6, 10, 0, 0), timeout), Some(Duration::from_secs(5)));
        assert_eq!(motion.still(&at(7, 10, 4, 0), timeout), None, "taken: moved");
        assert_eq!(motion.still(&at(12, 10, 4, 0), timeout), Some(timeout));
        assert_eq!(motion.still(&at(13, 10, 4, 2), timeout), None, "confirmed: moved");
        assert_eq!(motion.still(&at(17, 10, 4, 2), timeout), None);
    }

    #[test]
    fn counts_bytes_and_peak() {
        let meter = Meter::new(100, 1);
        meter.add_in(30, 30, Tier::Memory);
        meter.add_in(50, 80, Tier::Pipe);
        meter.add_out(0, 60);
        meter.add_in(10, 30, Tier::Memory);
        meter.add_through(5);
        let s = meter.snapshot();
        assert_eq!((s.bytes_in, s.bytes_out, s.held(), s.peak_held), (95, 65, 30, 80));
        assert_eq!(s.tiers, Tiers { through: 5, pipes: 50, memory: 40, disk: 0 });
    }

    #[test]
    fn the_slowest_reader_still_there_sets_the_output_side() {
        let meter = Meter::new(100, 3);
        meter.add_in(90, 90, Tier::Memory);
        meter.add_out(0, 90);
        meter.add_out(1, 10);
        meter.add_out(2, 40);
        let s = meter.snapshot();
        assert_eq!((s.slowest(), s.bytes_out, s.held()), (Some(1), 10, 80));
        // Once it is gone, the next slowest holds the buffer.
        meter.reader_gone(1);
        let s = meter.snapshot();
        assert_eq!((s.slowest(), s.bytes_out, s.held()), (Some(2), 40, 50));
        // Once none is left, what the one furthest behind of all got is what was delivered.
        meter.reader_gone(0);
        meter.reader_gone(2);
        let s = meter.snapshot();
        assert_eq!((s.slowest(), s.bytes_out), (None, 10));
    }

    #[test]
    fn wakeups_are_per_mib_each_side_moved() {
        let meter = Meter::new(1 << 30, 1);
        assert_eq!(Wakeups::of(&meter.snapshot()), None, "not told: not shown");
        meter.add_in(4 << 20, 0, Tier::Memory);
        meter.add_out(0, 4 << 20);
        meter.input_slept(10);
        meter.reader_slept(0, 2);
        let wakeups = Wakeups::of(&meter.snapshot()).unwrap();
        assert_eq!(wakeups.to_string(), "input 2.5, output 0.5 per MiB");
        let two = Meter::new(1 << 30, 2);
        two.add_in(1 << 20, 0, Tier::Memory);
        for (reader, sleeps) in [(0, 3), (1, 4)] {
            two.add_out(reader, 1 << 20);
            two.reader_slept(reader, sleeps);
        }
        let wakeups = Wakeups::of(&two.snapshot()).unwrap();
        assert_eq!(wakeups.to_string(), "input 0.0, readers 3.0, 4.0 per MiB");
    }

    #[test]
    fn tiers_say_bytes_and_shares() {
        let tiers = Tiers { through: 0, pipes: 3 << 20, memory: 1 << 20, disk: 0 };
        assert_eq!(
            tiers.to_string(),
            "straight through 0 B (0%), pool pipes 3 MiB (75%), memory 1 MiB (25%)"
        );
    }

    #[test]
    fn waits_add_up_and_include_the_one_under_way() {
        let meter = Meter::new(1, 1);
        meter.input_held.mark(1_000, true);
        meter.input_held.mark(3_000, false);
        assert_eq!(meter.input_held.read(10_000), Duration::from_nanos(2_000));
        meter.input_held.mark(20_000, true);
        assert_eq!(meter.input_held.read(25_000), Duration::from_nanos(7_000));
        // Ending a wait that never started changes nothing; starting one twice keeps its start.
        let starved = &meter.readers[0].starved;
        starved.mark(5_000, false);
        assert_eq!(starved.read(9_000), Duration::ZERO);
        starved.mark(10_000, true);
        starved.mark(12_000, true);
        assert_eq!(starved.read(15_000), Duration::from_nanos(5_000));
    }

    /// Issue 36: the frames of four connections, each compressing at its own level: the
    /// counts add up, the level now is the one most are at, and the times per level are
    /// the connections' average (they add up to the run's 10 s, not 40).
    #[test]
    fn a_stream_over_several_connections_says_the_level_most_are_at() {
        let second = Duration::from_secs(1);
        let wire = |level, levels: &[(Option<i32>, u32)]| Wire {
            compressing: true,
            stream: 100,
            bytes: 50,
            frames: 2,
            stored: 1,
            level,
            levels: levels.iter().map(|&(level, s)| (level, second * s)).collect(),
        };
        let each = [
            wire(Some(3), &[(Some(3), 10)]),
            wire(Some(1), &[(Some(1), 6), (Some(3), 4)]),
            wire(Some(3), &[(Some(3), 10)]),
            wire(None, &[(None, 2), (Some(3), 8)]),
        ];
        let sum = Wire::over_connections(&each).unwrap();
        assert_eq!((sum.stream, sum.bytes, sum.frames, sum.stored), (400, 200, 8, 4));
        assert_eq!(sum.level, Some(3), "two of four are at 3");
        let levels = [(None, second / 2), (Some(1), second * 3 / 2), (Some(3), second * 8)];
        assert_eq!(sum.levels, levels);
        let tie = [wire(Some(3), &[]), wire(Some(1), &[])];
        assert_eq!(Wire::over_connections(&tie).unwrap().level, Some(1), "the lowest of a tie");
        assert_eq!(Wire::over_connections(&[]), None);
    }
}
