//! The zero-copy engine (Linux): the input side's tiers, and the output side's writing from
//! pool pipes.
//!
//! The input thread moves each piece of data by the cheapest way that keeps every guarantee:
//!
//! 1. **Straight through.** While nothing is queued, `splice(stdin → stdout)` with
//!    `SPLICE_F_NONBLOCK`, which never blocks on a pipe: the bytes are never copied and accel
//!    holds nothing. When stdout is full, the data is queued instead, and the output thread
//!    (which may block on stdout) takes over until the queue has drained.
//! 2. **Pool pipes.** Queued data is spliced into a few of accel's own 1 MiB pipes, and spliced
//!    out of them by the output thread: still no copy. The pool stays small (its pages are
//!    unswappable and count against the user's pipe quota) and is given back as it drains.
//! 3. **Memory.** Beyond the pool, or when splicing would waste the buffer, bytes are read into
//!    the backlog's memory like the copy engine does. A pipe counts pages, not bytes: a
//!    producer making 100-byte writes makes a "1 MiB" pipe full with 25 KB. When a pool pipe
//!    is full at less than half its size, the input copies (which packs pages) until the backlog
//!    has drained.
//!
//! Any refused splice means "not here": that side falls back to `read`/`write` for the rest of
//! the run, which then meets any real error (EPIPE, ENOSPC, EIO) and reports it on the right
//! side. A failed splice moves nothing, and bytes already in a pool pipe are copied out of it,
//! so no byte is ever lost by a fallback.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use rustix::event::PollFlags;
use rustix::io::Errno;

use super::bypass::{self, Bypass};
use super::gather::Gather;
use super::pace::Pacer;
use super::read;
use super::{Flow, Route};
use crate::backlog::Producer;
use crate::endpoint::{Endpoint, FdKind};
use crate::sys::{PoolPipe, pipe_target_size, splice};

/// At most this much of the backlog sits in pool pipes: half of the default buffer, so that
/// half of a standing 32 MiB backlog moves without a copy, and a quarter of the default
/// per-user pipe quota (64 MiB), held only while a backlog stands, so that the user's other
/// pipes (and other accels) keep theirs.
const POOL_BYTES: usize = 16 << 20;

/// The most one straight-through splice asks for; the pipes' sizes bound it anyway.
const THROUGH_MAX: usize = 16 << 20;

/// The most copied out of a pool pipe at once when stdout cannot be spliced.
const SCRATCH: usize = 1 << 20;

/// What one step of the input side did.
enum Step {
    /// This many bytes moved (maybe none, when the next step may move some): go on.
    Moved(usize),
    /// End of input.
    End,
}

/// The input side of the splice engine.
pub struct Input<'a> {
    input: Endpoint,
    output: Endpoint,
    /// Passes what a read into memory got on to stdout at once, while nothing is queued.
    /// Before `producer`, which tells the end of input when dropped: fields drop in order, and
    /// stdout's reader sees the end only once the bypass's own writer is closed too.
    bypass: Option<Bypass>,
    producer: Producer,
    route: &'a Route,
    flow: &'a Flow,
    /// The input's pace, under `--input-rate`.
    pacer: Pacer<'a>,
    /// Straight-through splicing still works for this pair of descriptors.
    through: bool,
    /// Straight through found stdout full: queue the next bytes instead.
    output_full: bool,
    /// A pool pipe was full with few bytes per page: copy until the backlog has drained.
    small_writes: bool,
    /// No more pool pipes can be had (quota, descriptors).
    pool_closed: bool,
    max_pipes: usize,
    /// What reading has shown of stdin so far.
    stdin: Stream,
    /// Lets input gather in stdin's pipe while every reader has bytes to take.
    gather: Option<Gather>,
}

