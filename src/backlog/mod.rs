//! The backlog: bytes taken in and not yet passed on, in order.
//!
//! One input thread appends at the back, one output thread takes from the front, and neither
//! ever waits for the other except when the backlog is full (input waits for room) or empty
//! (output waits for data). Everything read is visible to the output at once, so a short line
//! passes straight through, and memory follows the backlog: chunks are mapped as it grows and
//! unmapped as it drains, keeping only a spare for reuse.
//!
//! The backlog is a FIFO of segments. A segment's bytes live in a chunk of memory, or (on
//! Linux) in one of accel's own pipes, where they were spliced without being copied. The input
//! thread fills the back segment; the output thread writes from the front one. Both do their
//! I/O without holding the lock, on byte ranges that cannot overlap:
//!
//! - the input side only writes past the back segment's `end` (not yet committed);
//! - the output side only reads committed bytes, `start..end` of the front segment;
//! - a segment is removed only by the output side once it is empty and no longer the back one
//!   (so no input is under way in it), or by the input side when nothing at all is buffered (so
//!   no output is under way anywhere).
//!
//! The lock is taken twice per read or write to exchange offsets, never across a system call.

// Off Linux a segment can only be in memory, so matching on its store cannot fail.
#![cfg_attr(not(target_os = "linux"), allow(irrefutable_let_patterns))]

mod chunk;
#[cfg(target_os = "linux")]
mod pipe;

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use chunk::Chunk;
pub use chunk::MAX_CHUNK;
#[cfg(target_os = "linux")]
pub use pipe::PoolPipe;

use crate::log::{Log, Once};
use crate::meter::{Meter, Tier};

/// Chunks and pool pipes kept once the backlog has drained. While a backlog stands, every
/// drained chunk or pipe is kept for the input to reuse: mapping a fresh chunk means the kernel
/// zeroes it again, which cost a fifth of accel's CPU with a standing backlog. Once the backlog
/// has stayed empty for [`GIVE_BACK_AFTER`], all but this many go back to the kernel.
const SPARES_WHEN_DRAINED: usize = 1;

/// How long the backlog must stay empty before its spare memory and pipes are given back.
const GIVE_BACK_AFTER: Duration = Duration::from_secs(1);

/// A full backlog resumes input once 1/RESUME_FRACTION of it is free, or RESUME_MAX bytes.
const RESUME_FRACTION: usize = 16;
const RESUME_MAX: usize = 1 << 20;

/// The shared buffer between the input and the output thread.
#[derive(Debug)]
pub struct Backlog {
    state: Mutex<State>,
    /// Signalled when data arrives or input ends; the output thread waits on it.
    has_data: Condvar,
    /// Signalled when room appears or output closes; the input thread waits on it.
    has_room: Condvar,
    capacity: usize,
    /// The least room the input is ever offered: a page. A packet-mode pipe discards what
    /// does not fit in a read, and its packets are up to a page long; and moving less than a
    /// page per thread handoff would make tiny buffers crawl.
    min_read: usize,
    /// A full backlog takes input again once this much room has been made, not at the first
    /// byte: with a consumer that reads 64 KiB at a time, waking the input for every read
    /// would cost a futex wakeup and a small read per 64 KiB.
    resume_gap: usize,
    chunk_size: usize,
    meter: Arc<Meter>,
    log: Arc<Log>,
    /// The kernel refused memory for a chunk at least once; said once.
    memory_refused: Once,
}

#[derive(Debug, Default)]
struct State {
    segments: VecDeque<Segment>,
    /// Committed bytes not yet consumed, over all segments.
    len: usize,
    /// How the input ended, once it has: `Ok` at end of file.
    input_end: Option<io::Result<()>>,
    /// The output stopped (an error); input should stop too.
    output_closed: bool,
    spare_chunks: Vec<Arc<Chunk>>,
    #[cfg(target_os = "linux")]
    spare_pipes: Vec<Arc<PoolPipe>>,
    input_waiting: bool,
    /// The input waits for a chunk to come free, since no new one could be mapped.
    input_waiting_for_memory: bool,
    output_waiting: bool,
}

