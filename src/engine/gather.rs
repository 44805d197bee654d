//! Letting input gather in its pipe while no consumer needs it yet, so that the input thread
//! wakes once per many of the producer's writes rather than for each.
//!
//! `bzip2 -dc` writes 4 KiB at a time: woken for each write, accel made some 75,000 context
//! switches on the seed's 300 MB, each taken from a CPU the stages need. Yet while every
//! consumer has bytes ahead of it, in accel's backlog or already in its own pipe, bytes that
//! wait a few milliseconds longer in the input's pipe reach it no later. So after a small
//! move the input thread may pause before its next one ([`Gather::after`]), for the shortest of:
//!
//! - **The time a quarter of the input's pipe takes to fill at twice the producer's rate**,
//!   so that the producer finds the pipe full (and blocks) only if it suddenly writes eight
//!   times as fast. A pipe counts pieces, not bytes (each holds up to a page, and spliced
//!   pieces are never merged), so the quarter is counted in the producer's pieces as seen by
//!   reads that did not pause: 100-byte lines gather a quarter of the pipe's slots.
//! - **Half the time each consumer takes to eat what it has ahead** at the rate it eats:
//!   the bytes accel holds for it, and, where its output is a pipe, the bytes in that pipe
//!   (`FIONREAD`). A consumer with little ahead ([`RUNWAY_LEAST`]: a line's reader, about to
//!   wait again) means no pause.
//! - [`MOST`]; and a pause shorter than [`LEAST`] is not worth its wakeup (`dd bs=1M` and
//!   any fast producer never pause, nor pay for a look).
//!
//! A pause ends early when the run ends, and, where a consumer's output is not a pipe (its
//! only runway is the backlog), when its reader runs out ([`Producer::pause`]). Rates are
//! measured from the moves themselves and the meter's counts (no system call but one
//! `FIONREAD` per output pipe per look), taken at once when they rise and let down slowly.
//! Only an input pipe whose size the kernel tells (Linux) pauses, and only without an input
//! rate limit; hashes never wait on a consumer, so they are not counted.
//!
//! An output into a pipe has its own pauses ([`Drain`]): once a write has had to wait for the
//! consumer (it is the slower side), a write into its pipe returns only when all it was given
//! is in, waking each time the consumer reads a piece (32 KiB for `gzip`). Instead, while the
//! pipe is at least half full, the output thread sleeps for a third of the time the consumer
//! takes to eat what the pipe holds (at most [`DRAIN_MOST`]), then offers no more than the space
//! the pipe has, which goes in at once: one wakeup per refill instead of one per read. The
//! consumer finds the pipe empty only if it suddenly eats three times as fast; one that ate
//! nothing during a pause is waited for in the write again, which the kernel ends when it
//! reads.

use std::time::{Duration, Instant};

use crate::backlog::Producer;
use crate::endpoint::{Endpoint, FdKind};
use crate::sys;

/// The longest pause: at the seed's 25 MB/s, some 200 KB gather.
const MOST: Duration = Duration::from_millis(8);

/// A pause shorter than this saves less than it costs.
const LEAST: Duration = Duration::from_micros(500);

/// A consumer with less than this ahead of it is about to wait (a line just written into
/// its pipe is not yet read): no pause. Twice what `gzip` reads at a time.
const RUNWAY_LEAST: u64 = 64 << 10;

/// The longest an output sleeps while its consumer drains the pipe.
const DRAIN_MOST: Duration = Duration::from_millis(16);

/// A write that took this long waited for the consumer: its pipe was full.
const BLOCKED: Duration = Duration::from_micros(200);

/// A rate measured over windows no shorter than this: a consumer reading 32 KiB at a time
/// looks ten times as fast over 100 us as it is.
const WINDOW: Duration = Duration::from_millis(1);

/// The input side's pauses (see the module).
#[derive(Debug)]
pub struct Gather {
    input: Producing,
    consumers: Vec<Consumer>,
}