/// Whether stdin delivers a byte stream, which may be spliced on.
///
/// A packet-mode pipe (`pipe2(O_DIRECT)`) marks each write as a packet, and splice carries the
/// marks on into the consumer's pipe, where a read shorter than a packet discards the rest of
/// it. Only the writer's end shows the flag, so stdin is read into memory until one read
/// tells: a read of a packet-mode pipe returns a single packet, at most `PIPE_BUF` (4 KiB)
/// bytes, so one that returns more than a page comes from a stream. Such reads take four
/// pages at most, so that a burst already waiting in stdin is spliced once told, not copied. A
/// producer whose writes are a page or less, and never pile up because accel keeps up, is
/// never spliced: it costs a copy, at the low rates such a producer has, rather than risk what
/// the consumer reads; and each read goes straight on (see [`Input::queue_in_memory`]), one
/// wakeup per piece, as `cat`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// Not known yet (or packets): read, and watch what a read returns.
    Unknown,
    /// A byte stream (or a file): splicing is safe.
    Bytes,
}

impl<'a> Input<'a> {
    /// The input side between `input` and the one `output`, taking input into the backlog
    /// through `producer` along `route`.
    pub fn new(
        input: Endpoint,
        output: Endpoint,
        producer: Producer,
        route: &'a Route,
        flow: &'a Flow,
    ) -> Input<'a> {
        let stdin = if input.kind == FdKind::Pipe { Stream::Unknown } else { Stream::Bytes };
        let gather = Gather::new(&input, std::slice::from_ref(&output));
        let bypass = Bypass::new(std::slice::from_ref(&output), 1);
        Input {
            input,
            output,
            producer,
            route,
            flow,
            pacer: Pacer::new(&flow.limits.input),
            through: true,
            output_full: false,
            small_writes: false,
            pool_closed: false,
            max_pipes: (POOL_BYTES / pipe_target_size()).max(1),
            stdin,
            gather,
            bypass,
        }
    }

    /// Moves input until it ends, fails, or the output is gone (an `Interrupted` error), at
    /// no more than the input rate limit.
    pub fn run(mut self) -> io::Result<()> {
        loop {
            match self.step()? {
                Step::Moved(n) => {
                    self.pacer.moved(n, self.input.stop());
                    // Under an input rate limit, the pacer decides when to read.
                    if let (Some(gather), None) = (&mut self.gather, self.pacer.quantum()) {
                        gather.after(n, &mut self.producer);
                    }
                }
                Step::End => return Ok(()),
            }
        }
    }

    /// One move by the cheapest way open now.
    fn step(&mut self) -> io::Result<Step> {
        if self.input.exhausted() {
            // Not a wait for input that is not wanted.
            return Ok(Step::End);
        }
        {
            let Some(fill) = self.producer.wait_for_space() else {
                return Err(read::nobody_left());
            };
            if fill.empty {
                // The consumer has caught up: try the cheap ways again.
                self.small_writes = false;
            }
            let splicing =
                self.route.input_splice.load(Relaxed) && self.route.output_splice.load(Relaxed);
            // Bytes read into memory while nothing is queued are passed on at once, from this
            // thread, where they fit: a line crosses with one wakeup, not two.
            let direct = (fill.empty && self.bypasses_output_thread()).then_some(fill.space);
            if splicing && self.stdin == Stream::Unknown {
                return self.read_and_tell(direct);
            }
            if !splicing {
                return self.queue_in_memory(direct);
            }
            // Wait for data before splicing, so that a splice refused with EAGAIN can only mean
            // a full destination: one poll per producer write instead of a failed splice and
            // two polls. With nothing queued, the consumer waits for stdin as much as we do.
            if fill.empty {
                self.producer.meter().reader_starved(0, true);
                self.input.wait(PollFlags::IN)?;
                self.producer.meter().reader_starved(0, false);
            } else {
                self.input.wait(PollFlags::IN)?;
            }
            // Only this thread adds to the backlog: there is at least as much space now.
            let Some(fill) = self.producer.wait_for_space() else {
                return Err(read::nobody_left());
            };
            if fill.empty && self.through && self.bypasses_output_thread() {
                self.straight_through()
            } else if !self.small_writes && fill.space >= rustix::param::page_size() {
                self.queue_in_pool(fill.space)
            } else {
                self.queue_in_memory(None)
            }
        }
    }

    /// Whether bytes may go to the output from this thread, past the output thread (only
    /// while nothing is queued, so that it has nothing under way and order is kept: the
    /// caller's part).
    fn bypasses_output_thread(&self) -> bool {
        !self.output_full && !self.flow.output_thread_only()
    }

    /// A splice from the input moved nothing: the end of the input, or only of one of its
    /// FILE operands (then the next is current, and the run goes on).
    fn at_end(&self) -> io::Result<Step> {
        Ok(if self.input.ended()? { Step::End } else { Step::Moved(0) })
    }

    /// Whether a splice failed because the input, a socket, was reset: the one error a read
    /// after it would not meet again (a socket reports a reset once; the read finds an end of
    /// stream, which would pass a cut stream off as whole).
    fn input_reset(&self, error: Errno) -> bool {
        error == Errno::CONNRESET && self.input.kind == FdKind::Socket
    }

    /// The most one move may take: the input rate's quantum, or `len`.
    fn most(&self, len: usize) -> usize {
        self.pacer.quantum().map_or(len, |quantum| quantum.min(len))
    }

    /// Splices from stdin to stdout without queueing; only while the backlog is empty, so
    /// that the output thread has nothing under way and order is kept. Stdin has data.
    fn straight_through(&mut self) -> io::Result<Step> {
        // The consumer is fed from here now, not by the output thread, which waits for queued
        // data meanwhile and must not count that as the consumer starving.
        self.producer.meter().reader_starved(0, false);
        match self.input.splice_to(self.output.fd(), self.most(THROUGH_MAX), true) {
            Ok(0) => self.at_end(),
            Ok(n) => {
                self.producer.meter().add_through(n);
                Ok(Step::Moved(n))
            }
            Err(Errno::INTR) => self.input.stop().check().map(|()| Step::Moved(0)),
            Err(Errno::AGAIN) => {
                // Stdin has data, so stdout is full: queue instead, and the output thread
                // (which may block on stdout) takes over until the queue has drained.
                self.output_full = true;
                Ok(Step::Moved(0))
            }
            Err(e) if self.input_reset(e) && self.output.kind != FdKind::Socket => Err(e.into()),
            Err(e) => {
                // Nothing moved. Which side refused is unknown; the queued path tries each
                // side on its own and meets any real error there.
                self.through = false;
                self.route.note(format_args!("straight-through splice refused ({e}); queueing"));
                Ok(Step::Moved(0))
            }
        }
    }

    /// Splices from stdin into the pool pipe at the back of the backlog, opening one if needed.
    fn queue_in_pool(&mut self, space: usize) -> io::Result<Step> {
        let pipe = match self.producer.back_pipe() {
            Some(pipe) => pipe,
            None => match self.open_pipe() {
                Some(pipe) => {
                    self.producer.push_pipe(Arc::clone(&pipe));
                    pipe
                }
                None => return self.queue_in_memory(None),
            },
        };
        let len = self.most(space.min(pipe.size()));
        match self.input.splice_to(pipe.write_end(), len, true) {
            Ok(0) => self.at_end(),
            Ok(n) => {
                self.producer.commit_pipe(n);
                self.output_full = false;
                Ok(Step::Moved(n))
            }
            Err(Errno::INTR) => self.input.stop().check().map(|()| Step::Moved(0)),
            Err(Errno::AGAIN) => {
                // Stdin has data, so the pool pipe is full. A pipe counts pages: if it holds
                // less than half its size, the producer writes small pieces and copying packs
                // them better.
                let held = self.producer.back_pipe_held();
                if held < pipe.size() / 2 {
                    self.small_writes = true;
                    self.route.note(format_args!(
                        "a pool pipe filled with {held} bytes (small writes); copying until \
                         the backlog drains"
                    ));
                    return self.queue_in_memory(None);
                }
                match self.open_pipe() {
                    Some(next) => {
                        self.producer.push_pipe(next);
                        Ok(Step::Moved(0))
                    }
                    None => self.queue_in_memory(None),
                }
            }
            Err(e) if self.input_reset(e) => Err(e.into()),
            Err(e) => {
                // Nothing moved; `read` will meet a real error, if this was one.
                let (route, name) = (self.route, &self.input.name);
                route.stop_splicing(&route.input_splice, name, format_args!("{e}"));
                Ok(Step::Moved(0))
            }
        }
    }

    /// Reads into the backlog's memory, as the copy engine does; `direct`, with the space in
    /// memory: nothing is queued, and what was read goes straight to the output where it fits
    /// without waiting (through a relay while the consumer waits on stdin).
    fn queue_in_memory(&mut self, direct: Option<usize>) -> io::Result<Step> {
        Ok(match self.read_into_memory(direct)? {
            Some(took) => Step::Moved(took.got),
            None => Step::End,
        })
    }

    /// One read into memory, or a relay's reads (see [`Input::queue_in_memory`]); the last
    /// read, `None` at end of input.
    fn read_into_memory(&mut self, direct: Option<usize>) -> io::Result<Option<read::Took>> {
        self.output_full = false;
        let quantum = self.pacer.quantum();
        // Enough to tell a byte stream, and no more: a burst waiting in stdin is spliced once
        // told, not copied through memory.
        let telling = (self.stdin == Stream::Unknown).then(|| 4 * rustix::param::page_size());
        let most = match (quantum, telling) {
            (Some(quantum), Some(telling)) => Some(quantum.min(telling)),
            (quantum, telling) => quantum.or(telling),
        };
        let Input { input, output, producer, route, flow, bypass, gather, .. } = self;
        let bypass = bypass.as_mut().filter(|bypass| direct.is_some() && bypass.allowed(flow));
        match (bypass, direct) {
            (Some(bypass), Some(space)) if bypass.relays(input, producer, quantum, space) => {
                let most = telling.unwrap_or(Bypass::RELAY).min(space);
                // While telling, a read of more than a page has told: the relay ends there.
                let until = telling.map_or(most, |_| rustix::param::page_size() + 1);
                let to = bypass::Relay { input, output, route, flow, most, until };
                bypass.relay(to, producer, gather.as_mut())
            }
            (bypass, _) => {
                let direct = bypass.map(|bypass| (bypass, &*output));
                bypass::read_passing(input, producer, most, direct, route)
            }
        }
    }

    /// Reads into memory, and tells from what the read returned whether stdin is a byte
    /// stream (see [`Stream`]); `direct` as for [`Input::queue_in_memory`].
    fn read_and_tell(&mut self, direct: Option<usize>) -> io::Result<Step> {
        let Some(took) = self.read_into_memory(direct)? else {
            return Ok(Step::End);
        };
        // A read into the spill file (spliced, maybe) says nothing about packets.
        if !took.spilled && took.got > rustix::param::page_size() {
            self.stdin = Stream::Bytes;
            self.route.note(format_args!(
                "stdin is a byte stream (a read returned {} bytes): splicing it",
                took.got
            ));
        }
        Ok(Step::Moved(took.got))
    }

    /// A pool pipe for the next segment: a spare, or a new one while the pool has space.
    fn open_pipe(&mut self) -> Option<Arc<PoolPipe>> {
        if let Some(pipe) = self.producer.spare_pipe() {
            return Some(pipe);
        }
        if self.pool_closed || self.producer.pipes_open() >= self.max_pipes {
            return None;
        }
        match PoolPipe::new() {
            Ok(pipe) => Some(Arc::new(pipe)),
            Err(e) => {
                self.pool_closed = true;
                self.route.note(format_args!("no pool pipes: {e}; copying instead"));
                None
            }
        }
    }
}