/// Where a segment's bytes are kept.
#[derive(Debug, Clone)]
enum Store {
    Memory(Arc<Chunk>),
    #[cfg(target_os = "linux")]
    Pipe(Arc<PoolPipe>),
}

#[derive(Debug)]
struct Segment {
    store: Store,
    /// Bytes consumed so far: the first byte not yet written out.
    start: usize,
    /// Bytes committed so far: one past the last byte read in.
    end: usize,
}

impl Segment {
    fn new(store: Store) -> Segment {
        Segment { store, start: 0, end: 0 }
    }

    fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Free bytes at the end of a memory segment; `None` for a pipe.
    fn memory_room(&self) -> Option<usize> {
        match &self.store {
            Store::Memory(chunk) => Some(chunk.size() - self.end),
            #[cfg(target_os = "linux")]
            Store::Pipe(_) => None,
        }
    }
}

/// The backlog's state as the input side finds it after waiting for room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Bytes that may still be added.
    pub free: usize,
    /// Nothing is buffered and no output is under way.
    pub empty: bool,
}

/// Free memory at the back of the backlog, which the input thread may fill and then
/// [`commit`](Backlog::commit).
#[derive(Debug)]
pub struct Vacant {
    chunk: Arc<Chunk>,
    offset: usize,
    len: usize,
}

/// Bytes in memory at the front of the backlog, which the output thread may write and then
/// [`consume`](Backlog::consume).
#[derive(Debug)]
pub struct Filled {
    chunk: Arc<Chunk>,
    offset: usize,
    len: usize,
}

/// What the output thread finds at the front of the backlog.
#[derive(Debug)]
pub enum Front {
    /// Bytes in memory.
    Memory(Filled),
    /// `len` bytes waiting in one of accel's pipes.
    #[cfg(target_os = "linux")]
    Pipe(Arc<PoolPipe>, usize),
}

impl Vacant {
    /// The free bytes, to read into.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: the backlog hands out a Vacant only for bytes past the back segment's `end`,
        // which no Filled covers and no other Vacant exists for (one input thread), and the
        // Arc keeps the mapping alive. The mapping is zero-initialised by the kernel.
        unsafe { std::slice::from_raw_parts_mut(self.chunk.at(self.offset), self.len) }
    }
}

impl Filled {
    /// The buffered bytes, to write out.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: committed bytes of the front segment; the input side never writes to
        // committed bytes, and the Arc keeps the mapping alive.
        unsafe { std::slice::from_raw_parts(self.chunk.at(self.offset), self.len) }
    }
}

impl Backlog {
    /// The capacity a backlog asked for `asked` bytes has: at least a page, the least it
    /// moves at once.
    pub fn capacity_for(asked: usize) -> usize {
        asked.max(rustix::param::page_size())
    }

    /// A backlog holding at most `capacity` bytes, but at least a page, reporting to `meter`.
    ///
    /// Maps its first chunk now (address space only: nothing is touched), so that a backlog
    /// always has memory to read into when it is empty, even once the kernel refuses more.
    pub fn new(capacity: usize, meter: Arc<Meter>, log: Arc<Log>) -> io::Result<Backlog> {
        let min_read = rustix::param::page_size();
        let capacity = Backlog::capacity_for(capacity);
        let chunk_size = capacity.min(MAX_CHUNK).next_multiple_of(min_read);
        let state =
            State { spare_chunks: vec![Arc::new(Chunk::new(chunk_size)?)], ..State::default() };
        Ok(Backlog {
            state: Mutex::new(state),
            has_data: Condvar::new(),
            has_room: Condvar::new(),
            capacity,
            min_read,
            resume_gap: (capacity / RESUME_FRACTION).clamp(min_read, RESUME_MAX.max(min_read)),
            chunk_size,
            meter,
            log,
            memory_refused: Once::default(),
        })
    }

    /// The most bytes held: what was asked for, or a page if that was less.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The meter this backlog reports to.
    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    // ----- input side -----

    /// Waits until there is room; `None` once the output has closed.
    pub fn wait_for_room(&self) -> Option<Room> {
        let state = self.room_locked();
        (!state.output_closed)
            .then(|| Room { free: self.capacity - state.len, empty: state.len == 0 })
    }