/// The consumer behind one output, as the input side sees it.
#[derive(Debug)]
struct Consumer {
    /// Its reader's index in the backlog.
    reader: usize,
    /// Its output, when a pipe: the bytes in it are the consumer's runway too.
    pipe: Option<Endpoint>,
    /// At the start of the measuring window: when, bytes written to the output, and bytes
    /// queued in its pipe.
    window: Option<(Instant, u64, u64)>,
    /// Bytes per second it takes, as last measured; `None` before a measure.
    rate: Option<f64>,
    /// At the last look at its pipe: bytes written to the output, and bytes queued in the
    /// pipe. The pipe holds no more than that plus what was written since, so a consumer
    /// that had its pipe nearly empty is not asked again until that could have changed (a
    /// line's reader is asked once per 64 KiB, not once per line).
    seen: Option<(u64, u64)>,
}

/// The producer, as the input side sees it.
#[derive(Debug)]
struct Producing {
    /// Bytes the input's pipe holds when its every slot is full.
    pipe_bytes: usize,
    /// Slots in the input's pipe.
    slots: usize,
    /// Bytes per second the producer writes, as last measured; `None` before a measure.
    rate: Option<f64>,
    /// The producer's pieces, as reads that did not pause return them.
    piece: usize,
    /// The end of the last move.
    last: Option<Instant>,
    /// The start of the measuring window, and the bytes moved in it.
    window: Option<(Instant, usize)>,
    /// A pause came before the next move.
    paused: bool,
}

impl Gather {
    /// Pauses for `input` before `outputs` (reader 0, 1, ...), where the input is a pipe whose
    /// size the kernel tells.
    pub fn new(input: &Endpoint, outputs: &[Endpoint]) -> Option<Gather> {
        let consumers = outputs.iter().enumerate().map(|(reader, output)| Consumer {
            reader,
            pipe: (output.kind == FdKind::Pipe).then(|| output.clone()),
            window: None,
            rate: None,
            seen: None,
        });
        Some(Gather { input: Producing::of(input)?, consumers: consumers.collect() })
    }

    /// After a move of `moved` bytes from the input, pauses before the next one while that
    /// delays no consumer and saves wakeups.
    pub fn after(&mut self, moved: usize, producer: &mut Producer) {
        let now = Instant::now();
        let Some(mut pause) = self.input.plan(moved, now) else { return };
        for consumer in &mut self.consumers {
            match consumer.allows(producer, now) {
                Some(most) => pause = pause.min(most),
                None => return,
            }
        }
        if pause >= LEAST {
            let pipes_only = self.consumers.iter().all(|consumer| consumer.pipe.is_some());
            self.input.paused = producer.pause(pause, !pipes_only);
        }
    }

    /// Whether a relay ([`Bypass::relay`](super::bypass::Bypass::relay)), which passes
    /// each read straight on while nothing is queued, may go on without asking this for a
    /// pause: every consumer is known to have less than a runway ahead (it would allow none).
    pub fn consumers_short(&self, producer: &Producer) -> bool {
        // A relay runs with nothing queued.
        self.consumers.iter().all(|consumer| consumer.surely_short(0, producer))
    }

    /// Counts `moved` bytes that a relay passed on in one of many short reads, none of which
    /// could have paused: in the producer's rate, without a clock read per read.
    pub fn relayed(&mut self, moved: usize) {
        if let Some((_, bytes)) = &mut self.input.window {
            *bytes += moved;
        }
    }
}

impl Consumer {
    /// Whether this consumer surely has less than a runway ahead, without a look at its pipe:
    /// it holds no more than it held at the last look plus what was written since, and
    /// `in_backlog` waits for it in accel.
    fn surely_short(&self, in_backlog: usize, producer: &Producer) -> bool {
        let written = producer.meter().reader_bytes(self.reader);
        match (&self.pipe, self.seen) {
            (Some(_), Some((was_written, was_queued))) => {
                in_backlog as u64 + was_queued + (written - was_written) < RUNWAY_LEAST
            }
            _ => false,
        }
    }