/// The output side's way of writing bytes that wait in a pool pipe.
pub struct PipeWriter<'a> {
    output: &'a Endpoint,
    route: &'a Route,
    /// Where bytes are copied out of a pool pipe when stdout cannot be spliced.
    scratch: Vec<u8>,
    /// `scratch[pending]` are the first bytes of the front segment: taken out of its pipe,
    /// not yet written. They are written before anything else, and count as delivered only
    /// once written, so that an error after a partial write reports exactly what arrived.
    pending: Range<usize>,
}

impl<'a> PipeWriter<'a> {
    /// Writes to `output` along `route`.
    pub fn new(output: &'a Endpoint, route: &'a Route) -> PipeWriter<'a> {
        PipeWriter { output, route, scratch: Vec::new(), pending: 0..0 }
    }

    /// Passes on some of the `len` bytes waiting in `pipe` (at least one); returns how many.
    pub fn write(&mut self, pipe: &PoolPipe, len: usize) -> io::Result<usize> {
        if self.pending.is_empty() {
            while self.route.output_splice.load(Relaxed) {
                // Blocking: waits for space in the output, never for data (`len` bytes are there).
                match splice(pipe.read_end(), self.output.fd(), len, false) {
                    Ok(n) if n > 0 => return Ok(n),
                    Err(Errno::INTR) => self.output.stop().check()?,
                    Err(Errno::AGAIN) => self.output.wait(PollFlags::OUT)?,
                    result => {
                        let why = result.err().map_or("no progress".to_owned(), |e| e.to_string());
                        let route = self.route;
                        let name = &self.output.name;
                        route.stop_splicing(&route.output_splice, name, format_args!("{why}"));
                    }
                }
            }
            // Copy out what the pipe holds; `write` meets any real error of stdout.
            self.scratch.resize(len.min(SCRATCH), 0);
            let n = loop {
                match rustix::io::read(pipe.read_end(), &mut self.scratch) {
                    Err(Errno::INTR) => continue,
                    result => break result?,
                }
            };
            self.pending = 0..n;
        }
        let written = self.output.write(&self.scratch[self.pending.clone()])?;
        self.pending.start += written;
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::engine::EngineKind;
    use crate::log::Log;
    use crate::stop::Stop;

    /// An error after a partial write reports the partial write first, so that what reached
    /// the output counts as delivered. (Regression: after falling back from splice to
    /// copying, a partial write before an error went uncounted, and the message said fewer
    /// bytes were delivered than the output held.)
    #[test]
    fn a_partial_write_before_an_error_is_counted() {
        let pool = PoolPipe::new().unwrap();
        let queued = 256 << 10;
        let mut put = 0;
        while put < queued {
            put += rustix::io::write(pool.write_end(), &vec![7u8; queued - put]).unwrap();
        }
        // A default pipe holds 64 KiB; its reader goes away once it is full.
        let (out_r, out_w) = rustix::pipe::pipe().unwrap();
        let size = rustix::pipe::fcntl_getpipe_size(&out_w).unwrap();
        let output = Endpoint::opened(out_w, "the pipe", &Arc::new(Stop::default())).unwrap();
        let route = Route {
            engine: EngineKind::Splice,
            input_splice: AtomicBool::new(false),
            // As after a refused splice: copying out of the pool pipe.
            output_splice: AtomicBool::new(false),
            log: Arc::new(Log::default()),
        };
        let reader = std::thread::spawn(move || {
            while rustix::io::ioctl_fionread(out_r.as_fd()).unwrap() < size as u64 {
                std::thread::yield_now();
            }
        });
        let mut writer = PipeWriter::new(&output, &route);
        let first = writer.write(&pool, queued);
        reader.join().unwrap();
        assert_eq!(first.unwrap(), size, "the partial write is reported as such");
        let second = writer.write(&pool, queued - size);
        assert_eq!(second.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }
}