    /// Waits for room, then returns free memory to read into (at least a page); `None` once
    /// the output has closed. Starts a memory segment if the back one is full or a pipe.
    ///
    /// When the kernel refuses memory for a new chunk (a memory limit below the buffer size),
    /// the backlog counts as full: the input waits until the output frees a chunk, and the
    /// user is told once. Fails only when no memory can be had with nothing buffered.
    pub fn reserve(&self) -> io::Result<Option<Vacant>> {
        let mut state = self.room_locked();
        loop {
            if state.output_closed {
                return Ok(None);
            }
            if state.len == 0 {
                state.rewind();
            }
            let room = state.segments.back().and_then(Segment::memory_room).unwrap_or(0);
            if room >= self.min_read {
                break;
            }
            let chunk = match state.spare_chunks.pop() {
                Some(chunk) => chunk,
                None => match Chunk::new(self.chunk_size) {
                    Ok(chunk) => Arc::new(chunk),
                    Err(error) if state.len == 0 => return Err(error),
                    Err(error) => {
                        state = self.wait_for_memory(state, &error);
                        continue;
                    }
                },
            };
            state.segments.push_back(Segment::new(Store::Memory(chunk)));
        }
        let free = self.capacity - state.len;
        let back = state.segments.back().expect("a back segment");
        let Store::Memory(chunk) = &back.store else { unreachable!("a memory segment") };
        let len = free.min(chunk.size() - back.end);
        Ok(Some(Vacant { chunk: Arc::clone(chunk), offset: back.end, len }))
    }