    /// The longest pause this consumer allows now: half the time it takes to eat what it has
    /// ahead; `None` when it has little ahead or its rate is not known yet. One whose output
    /// is gone (it failed, under `--output-error`) allows any.
    fn allows(&mut self, producer: &Producer, now: Instant) -> Option<Duration> {
        let Some(in_backlog) = producer.ahead(self.reader) else { return Some(MOST) };
        if self.surely_short(in_backlog, producer) {
            return None;
        }
        let written = producer.meter().reader_bytes(self.reader);
        let queued = match &self.pipe {
            Some(pipe) => pipe.queued()?,
            None => 0,
        };
        self.seen = Some((written, queued));
        match self.window {
            Some((start, was_written, was_queued)) if now - start >= WINDOW => {
                let eaten = (written - was_written) as f64 - (queued as f64 - was_queued as f64);
                let measured = eaten.max(0.0) / (now - start).as_secs_f64();
                self.rate = Some(rise_at_once(self.rate, measured));
                self.window = Some((now, written, queued));
            }
            Some(_) => {}
            None => self.window = Some((now, written, queued)),
        }
        let ahead = in_backlog as u64 + queued;
        let rate = self.rate?;
        if ahead < RUNWAY_LEAST {
            // A consumer that waited for it takes this at once, and then waits again.
            return None;
        }
        if rate <= 0.0 {
            return Some(MOST);
        }
        Some(Duration::from_secs_f64((ahead as f64 / (2.0 * rate)).min(MOST.as_secs_f64())))
    }
}

/// A rate that follows `measured` at once when it rises and a quarter of the way when it
/// falls.
fn rise_at_once(rate: Option<f64>, measured: f64) -> f64 {
    match rate {
        Some(rate) if measured < rate => 0.75 * rate + 0.25 * measured,
        _ => measured,
    }
}

impl Producing {
    fn of(input: &Endpoint) -> Option<Producing> {
        if input.kind != FdKind::Pipe {
            return None;
        }
        let pipe_bytes = sys::pipe_size(input.fd())?;
        let page = rustix::param::page_size();
        Some(Producing {
            pipe_bytes,
            slots: (pipe_bytes / page).max(1),
            rate: None,
            piece: page,
            last: None,
            window: None,
            paused: false,
        })
    }

    /// Learns from a move of `moved` bytes ended at `now`; the pause the producer allows, if
    /// any.
    fn plan(&mut self, moved: usize, now: Instant) -> Option<Duration> {
        if moved == 0 {
            return None;
        }
        let since = self.last.replace(now).map(|last| now - last);
        let paused = std::mem::take(&mut self.paused);
        if !paused {
            // Mostly one write of the producer's: what a slot of the pipe may hold.
            self.piece = (self.piece * 3 + moved) / 4;
        }
        let quarter = (self.pipe_bytes / 4).min(self.slots / 4 * self.piece.max(1));
        if moved >= quarter {
            // The pipe had filled a lot: a fast producer, or one that waited while accel did.
            // It wrote at least this fast (whatever came before is no measure), and a wakeup
            // per quarter of a pipe is cheap.
            if let Some(since) = since.filter(|since| !since.is_zero()) {
                let floor = moved as f64 / since.as_secs_f64();
                self.rate = Some(self.rate.map_or(floor, |rate| rate.max(floor)));
            }
            self.window = Some((now, 0));
            return None;
        }
        // Small moves tell the rate over a window: over a few microseconds, a burst of
        // buffered writes looks a hundred times as fast as the producer is.
        let (start, bytes) = self.window.get_or_insert((since.map_or(now, |since| now - since), 0));
        *bytes += moved;
        if now - *start >= WINDOW {
            let measured = *bytes as f64 / (now - *start).as_secs_f64();
            self.rate = Some(rise_at_once(self.rate, measured));
            self.window = Some((now, 0));
        }
        let rate = self.rate?;
        let pause = (quarter as f64 / (2.0 * rate)).min(MOST.as_secs_f64());
        Some(Duration::from_secs_f64(pause)).filter(|pause| *pause >= LEAST)
    }
}

