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
//!    producer making 100-byte writes would fill a "1 MiB" pipe with 25 KB. When a pool pipe
//!    fills at less than half its size, the input copies (which packs pages) until the backlog
//!    has drained.
//!
//! Any refused splice means "not here": that side falls back to `read`/`write` for the rest of
//! the run, which then meets any real error (EPIPE, ENOSPC, EIO) and reports it on the right
//! side. A failed splice moves nothing, and bytes already in a pool pipe are copied out of it,
//! so no byte is ever lost by a fallback.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use rustix::event::PollFlags;
use rustix::io::Errno;
use rustix::pipe::{SpliceFlags, splice};

use super::{Route, copy};
use crate::backlog::{Backlog, PoolPipe};
use crate::endpoint::Endpoint;
use crate::sys::pipe_target_size;

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
    /// Bytes moved, or nothing moved but the next step may: go on.
    Again,
    /// End of input, or the output closed.
    End,
}

/// The input side of the splice engine.
pub struct Input<'a> {
    input: Endpoint,
    output: Endpoint,
    backlog: &'a Backlog,
    route: &'a Route,
    /// Straight-through splicing still works for this pair of descriptors.
    through: bool,
    /// Straight through found stdout full: queue the next bytes instead.
    output_full: bool,
    /// A pool pipe filled with few bytes per page: copy until the backlog has drained.
    small_writes: bool,
    /// No more pool pipes can be had (quota, descriptors).
    pool_closed: bool,
    max_pipes: usize,
}