    /// Holds the input, as if the backlog were full, until a chunk comes free or the backlog
    /// has drained; says why, once.
    fn wait_for_memory<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        error: &io::Error,
    ) -> MutexGuard<'a, State> {
        if self.memory_refused.first() {
            self.log.warn(format_args!(
                "memory refused with {} buffered ({}); the producer waits while it drains",
                crate::size::Bytes(state.len as u64),
                crate::endpoint::describe(error)
            ));
        }
        self.meter.input_held(true);
        state.input_waiting_for_memory = true;
        state = self.wait(&self.has_room, state, |s| {
            s.spare_chunks.is_empty() && s.len > 0 && !s.output_closed
        });
        state.input_waiting_for_memory = false;
        self.meter.input_held(false);
        state
    }

    /// The pipe of the back segment, to splice more into; `None` if the back is not a pipe.
    #[cfg(target_os = "linux")]
    pub fn back_pipe(&self) -> Option<Arc<PoolPipe>> {
        match &self.lock().segments.back()?.store {
            Store::Pipe(pipe) => Some(Arc::clone(pipe)),
            Store::Memory(_) => None,
        }
    }

    /// Starts a new segment in `pipe`, which must be empty; what is spliced into it next is
    /// committed there.
    #[cfg(target_os = "linux")]
    pub fn push_pipe(&self, pipe: Arc<PoolPipe>) {
        self.lock().segments.push_back(Segment::new(Store::Pipe(pipe)));
    }

    /// An empty pool pipe kept from earlier, if any.
    #[cfg(target_os = "linux")]
    pub fn spare_pipe(&self) -> Option<Arc<PoolPipe>> {
        self.lock().spare_pipes.pop()
    }

    /// Pool pipes open right now: in segments and spare.
    #[cfg(target_os = "linux")]
    pub fn pipes_open(&self) -> usize {
        let state = self.lock();
        let in_use = state.segments.iter().filter(|s| matches!(s.store, Store::Pipe(_))).count();
        in_use + state.spare_pipes.len()
    }

    /// Bytes held in the back segment when it is a pipe (what that pipe holds now).
    #[cfg(target_os = "linux")]
    pub fn back_pipe_held(&self) -> usize {
        let state = self.lock();
        state.segments.back().map_or(0, |s| s.end - s.start)
    }

    /// Makes `n` more bytes of the back segment visible to the output.
    pub fn commit(&self, n: usize) {
        let mut state = self.lock();
        let back = state.segments.back_mut().expect("commit follows reserve");
        back.end += n;
        if let Store::Memory(chunk) = &back.store {
            assert!(back.end <= chunk.size(), "committed past the end of a chunk");
        }
        let tier = match back.store {
            Store::Memory(_) => Tier::Memory,
            #[cfg(target_os = "linux")]
            Store::Pipe(_) => Tier::Pipe,
        };
        state.len += n;
        self.meter.add_in(n, state.len, tier);
        if state.output_waiting {
            self.has_data.notify_one();
        }
    }

    /// Records how the input ended; the output passes on what is buffered, then stops.
    pub fn finish_input(&self, end: io::Result<()>) {
        let mut state = self.lock();
        state.input_end = Some(end);
        self.has_data.notify_one();
    }

    /// Locks the state once there is room for a read of at least a page, or the output has
    /// closed.
    fn room_locked(&self) -> MutexGuard<'_, State> {
        let mut state = self.lock();
        if state.len > self.capacity - self.min_read && !state.output_closed {
            self.meter.input_held(true);
            state.input_waiting = true;
            let resume = self.capacity - self.resume_gap;
            state = self.wait(&self.has_room, state, |s| s.len > resume && !s.output_closed);
            state.input_waiting = false;
            self.meter.input_held(false);
        }
        state
    }

    // ----- output side -----

    /// Waits for data, then says where the bytes at the front are; `None` once input has
    /// ended and everything was passed on.
    pub fn next(&self) -> Option<Front> {
        let mut state = self.lock();
        loop {
            // Segments emptied and left behind by the input can go.
            while state.segments.len() > 1 && state.segments[0].is_empty() {
                let segment = state.segments.pop_front().expect("more than one segment");
                state.recycle(segment.store);
                if state.input_waiting_for_memory && !state.spare_chunks.is_empty() {
                    self.has_room.notify_one();
                }
            }
            if state.len > 0 {
                let front = state.segments.front().expect("bytes are buffered");
                let len = front.end - front.start;
                return Some(match &front.store {
                    Store::Memory(chunk) => {
                        Front::Memory(Filled { chunk: Arc::clone(chunk), offset: front.start, len })
                    }
                    #[cfg(target_os = "linux")]
                    Store::Pipe(pipe) => Front::Pipe(Arc::clone(pipe), len),
                });
            }
            if state.input_end.is_some() {
                state.give_back_spares();
                return None;
            }
            self.meter.output_starved(true);
            state.output_waiting = true;
            let empty = |s: &mut State| s.len == 0 && s.input_end.is_none();
            if state.has_surplus_spares() {
                // Drained. If it stays so, what the backlog grew to is not needed: give it
                // back. A backlog that only touched empty refills at once and keeps it.
                let (guard, waited) = self
                    .has_data
                    .wait_timeout_while(state, GIVE_BACK_AFTER, empty)
                    .unwrap_or_else(PoisonError::into_inner);
                state = guard;
                if waited.timed_out() {
                    state.give_back_spares();
                }
            }
            state = self.wait(&self.has_data, state, empty);
            state.output_waiting = false;
            self.meter.output_starved(false);
        }
    }

    /// Drops the first `n` bytes at the front: they were written.
    pub fn consume(&self, n: usize) {
        let mut state = self.lock();
        let front = state.segments.front_mut().expect("consume follows next");
        front.start += n;
        assert!(front.start <= front.end, "consumed more than was committed");
        state.len -= n;
        self.meter.add_out(n);
        if (state.input_waiting && state.len <= self.capacity - self.resume_gap)
            || (state.input_waiting_for_memory && state.len == 0)
        {
            self.has_room.notify_one();
        }
    }

    /// Stops the input side: the output failed and nothing more will be passed on.
    pub fn close_output(&self) {
        let mut state = self.lock();
        state.output_closed = true;
        self.has_room.notify_one();
    }

    /// How the input ended, once the output has drained it (`None` while input goes on).
    pub fn take_input_end(&self) -> Option<io::Result<()>> {
        self.lock().input_end.take()
    }

    /// Bytes held right now.
    pub fn len(&self) -> usize {
        self.lock().len
    }

    /// Whether the input waits for room right now (for tests that must know it waits).
    #[cfg(test)]
    fn input_waiting(&self) -> bool {
        let state = self.lock();
        state.input_waiting || state.input_waiting_for_memory
    }

    /// Whether nothing is held right now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of memory mapped for the backlog right now, spares included.
    pub fn mapped(&self) -> usize {
        let state = self.lock();
        let in_segments = state.segments.iter().map(|s| match &s.store {
            Store::Memory(chunk) => chunk.size(),
            #[cfg(target_os = "linux")]
            Store::Pipe(_) => 0,
        });
        in_segments.chain(state.spare_chunks.iter().map(|c| c.size())).sum()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic on either side ends the run anyway; the state itself stays consistent because
        // every update is completed before the lock is released.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(
        &self,
        condvar: &Condvar,
        state: MutexGuard<'a, State>,
        condition: impl FnMut(&mut State) -> bool,
    ) -> MutexGuard<'a, State> {
        condvar.wait_while(state, condition).unwrap_or_else(PoisonError::into_inner)
    }
}