/// An output pipe's pauses (see the module).
#[derive(Debug)]
pub struct Drain {
    /// Bytes the pipe holds when its every slot is full.
    size: usize,
    /// Bytes per second the consumer eats, as last measured; `None` before a measure.
    rate: Option<f64>,
    /// A write waited for the consumer lately: look at the pipe before each write.
    watching: bool,
}

impl Drain {
    /// Pauses for `output`, where it is a pipe whose size the kernel tells.
    pub fn new(output: &Endpoint) -> Option<Drain> {
        if output.kind != FdKind::Pipe {
            return None;
        }
        Some(Drain { size: sys::pipe_size(output.fd())?, rate: None, watching: false })
    }

    /// Before a write: while the consumer is the slower side and its pipe is well filled,
    /// sleeps while it drains; then the most the write should offer (the space in the pipe),
    /// if it slept.
    pub fn before(&mut self, output: &Endpoint) -> Option<usize> {
        if !self.watching {
            return None;
        }
        let queued = output.queued()? as usize;
        if queued < self.size / 2 {
            // The consumer keeps up: no more looks until a write waits again.
            self.watching = false;
            return None;
        }
        let rate = self.rate?;
        let pause = Duration::from_secs_f64(queued as f64 / (3.0 * rate));
        let pause = pause.min(DRAIN_MOST);
        if pause < LEAST {
            return None;
        }
        let start = Instant::now();
        output.stop().sleep(pause).ok()?;
        let slept = start.elapsed();
        let left = output.queued()? as usize;
        let eaten = queued.saturating_sub(left);
        if eaten == 0 {
            // It ate nothing: wait for it in the write, which the kernel ends when it reads.
            (self.rate, self.watching) = (None, false);
            return None;
        }
        // Run dry: it may eat faster than this.
        let floor = if left == 0 { 2.0 } else { 1.0 };
        self.rate = Some(rise_at_once(self.rate, floor * eaten as f64 / slept.as_secs_f64()));
        Some((self.size - left.min(self.size)).max(rustix::param::page_size()))
    }