impl<'a> Input<'a> {
    /// The input side between `input` and `output`, filling `backlog` along `route`.
    pub fn new(
        input: Endpoint,
        output: Endpoint,
        backlog: &'a Backlog,
        route: &'a Route,
    ) -> Input<'a> {
        Input {
            input,
            output,
            backlog,
            route,
            through: true,
            output_full: false,
            small_writes: false,
            pool_closed: false,
            max_pipes: (POOL_BYTES / pipe_target_size()).max(1),
        }
    }

    /// Moves input until it ends, fails, or the output closes.
    pub fn run(mut self) -> io::Result<()> {
        let meter = self.backlog.meter();
        loop {
            let Some(room) = self.backlog.wait_for_room() else { return Ok(()) };
            if room.empty {
                // The consumer has caught up: try the cheap ways again.
                self.small_writes = false;
            }
            let splicing =
                self.route.input_splice.load(Relaxed) && self.route.output_splice.load(Relaxed);
            if !splicing {
                if let Step::End = self.queue_in_memory()? {
                    return Ok(());
                }
                continue;
            }
            // Wait for data before splicing, so that a splice refused with EAGAIN can only mean
            // a full destination: one poll per producer write instead of a failed splice and
            // two polls. With nothing queued, the consumer waits for stdin as much as we do.
            if room.empty {
                meter.output_starved(true);
                self.input.wait(PollFlags::IN)?;
                meter.output_starved(false);
            } else {
                self.input.wait(PollFlags::IN)?;
            }
            // Only this thread adds to the backlog: there is at least as much room now.
            let Some(room) = self.backlog.wait_for_room() else { return Ok(()) };
            let step = if room.empty && self.through && !self.output_full {
                self.straight_through()?
            } else if !self.small_writes {
                self.queue_in_pool(room.free)?
            } else {
                self.queue_in_memory()?
            };
            if let Step::End = step {
                return Ok(());
            }
        }
    }

    /// Splices from stdin to stdout without queueing; only while the backlog is empty, so
    /// that the output thread has nothing under way and order is kept. Stdin has data.
    fn straight_through(&mut self) -> io::Result<Step> {
        // The consumer is fed from here now, not by the output thread, which waits for queued
        // data meanwhile and must not count that as the consumer starving.
        self.backlog.meter().output_starved(false);
        let flags = SpliceFlags::NONBLOCK;
        match splice(self.input.fd, None, self.output.fd, None, THROUGH_MAX, flags) {
            Ok(0) => Ok(Step::End),
            Ok(n) => {
                self.backlog.meter().add_through(n);
                Ok(Step::Again)
            }
            Err(Errno::INTR) => Ok(Step::Again),
            Err(Errno::AGAIN) => {
                // Stdin has data, so stdout is full: queue instead, and the output thread
                // (which may block on stdout) takes over until the queue has drained.
                self.output_full = true;
                Ok(Step::Again)
            }
            Err(e) => {
                // Nothing moved. Which side refused is unknown; the queued path tries each
                // side on its own and meets any real error there.
                self.through = false;
                self.route.note(format_args!("straight-through splice refused ({e}); queueing"));
                Ok(Step::Again)
            }
        }
    }

    /// Splices from stdin into the pool pipe at the back of the backlog, opening one if needed.
    fn queue_in_pool(&mut self, free: usize) -> io::Result<Step> {
        let pipe = match self.backlog.back_pipe() {
            Some(pipe) => pipe,
            None => match self.open_pipe() {
                Some(pipe) => {
                    self.backlog.push_pipe(Arc::clone(&pipe));
                    pipe
                }
                None => return self.queue_in_memory(),
            },
        };
        let len = free.min(pipe.size);
        match splice(self.input.fd, None, &pipe.write, None, len, SpliceFlags::NONBLOCK) {
            Ok(0) => Ok(Step::End),
            Ok(n) => {
                self.backlog.commit(n);
                self.output_full = false;
                Ok(Step::Again)
            }
            Err(Errno::INTR) => Ok(Step::Again),
            Err(Errno::AGAIN) => {
                // Stdin has data, so the pool pipe is full. A pipe counts pages: if it holds
                // less than half its size, the producer writes small pieces and copying packs
                // them better.
                let held = self.backlog.back_pipe_held();
                if held < pipe.size / 2 {
                    self.small_writes = true;
                    self.route.note(format_args!(
                        "a pool pipe filled with {held} bytes (small writes); copying until \
                         the backlog drains"
                    ));
                    return self.queue_in_memory();
                }
                match self.open_pipe() {
                    Some(next) => {
                        self.backlog.push_pipe(next);
                        Ok(Step::Again)
                    }
                    None => self.queue_in_memory(),
                }
            }
            Err(e) => {
                // Nothing moved; `read` will meet a real error, if this was one.
                self.route.stop_splicing(&self.route.input_splice, "stdin", format_args!("{e}"));
                Ok(Step::Again)
            }
        }
    }

    /// Reads into the backlog's memory, as the copy engine does.
    fn queue_in_memory(&mut self) -> io::Result<Step> {
        self.output_full = false;
        Ok(if copy::read_once(&self.input, self.backlog)? { Step::Again } else { Step::End })
    }

    /// A pool pipe for the next segment: a spare, or a new one while the pool has room.
    fn open_pipe(&mut self) -> Option<Arc<PoolPipe>> {
        if let Some(pipe) = self.backlog.spare_pipe() {
            return Some(pipe);
        }
        if self.pool_closed || self.backlog.pipes_open() >= self.max_pipes {
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
    scratch: Vec<u8>,
}

impl<'a> PipeWriter<'a> {
    /// Writes to `output` along `route`.
    pub fn new(output: &'a Endpoint, route: &'a Route) -> PipeWriter<'a> {
        PipeWriter { output, route, scratch: Vec::new() }
    }

    /// Passes on some of the `len` bytes waiting in `pipe` (at least one); returns how many.
    pub fn write(&mut self, pipe: &PoolPipe, len: usize) -> io::Result<usize> {
        while self.route.output_splice.load(Relaxed) {
            // Blocking: waits for room in stdout, never for data (`len` bytes are there).
            match splice(&pipe.read, None, self.output.fd, None, len, SpliceFlags::empty()) {
                Ok(n) if n > 0 => return Ok(n),
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => self.output.wait(PollFlags::OUT)?,
                result => {
                    let why = result.err().map_or("no progress".to_owned(), |e| e.to_string());
                    let route = self.route;
                    route.stop_splicing(&route.output_splice, "stdout", format_args!("{why}"));
                }
            }
        }
        // Copy out what the pipe holds; `write` meets any real error of stdout.
        self.scratch.resize(len.min(SCRATCH), 0);
        let n = loop {
            match rustix::io::read(&pipe.read, &mut self.scratch) {
                Err(Errno::INTR) => continue,
                result => break result?,
            }
        };
        let mut written = 0;
        while written < n {
            written += self.output.write(&self.scratch[written..n])?;
        }
        Ok(n)
    }
}