impl State {
    fn has_surplus_spares(&self) -> bool {
        #[cfg(target_os = "linux")]
        let pipes = self.spare_pipes.len();
        #[cfg(not(target_os = "linux"))]
        let pipes = 0;
        self.spare_chunks.len().max(pipes) > SPARES_WHEN_DRAINED
    }

    fn give_back_spares(&mut self) {
        self.spare_chunks.truncate(SPARES_WHEN_DRAINED);
        #[cfg(target_os = "linux")]
        self.spare_pipes.truncate(SPARES_WHEN_DRAINED);
    }

    /// With nothing buffered and no output under way, keeps only the back segment, rewound to
    /// its beginning: a chunk whose pages are resident and likely in cache, or an empty pipe.
    fn rewind(&mut self) {
        debug_assert_eq!(self.len, 0);
        while self.segments.len() > 1 {
            let segment = self.segments.pop_front().expect("more than one segment");
            self.recycle(segment.store);
        }
        if let Some(segment) = self.segments.front_mut() {
            (segment.start, segment.end) = (0, 0);
        }
    }

    fn recycle(&mut self, store: Store) {
        // Only what nobody else refers to is kept; dropping the last reference unmaps a chunk
        // or closes a pipe. Spares are bounded by the capacity, since each held bytes of it.
        match store {
            Store::Memory(chunk) => {
                if Arc::strong_count(&chunk) == 1 {
                    self.spare_chunks.push(chunk);
                }
            }
            #[cfg(target_os = "linux")]
            Store::Pipe(pipe) => {
                if Arc::strong_count(&pipe) == 1 {
                    self.spare_pipes.push(pipe);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn backlog(capacity: usize) -> Backlog {
        let meter = Arc::new(Meter::new(capacity as u64));
        Backlog::new(capacity, meter, Arc::new(Log::default())).unwrap()
    }

    fn put(backlog: &Backlog, bytes: &[u8]) -> usize {
        let mut vacant = backlog.reserve().unwrap().unwrap();
        let n = bytes.len().min(vacant.as_mut_slice().len());
        vacant.as_mut_slice()[..n].copy_from_slice(&bytes[..n]);
        backlog.commit(n);
        n
    }

    fn pattern(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    /// Waits (for another thread) until `condition` holds; a minute means a hang.
    fn eventually(mut condition: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !condition() {
            assert!(std::time::Instant::now() < deadline, "timed out");
            thread::sleep(Duration::from_millis(1));
        }
    }

    fn take(backlog: &Backlog) -> Option<Vec<u8>> {
        let Front::Memory(filled) = backlog.next()? else { panic!("only memory was put in") };
        let bytes = filled.as_slice().to_vec();
        backlog.consume(bytes.len());
        Some(bytes)
    }

    fn page() -> usize {
        rustix::param::page_size()
    }

    #[test]
    fn bytes_come_out_in_order() {
        let b = backlog(page() + 10);
        let data = pattern(page() + 20);
        assert_eq!(put(&b, &data[..5]), 5);
        assert_eq!(put(&b, &data[5..]), page() + 5, "capacity limits the vacant space");
        assert_eq!(b.len(), page() + 10);
        assert_eq!(take(&b).unwrap(), &data[..page() + 10]);
        b.finish_input(Ok(()));
        assert_eq!(take(&b), None);
        assert!(b.take_input_end().unwrap().is_ok());
    }

    #[test]
    fn a_tiny_buffer_holds_a_page() {
        for asked in [1, 100, page() - 1] {
            let b = backlog(asked);
            assert_eq!(b.capacity(), page());
            assert_eq!(put(&b, &pattern(2 * page())), page(), "-m {asked}");
        }
    }

    #[test]
    fn every_read_is_offered_at_least_a_page() {
        // A chunk's tail shorter than a page is skipped, and a backlog with less than a page
        // of room waits: a packet-mode pipe would discard what does not fit in a read.
        let b = Arc::new(backlog(3 * page()));
        put(&b, &pattern(2 * page() + page() / 2));
        let input = {
            let b = Arc::clone(&b);
            thread::spawn(move || b.reserve().unwrap().unwrap().len)
        };
        eventually(|| b.input_waiting());
        assert_eq!(take(&b).unwrap().len(), 2 * page() + page() / 2);
        assert!(input.join().unwrap() >= page());
    }

    #[test]
    fn spans_chunks_and_gives_memory_back() {
        let b = backlog(3 * MAX_CHUNK);
        let block = vec![7u8; MAX_CHUNK];
        for _ in 0..3 {
            assert_eq!(put(&b, &block), MAX_CHUNK);
        }
        assert_eq!(b.mapped(), 3 * MAX_CHUNK);
        for _ in 0..3 {
            assert_eq!(take(&b).unwrap().len(), MAX_CHUNK);
        }
        // Kept for reuse while the output has not yet found the backlog empty...
        assert_eq!(b.mapped(), 3 * MAX_CHUNK);
        // ...then given back, bar the chunk being filled and a spare.
        b.finish_input(Ok(()));
        assert!(take(&b).is_none());
        assert!(b.mapped() <= (1 + SPARES_WHEN_DRAINED) * MAX_CHUNK, "{}", b.mapped());
    }

    #[test]
    fn rewinds_when_empty() {
        let b = backlog(1 << 20);
        put(&b, b"abc");
        take(&b);
        let vacant = b.reserve().unwrap().unwrap();
        assert_eq!(vacant.offset, 0);
        assert_eq!(vacant.len, 1 << 20);
    }

    #[test]
    fn full_backlog_holds_input_until_output_takes() {
        let b = Arc::new(backlog(page()));
        let data = pattern(2 * page());
        put(&b, &data[..page()]);
        let input = {
            let (b, rest) = (Arc::clone(&b), data[page()..].to_vec());
            thread::spawn(move || put(&b, &rest))
        };
        eventually(|| b.input_waiting());
        assert_eq!(b.len(), page(), "nothing more was taken while full");
        assert_eq!(take(&b).unwrap(), &data[..page()]);
        assert_eq!(input.join().unwrap(), page());
        assert_eq!(take(&b).unwrap(), &data[page()..]);
    }

    #[test]
    fn closed_output_releases_waiting_input() {
        let b = Arc::new(backlog(1));
        put(&b, &pattern(page()));
        let input = {
            let b = Arc::clone(&b);
            thread::spawn(move || b.reserve().unwrap().is_none())
        };
        // Closed only once the input is known to wait, so that the close is what releases it.
        eventually(|| b.input_waiting());
        b.close_output();
        assert!(input.join().unwrap(), "a closed output hands the input no room");
    }

    #[test]
    fn input_error_is_delivered_after_the_data() {
        let b = backlog(page());
        put(&b, b"abc");
        b.finish_input(Err(io::Error::from_raw_os_error(5)));
        assert_eq!(take(&b).unwrap(), b"abc");
        assert_eq!(take(&b), None);
        assert_eq!(b.take_input_end().unwrap().unwrap_err().raw_os_error(), Some(5));
    }
}