    /// After a write of `n` bytes that took `took`: one that waited measured the consumer,
    /// and, when it is slow enough that a pause could pay, has the next writes look first.
    pub fn after(&mut self, n: usize, took: Duration) {
        if took >= BLOCKED && n > 0 {
            let rate = rise_at_once(self.rate, n as f64 / took.as_secs_f64());
            self.rate = Some(rate);
            // `cat` drains a pipe in a fraction of a millisecond: never worth a look.
            self.watching = self.size as f64 / (3.0 * rate) >= LEAST.as_secs_f64();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A producer writing into a 1 MiB pipe of 256 slots, read by a [`Gather`] that pauses
    /// as told.
    struct Model {
        gather: Producing,
        now: Instant,
        /// The pause asked for by the last move, waited out before the next.
        pending: Option<Duration>,
    }

    fn model() -> Model {
        let gather = Producing {
            pipe_bytes: 1 << 20,
            slots: 256,
            rate: None,
            piece: 4096,
            last: None,
            window: None,
            paused: false,
        };
        Model { gather, now: Instant::now(), pending: None }
    }

    impl Model {
        /// `moves` reads while the producer writes `piece`-byte pieces at `rate` bytes per
        /// second (what a pause gathers is capped by the pipe); the last pause asked for.
        fn feed(&mut self, moves: usize, rate: f64, piece: usize) -> Option<Duration> {
            for _ in 0..moves {
                let took = self.pending.unwrap_or(Duration::from_secs_f64(piece as f64 / rate));
                self.now += took;
                let bytes = (rate * took.as_secs_f64()) as usize;
                self.pending = self.gather.plan(bytes.clamp(piece, 1 << 20), self.now);
                self.gather.paused = self.pending.is_some();
            }
            self.pending
        }
    }

    /// A pipe's write end as an output, and its read end.
    fn pipe() -> (Endpoint, std::os::fd::OwnedFd) {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let stop = std::sync::Arc::new(crate::stop::Stop::default());
        (Endpoint::opened(write, "a pipe", &stop).unwrap(), read)
    }

    /// Fills `output`'s pipe with `n` bytes.
    fn fill(output: &Endpoint, n: usize) {
        let mut left = n;
        while left > 0 {
            left -= output.write(&vec![0; left]).unwrap();
        }
    }

    #[test]
    fn a_consumer_whose_pipe_was_nearly_empty_is_not_asked_again_for_a_while() {
        use crate::backlog::{Gates, backlog};
        use crate::meter::Meter;
        use std::sync::Arc;
        let meter = Arc::new(Meter::new(1 << 20, 1));
        let log = Arc::new(crate::log::Log::default());
        let (producer, _readers) = backlog(1 << 20, 1, Gates::default(), None, meter, log).unwrap();
        let (output, _read) = pipe();
        let mut consumer = Consumer {
            reader: 0,
            pipe: Some(output.clone()),
            window: None,
            rate: None,
            seen: None,
        };
        let now = Instant::now();
        assert_eq!(consumer.allows(&producer, now), None, "no rate measured yet");
        assert_eq!(consumer.seen, Some((0, 0)), "it looked at the empty pipe");
        // Someone else fills the pipe: accel wrote nothing since it looked, so it does not
        // look again (and allows no pause: a conservative bound).
        fill(&output, 1 << 16);
        let later = now + WINDOW * 2;
        assert_eq!(consumer.allows(&producer, later), None);
        assert_eq!(consumer.seen, Some((0, 0)), "not asked again");
        // Once accel has written enough for the pipe to hold a runway, it looks again.
        producer.meter().add_out(0, RUNWAY_LEAST as usize);
        consumer.allows(&producer, later);
        assert_eq!(consumer.seen, Some((RUNWAY_LEAST, 1 << 16)));
    }

    #[test]
    fn an_output_looks_only_after_waiting_for_a_slow_consumer() {
        let (output, _read) = pipe();
        let mut drain = Drain::new(&output).unwrap();
        fill(&output, drain.size);
        assert_eq!(drain.before(&output), None, "no write waited yet");
        // cat: a 1 MiB write that waited 300 us. Draining a pipe takes it too little time.
        drain.after(1 << 20, Duration::from_micros(300));
        assert!(!drain.watching);
        // A slow consumer that does not read during the pause is waited for in the write.
        let mut drain = Drain::new(&output).unwrap();
        drain.after(drain.size / 16, Duration::from_millis(10));
        assert!(drain.watching);
        assert_eq!(drain.before(&output), None, "it ate nothing");
        assert!(!drain.watching);
    }

    #[test]
    fn an_output_whose_pipe_holds_little_writes_at_once() {
        let (output, _read) = pipe();
        let mut drain = Drain::new(&output).unwrap();
        drain.after(drain.size / 16, Duration::from_millis(10));
        fill(&output, drain.size / 4);
        assert_eq!(drain.before(&output), None);
        assert!(!drain.watching, "the consumer keeps up");
    }

    #[test]
    fn an_output_offers_no_more_than_the_space_its_consumer_made() {
        use std::io::Read;
        let (output, read) = pipe();
        let mut drain = Drain::new(&output).unwrap();
        let size = drain.size;
        fill(&output, size);
        // A slow consumer: a page at a time, a millisecond apart, until the end.
        let eating = std::thread::spawn(move || {
            let (mut read, mut page) = (std::fs::File::from(read), vec![0; 4096]);
            while read.read(&mut page).unwrap() > 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        // Whenever it has eaten during a pause (a loaded machine may not run it for a while:
        // a minute's patience), the space offered goes in at once: a non-blocking write takes
        // all of it.
        let patience = Instant::now() + Duration::from_secs(60);
        let space =
            std::iter::from_fn(|| (Instant::now() < patience).then_some(())).find_map(|()| {
                drain.after(size / 16, Duration::from_millis(10));
                drain.before(&output)
            });
        let space = space.expect("the consumer ate during a pause within a minute");
        assert!((4096..=size).contains(&space), "{space} of {size}");
        let flags = rustix::fs::fcntl_getfl(output.fd()).unwrap();
        rustix::fs::fcntl_setfl(output.fd(), flags | rustix::fs::OFlags::NONBLOCK).unwrap();
        assert_eq!(output.write(&vec![0; space]).unwrap(), space);
        drop(output);
        eating.join().unwrap();
    }

    #[test]
    fn the_first_move_never_pauses() {
        assert_eq!(model().gather.plan(4096, Instant::now()), None);
    }

    #[test]
    fn small_writes_at_a_modest_rate_gather_a_quarter_at_twice_the_rate() {
        // bzip2 -dc: 4 KiB pieces at 25 MB/s. A quarter (256 KiB) at twice that: 5.2 ms.
        let pause = model().feed(20, 25e6, 4096).unwrap();
        let expected = (256 << 10) as f64 / (2.0 * 25e6);
        assert!((pause.as_secs_f64() - expected).abs() < 1e-4, "{pause:?}, not {expected}");
    }

    #[test]
    fn a_fast_producer_never_pauses() {
        // dd bs=1M at 3 GB/s: each read takes more than a quarter.
        assert_eq!(model().feed(10, 3e9, 1 << 20), None);
        // 64 KiB pieces at 3 GB/s: a quarter fills in less than the least pause.
        assert_eq!(model().feed(10, 3e9, 64 << 10), None);
    }

    #[test]
    fn a_slow_producer_pauses_no_longer_than_the_most() {
        assert_eq!(model().feed(5, 100e3, 4096), Some(MOST));
    }

    #[test]
    fn small_pieces_gather_a_quarter_of_the_slots_not_of_the_bytes() {
        // 100-byte lines at 1 MB/s: a quarter of the bytes (256 KiB) would take 131 ms at
        // twice the rate, and fill the pipe's 256 slots with 2.6 KB. Read one by one, the
        // pieces tell the pause to gather 64 of them: 3.2 ms at twice the rate.
        let mut model = model();
        for _ in 0..40 {
            model.feed(1, 1e6, 100);
            (model.pending, model.gather.paused) = (None, false);
        }
        let pause = model.feed(1, 1e6, 100).unwrap();
        assert!(pause < Duration::from_millis(4), "{pause:?}");
    }

    #[test]
    fn a_pipe_that_filled_while_accel_waited_does_not_make_the_producer_look_fast() {
        let mut model = model();
        model.feed(20, 25e6, 4096);
        // The backlog was full for 100 ms; then the full pipe is read, and the producer,
        // let go, writes what it had ready at once.
        model.now += Duration::from_millis(100);
        assert_eq!(model.gather.plan(1 << 20, model.now), None);
        model.now += Duration::from_micros(20);
        model.gather.plan(64 << 10, model.now);
        let pause = model.feed(20, 25e6, 4096).unwrap();
        assert!(pause > Duration::from_millis(2), "{pause:?}");
    }

    #[test]
    fn a_rising_rate_is_taken_at_once() {
        let mut model = model();
        assert_eq!(model.feed(5, 1e6, 4096), Some(MOST));
        // A hundred times as fast: the read after the pause takes the whole pipe, and the
        // next one pauses no more.
        assert_eq!(model.feed(1, 100e6, 4096), None);
        let next = model.feed(1, 100e6, 4096).unwrap_or_default();
        assert!(next < Duration::from_millis(2), "{next:?}");
    }
}
