//! The backlog: bytes taken in and not yet passed on, in order, shared by one producer and any
//! number of readers (one per output, one per hash).
//!
//! The producer appends at the back; each reader takes from its own place, at its own pace:
//! nobody waits for anybody except when the backlog is full (the producer waits for the
//! slowest reader) or a reader has taken everything (it waits for data). Everything read is
//! visible to every reader at once, so a short line passes straight through, and memory is
//! held once however many readers there are: a chunk is given back (or kept as a spare) when
//! the slowest reader has passed it.
//!
//! The halves are types that cannot be misused: [`Producer`] is the only way to add, there is
//! one and it is not `Clone`; a [`Vacant`] borrows it mutably, so there is one place to write
//! into at a time; each [`Reader`] has its own cursor, and a [`Filled`] borrows its reader, so
//! its bytes cannot be consumed while they are being written out.
//!
//! The backlog is a FIFO of segments, each covering a range of the stream. A segment's bytes
//! live in a chunk of memory, in one of accel's own pipes, where they were spliced without
//! being copied, or in a window of the spill file (`--spill`). A pipe's bytes can be read
//! once, so pipe segments are only for a backlog with a single reader (one output, no hash).
//! I/O happens without the lock, on byte ranges that cannot overlap:
//!
//! - the producer only writes past the back segment's committed end;
//! - readers only read committed bytes, each from its own cursor;
//! - a segment is removed only once every reader has passed it and it is not the back one
//!   (no input under way in it); its chunk is reused only when nothing refers to it any more.
//!
//! The lock is taken twice per read or write to exchange offsets, never across a read or write
//! of an endpoint: those are the engine's, on what the backlog hands out (memory, a pool pipe,
//! a range of the spill file). It is held across the backlog's own calls: mapping and unmapping
//! chunks, reserving and giving back spill space, and reading back spilled bytes for a block.

mod chunk;
pub mod spill;

use std::collections::VecDeque;
use std::io;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

pub use chunk::MAX_CHUNK;
use chunk::{Chunk, Pages};

use crate::log::{Log, Once};
use crate::meter::{Meter, Tier};
use crate::size::Bytes;
use crate::sys::PoolPipe;
use spill::{FileRange, STEP, SpillFile, WINDOW};

/// Chunks and pool pipes kept once the backlog has drained. While a backlog stands, every
/// drained chunk or pipe is kept for the input to reuse: mapping a fresh chunk means the kernel
/// zeroes it again, which cost a fifth of accel's CPU with a standing backlog. Once the backlog
/// has stayed empty for [`GIVE_BACK_AFTER`], all but this many go back to the kernel.
const SPARES_WHEN_DRAINED: usize = 1;

/// The most input staged in memory at once on its way to the spill file, where it cannot be
/// spliced there.
const STAGING: usize = 1 << 20;

/// How long the backlog must stay empty before its spare memory and pipes are given back.
const GIVE_BACK_AFTER: Duration = Duration::from_secs(1);

/// A full backlog resumes input once 1/RESUME_FRACTION of it is free, or RESUME_MAX bytes.
const RESUME_FRACTION: usize = 16;
const RESUME_MAX: usize = 1 << 20;

/// How the backlog holds each side back, beyond being full or empty: watermarks for tape
/// drives that must stream (`--start-at`, `--resume-at`), and reads of exactly one block
/// (`--input-block-size`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gates {
    /// A reader takes nothing until this many bytes are ahead of it (or the input has ended),
    /// and again each time it has taken everything; 0 for no such wait.
    pub start_at: usize,
    /// Once the backlog was full, the producer waits until it holds at most this much;
    /// `None` for the default (a sixteenth of the buffer drained, up to 1 MiB).
    pub resume_at: Option<usize>,
    /// Each read is offered exactly this much room; `None` for whatever is free (at least a
    /// page).
    pub read_block: Option<usize>,
    /// An output takes exactly this much at a time (`--block-size`), until the input has
    /// ended; `None` for whatever is there.
    pub write_block: Option<usize>,
}

impl Gates {
    /// The least room a read is offered: a read block, and never less than a page.
    fn min_read(&self) -> usize {
        self.read_block.unwrap_or(0).max(rustix::param::page_size())
    }

    /// The bytes an output waits for before it writes: a block, else one.
    fn min_write(&self) -> usize {
        self.write_block.unwrap_or(1)
    }
}

/// Makes a backlog holding at most `capacity` bytes (raised as [`capacity_for`] says) for
/// `readers` readers, gated by `gates`, reporting to `meter`: its producing half and one
/// reading half per reader, in the meter's order.
///
/// Maps its first chunk now (address space only: nothing is touched), so that a backlog
/// always has memory to read into when it is empty, even once the kernel refuses more. That
/// chunk has small pages: a stream that never backs up touches only the pages its reads
/// pass through (a huge page made `head -c 1M | accel -m 1G` resident 2 MiB more); the
/// chunks a standing backlog adds have huge pages, which fault in six times cheaper.
pub fn backlog(
    capacity: usize,
    readers: usize,
    gates: Gates,
    spill: Option<Arc<SpillFile>>,
    meter: Arc<Meter>,
    log: Arc<Log>,
) -> io::Result<(Producer, Vec<Reader>)> {
    let page = rustix::param::page_size();
    let min_read = gates.min_read();
    let capacity = capacity_for(capacity, &gates);
    let chunk_size = capacity.min(MAX_CHUNK).max(min_read).next_multiple_of(page);
    let state = State {
        spare_chunks: vec![Arc::new(Chunk::new(chunk_size, Pages::Small)?)],
        cursors: vec![Some(0); readers],
        kept: vec![None; readers],
        furthest: vec![0; readers],
        redirected: vec![None; readers],
        started: vec![false; readers],
        readers_left: readers,
        ..State::default()
    };
    let default_gap = (capacity / RESUME_FRACTION).clamp(min_read, RESUME_MAX.max(min_read));
    let resume_gap = match gates.resume_at {
        Some(level) => (capacity - level.min(capacity - min_read)).max(min_read),
        None => default_gap,
    };
    // The producer resumes at the latest once less than an output block is held: the slowest
    // output cannot drain the buffer further before more comes. (At least `min_read`, since
    // the capacity holds a block and a read.)
    let resume_gap = resume_gap.min(capacity - (gates.min_write() - 1));
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        has_data: Condvar::new(),
        has_room: Condvar::new(),
        capacity,
        min_read,
        resume_gap,
        start_at: gates.start_at.min(capacity),
        read_block: gates.read_block,
        spill,
        chunk_size,
        meter,
        log,
        memory_refused: Once::default(),
        spill_full: Once::default(),
    });
    let readers = (0..readers).map(|index| Reader { shared: Arc::clone(&shared), index });
    Ok((Producer { shared: Arc::clone(&shared), staging: Vec::new() }, readers.collect()))
}

/// The capacity a backlog asked for `asked` bytes has, under `gates`: at least a read (a
/// page, or an input block), the least the producer takes room for; and at least an output
/// block and a read less a byte, so that the producer, held only when less than a read's room
/// is free, has always made a whole block for the slowest output by then.
///
/// Raising `-m` by an input block is not for here: the caller refuses that (a read of a
/// page is accel's own minimum, and raising by less than it is).
pub fn capacity_for(asked: usize, gates: &Gates) -> usize {
    let min_read = gates.min_read();
    asked.max(min_read).max(gates.min_write() + min_read - 1)
}

/// What the two halves share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when data arrives or input ends; readers wait on it.
    has_data: Condvar,
    /// Signalled when room appears, a chunk comes free, or readers leave; the producer waits
    /// on it.
    has_room: Condvar,
    capacity: usize,
    /// The least room the input is ever offered: a page. A packet-mode pipe discards what
    /// does not fit in a read, and its packets are up to a page long; and moving less than a
    /// page per thread handoff would make tiny buffers crawl.
    min_read: usize,
    /// A full backlog takes input again once this much room has been made, not at the first
    /// byte: with a consumer that reads 64 KiB at a time, waking the input for every read
    /// would cost a futex wakeup and a small read per 64 KiB. `--resume-at` sets it.
    resume_gap: usize,
    /// See [`Gates::start_at`].
    start_at: usize,
    /// See [`Gates::read_block`].
    read_block: Option<usize>,
    /// Where input goes once memory is full (`--spill`).
    spill: Option<Arc<SpillFile>>,
    chunk_size: usize,
    meter: Arc<Meter>,
    log: Arc<Log>,
    /// The kernel refused memory for a chunk at least once; said once.
    memory_refused: Once,
    /// The spill's disk (or budget) was full at least once; said once.
    spill_full: Once,
}

#[derive(Debug, Default)]
struct State {
    segments: VecDeque<Segment>,
    /// Stream offset one past the last committed byte.
    produced: u64,
    /// Each reader's stream offset; `None` once it has left.
    cursors: Vec<Option<u64>>,
    /// For a reader that keeps what it passed until told otherwise ([`Reader::keep`]), the
    /// first byte it may still need: the backlog holds everything from there.
    kept: Vec<Option<u64>>,
    /// Each reader's furthest offset: bytes taken again after [`Keep::go_on_from`] are not
    /// counted out twice.
    furthest: Vec<u64>,
    /// What a reader's [`Keep`] asks of it at its next look for data ([`Redirect`]).
    redirected: Vec<Option<Redirect>>,
    /// Each reader has passed its start watermark since it last took everything.
    started: Vec<bool>,
    /// The smallest cursor (or kept offset) of the readers still there (`produced` when none
    /// is): every byte before it has been taken by all, and nobody needs it again.
    released: u64,
    /// Readers still there.
    readers_left: usize,
    /// The input has ended (or failed): readers pass on what is there, then stop.
    input_ended: bool,
    /// The run is over: nobody waits for anything any more (see [`Closer`]).
    closed: bool,
    spare_chunks: Vec<Arc<Chunk>>,
    spare_pipes: Vec<Arc<PoolPipe>>,
    /// The producer waits for room, or for a chunk to come free.
    producer_waiting: Option<Shortage>,
    /// Readers waiting for data.
    readers_waiting: usize,
    /// The producer lets input gather ([`Producer::gather`]) until a reader waits for data.
    producer_gathering: bool,
    /// Bytes held in memory and pool pipes (against `-m`).
    held_memory: usize,
    /// Bytes held in the spill file.
    held_spill: u64,
    /// The spill file's next window starts here.
    spill_tail: u64,
    /// The spill's disk or budget said no: spill no more until the spill has drained.
    spill_full: bool,
    /// The producer holds a [`SpillVacant`]: the back spill window is in use.
    spill_vacant: bool,
    /// Writing the spill file failed: it takes nothing more (what it holds is still read).
    spill_failed: bool,
}

/// What a reader's [`Keep`] asks of it, from another thread, at its next look for data
/// (even while it waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Redirect {
    /// Go on from this offset (a connection came back where the receiver says).
    GoOnFrom(u64),
    /// Take nothing more: what the reader writes to is gone for good.
    Stop,
}

/// What the producer is short of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shortage {
    /// Room: the backlog is full.
    Room,
    /// Memory: the kernel refused a new chunk.
    Memory,
}

/// Where a segment's bytes are kept.
#[derive(Debug, Clone)]
enum Store {
    Memory(Arc<Chunk>),
    Pipe(Arc<PoolPipe>),
    /// In the spill file, from offset `at`, in a window of `reserved` bytes.
    Spill {
        at: u64,
        reserved: u64,
    },
}

/// A range of the stream, `start..start + len`, kept in one store (from the beginning of a
/// chunk, in a pipe, or in a window of the spill file).
#[derive(Debug)]
struct Segment {
    store: Store,
    start: u64,
    len: usize,
}

impl Segment {
    fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    /// Free bytes at the end of a memory segment; 0 for a pipe or the spill.
    fn memory_room(&self) -> usize {
        match &self.store {
            Store::Memory(chunk) => chunk.size() - self.len,
            Store::Pipe(_) | Store::Spill { .. } => 0,
        }
    }

    /// Reserved bytes left at the end of a spill segment; 0 for memory or a pipe.
    fn spill_room(&self) -> usize {
        match self.store {
            Store::Spill { reserved, .. } => (reserved - self.len as u64) as usize,
            _ => 0,
        }
    }

    fn is_spill(&self) -> bool {
        matches!(self.store, Store::Spill { .. })
    }
}

/// The backlog as the producer finds it after waiting for room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    /// Bytes that may still be added.
    pub free: usize,
    /// Every reader has taken everything: nothing is held and no output is under way.
    pub empty: bool,
}

/// The producing half: the only way to add to the backlog.
#[derive(Debug)]
pub struct Producer {
    shared: Arc<Shared>,
    /// Where input bound for the spill is read first, when it cannot be spliced there
    /// ([`SpillVacant::staging`]).
    staging: Vec<u8>,
}

/// Ends every wait in the backlog when the run is over, whoever holds the halves.
#[derive(Debug, Clone)]
pub struct Closer {
    shared: Arc<Shared>,
}

impl Closer {
    /// From now on the producer gets no room and readers get no more bytes; whoever waits
    /// wakes up.
    pub fn close(&self) {
        let mut state = self.shared.lock();
        state.closed = true;
        self.shared.has_data.notify_all();
        self.shared.has_room.notify_all();
    }
}

/// How writing the spill file failed.
enum SpillFailure {
    /// A write into it (the bytes read are still in memory).
    Write(io::Error),
    /// Writing its pages back to disk (bytes spilled may be lost).
    WriteBack(io::Error),
}

/// Where the next bytes go: memory to read into, or (memory being full) the spill file.
#[derive(Debug)]
pub enum Space<'a> {
    /// Free memory at the back of the backlog.
    Memory(Vacant<'a>),
    /// Reserved room at the end of the spill file.
    Spill(SpillVacant<'a>),
}

/// Free memory at the back of the backlog, to read into and then [`commit`](Vacant::commit).
#[derive(Debug)]
pub struct Vacant<'a> {
    producer: &'a mut Producer,
    chunk: Arc<Chunk>,
    offset: usize,
    len: usize,
}

/// Reserved room at the end of the spill file, for input: spliced into its
/// [`room`](SpillVacant::room) and [`commit`](SpillVacant::commit)ted, or read into its
/// [`staging`](SpillVacant::staging) memory and [`commit_staged`](SpillVacant::commit_staged).
#[derive(Debug)]
pub struct SpillVacant<'a> {
    producer: &'a mut Producer,
    file: Arc<SpillFile>,
    at: u64,
    len: usize,
}

/// The back spill window is the producer's no more: a drained spill may go.
impl Drop for SpillVacant<'_> {
    fn drop(&mut self) {
        let shared = &self.producer.shared;
        let mut state = shared.lock();
        state.spill_vacant = false;
        shared.release(&mut state);
    }
}

impl SpillVacant<'_> {
    /// The reserved room in the spill file, to splice input into.
    pub fn room(&self) -> FileRange<'_> {
        self.file.range(self.at, self.len)
    }

    /// Memory to read up to `most` bytes of input into, where it cannot be spliced into the
    /// spill: at most what is reserved, and 1 MiB.
    pub fn staging(&mut self, most: usize) -> &mut [u8] {
        let staging = &mut self.producer.staging;
        staging.resize(most.min(self.len).min(STAGING), 0);
        staging
    }

    /// Makes the first `n` bytes of the [`room`](SpillVacant::room), spliced there, visible to
    /// every reader (none at end of input).
    pub fn commit(self, n: usize) {
        assert!(n <= self.len, "committed more than was reserved");
        if n > 0 {
            self.producer.commit(n, Tier::Disk);
        }
        // Found by a reader: spill no more.
        if let Some(error) = self.file.writeback_failure() {
            self.producer.shared.spill_failed(&self.file, &SpillFailure::WriteBack(error));
        }
    }

    /// Writes the first `n` bytes of the [`staging`](SpillVacant::staging) memory into the
    /// spill, and makes them visible to every reader (none at end of input).
    ///
    /// When the spill file cannot be written (EIO), spilling stops for the rest of the run
    /// (the user is told once) and the bytes go to memory instead, when there is room:
    /// nothing read is lost. Fails only as [`Producer::reserve`] does, finding that memory.
    pub fn commit_staged(self, n: usize) -> io::Result<()> {
        match self.file.write_at(&self.producer.staging[..n], self.at) {
            Ok(()) => {
                self.commit(n);
                Ok(())
            }
            Err(error) => {
                self.producer.shared.spill_failed(&self.file, &SpillFailure::Write(error));
                let bytes = std::mem::take(&mut self.producer.staging);
                let queued = self.producer.queue(&bytes[..n]);
                self.producer.staging = bytes;
                queued
            }
        }
    }

    /// Bytes reserved here.
    pub fn len(&self) -> usize {
        self.len
    }
}

/// One reading half: an output's or a hash's place in the stream.
#[derive(Debug)]
pub struct Reader {
    shared: Arc<Shared>,
    index: usize,
}

/// What a reader finds at its place in the backlog.
#[derive(Debug)]
pub enum Front<'a> {
    /// Bytes in memory.
    Memory(Filled<'a>),
    /// `len` bytes waiting in one of accel's pipes (only with a single reader).
    Pipe(Arc<PoolPipe>, usize),
    /// Bytes in the spill file.
    Spill(SpillRange),
}

/// Spilled bytes at a reader's place: `len` bytes of `file` from offset `at`.
#[derive(Debug, Clone)]
pub struct SpillRange {
    file: Arc<SpillFile>,
    at: u64,
    len: usize,
}

impl SpillRange {
    /// How many bytes there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The directory spilled into, for messages.
    pub fn dir(&self) -> &Path {
        self.file.dir()
    }

    /// Where the first of these bytes, at most `most`, may be read back from, to splice them
    /// on: all of them, or those before the point from which a failed write-back lost them;
    /// the error when they begin past it.
    pub fn readable(&self, most: usize) -> io::Result<FileRange<'_>> {
        let len = self.file.readable(self.at, most.min(self.len))?;
        Ok(self.file.range(self.at, len))
    }

    /// Reads the first `buf.len()` of these bytes back into `buf`: all of them, or an error
    /// (the disk, or a write-back that failed: never bytes other than those committed).
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        assert!(buf.len() <= self.len, "read back more than was spilled here");
        self.file.read_at(buf, self.at)
    }
}

/// Bytes in memory at a reader's place, to write out and then
/// [`consume`](Reader::consume).
#[derive(Debug)]
pub struct Filled<'a> {
    chunk: Arc<Chunk>,
    offset: usize,
    len: usize,
    _reader: PhantomData<&'a mut Reader>,
}

impl Vacant<'_> {
    /// The free bytes, to read into; at least a page.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: a Vacant covers bytes past the back segment's committed end, which no Filled
        // covers, and it borrows the one Producer, so no other Vacant exists; the Arc keeps
        // the mapping alive. Its bytes are initialised: zeros from the kernel in a fresh chunk,
        // earlier bytes of the stream in a reused one (any byte is a valid u8).
        unsafe { std::slice::from_raw_parts_mut(self.chunk.at(self.offset), self.len) }
    }

    /// Makes the first `n` bytes visible to every reader.
    pub fn commit(self, n: usize) {
        assert!(n <= self.len, "committed more than was vacant");
        self.producer.commit(n, Tier::Memory);
    }
}

impl Filled<'_> {
    /// The bytes, to write out.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: committed bytes, which the producer never writes again, of a chunk that is
        // reused only when nothing refers to it; the Arc keeps the mapping alive.
        unsafe { std::slice::from_raw_parts(self.chunk.at(self.offset), self.len) }
    }
}

impl Shared {
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

    /// Bytes held: committed and not yet taken by every reader, in memory and spilled.
    fn held(state: &State) -> usize {
        (state.produced - state.released) as usize
    }

    /// Room in memory (and pool pipes) against `-m`.
    fn memory_free(&self, state: &State) -> usize {
        self.capacity.saturating_sub(state.held_memory)
    }

    /// Whether input may go to the spill file now.
    fn can_spill(&self, state: &State) -> bool {
        self.spill.is_some() && !state.spill_full && !state.spill_failed
    }

    /// Writing the spill file failed: no more spilling in this run, and the user is told
    /// once, with what it means for the bytes spilled.
    fn spill_failed(&self, spill: &SpillFile, failure: &SpillFailure) {
        let mut state = self.lock();
        if !state.spill_failed {
            state.spill_failed = true;
            let (what, error, outcome) = match failure {
                SpillFailure::Write(error) => {
                    ("write to", error, "the producer waits while memory drains (nothing is lost)")
                }
                SpillFailure::WriteBack(error) => (
                    "write back to",
                    error,
                    "and what it holds that is not on disk cannot be read back",
                ),
            };
            self.log.warn(format_args!(
                "{what} the spill in {}: {}; spilling no more, {outcome}",
                spill.dir().display(),
                crate::words::describe(error)
            ));
        }
    }

    /// Whether input goes to the spill now: memory is full, or something is spilled already
    /// (new bytes join the spill until it has drained, which keeps memory for the oldest).
    fn spilling(&self, state: &State) -> bool {
        self.can_spill(state)
            && (self.memory_free(state) < self.min_read
                || state.segments.iter().any(Segment::is_spill))
    }

    /// Tells the meter what is held where.
    fn publish(&self, state: &State) {
        self.meter.held(state.held_memory as u64, state.held_spill);
    }
}

impl Producer {
    /// The meter this backlog reports to.
    pub fn meter(&self) -> &Meter {
        &self.shared.meter
    }

    /// The exact size of every read (`--input-block-size`), if set.
    pub fn read_block(&self) -> Option<usize> {
        self.shared.read_block
    }

    /// A handle that ends every wait when the run is over.
    pub fn closer(&self) -> Closer {
        Closer { shared: Arc::clone(&self.shared) }
    }

    /// Bytes ahead of reader `reader` (`None` once it has left).
    pub fn ahead(&self, reader: usize) -> Option<usize> {
        let state = self.shared.lock();
        state.cursors[reader].map(|cursor| (state.produced - cursor) as usize)
    }

    /// Lets input gather in its pipe for at most `pause`, so that the next read takes many
    /// pieces at once; the run's end ends the pause, and, `while_readers_have_bytes`, so does a
    /// reader that runs out (its consumer may soon wait). Whether it paused: not once the run
    /// is over, nor, `while_readers_have_bytes`, when a reader waits already or nothing is
    /// held.
    pub fn gather(&mut self, pause: Duration, while_readers_have_bytes: bool) -> bool {
        let shared = &self.shared;
        let state = shared.lock();
        let waiting = |s: &State| while_readers_have_bytes && s.readers_waiting > 0;
        let empty = while_readers_have_bytes && Shared::held(&state) == 0;
        if !state.open() || waiting(&state) || empty {
            return false;
        }
        let mut state = state;
        state.producer_gathering = while_readers_have_bytes;
        let (mut state, _) = shared
            .has_room
            .wait_timeout_while(state, pause, |s| s.open() && !waiting(s))
            .unwrap_or_else(PoisonError::into_inner);
        state.producer_gathering = false;
        true
    }

    /// Waits until there is room for a read of at least a page; `None` once no reader is left
    /// or the run is over.
    pub fn wait_for_room(&mut self) -> Option<Room> {
        let state = self.shared.room_locked();
        state.open().then(|| {
            let held = Shared::held(&state);
            let free =
                if self.shared.spilling(&state) { 0 } else { self.shared.memory_free(&state) };
            Room { free, empty: held == 0 }
        })
    }

    /// Waits for room, then says where the next bytes go: free memory to read into (at least
    /// a page), or, memory being full, reserved room in the spill file (`--spill`); `None`
    /// once no reader is left. Starts a memory segment if the back one is full or not memory.
    ///
    /// When the kernel refuses memory for a new chunk (a memory limit below the buffer size),
    /// the backlog counts as full: the input spills, or the producer waits until a reader frees
    /// a chunk, and the user is told once. Fails only when no memory can be had with nothing
    /// buffered, or the spill file fails.
    pub fn reserve(&mut self) -> io::Result<Option<Space<'_>>> {
        let shared = Arc::clone(&self.shared);
        let mut state = shared.room_locked();
        loop {
            if !state.open() {
                return Ok(None);
            }
            if Shared::held(&state) == 0 {
                state.rewind(shared.spill.as_deref());
            }
            if shared.spilling(&state) {
                if state.segments.back().map_or(0, Segment::spill_room) >= shared.min_read {
                    break;
                }
                shared.open_window(&mut state)?;
                continue;
            }
            if shared.memory_free(&state) < shared.min_read {
                state = shared.room_locked_again(state);
                continue;
            }
            if state.segments.back().map_or(0, Segment::memory_room) >= shared.min_read {
                break;
            }
            let chunk = match state.spare_chunks.pop() {
                Some(chunk) => chunk,
                None => match Chunk::new(shared.chunk_size, Pages::Huge) {
                    Ok(chunk) => Arc::new(chunk),
                    Err(error) if Shared::held(&state) == 0 => return Err(error),
                    // Memory refused: the spill takes over, as if memory were full.
                    Err(_) if shared.can_spill(&state) => {
                        shared.open_window(&mut state)?;
                        continue;
                    }
                    Err(error) => {
                        state = shared.wait_for_memory(state, &error);
                        continue;
                    }
                },
            };
            let start = state.produced;
            state.segments.push_back(Segment { store: Store::Memory(chunk), start, len: 0 });
        }
        let back = state.segments.back().expect("a back segment");
        let most = shared.read_block.unwrap_or(usize::MAX);
        let space = match &back.store {
            Store::Memory(chunk) => {
                let (chunk, offset) = (Arc::clone(chunk), back.len);
                let len = shared.memory_free(&state).min(chunk.size() - offset).min(most);
                drop(state);
                Space::Memory(Vacant { producer: self, chunk, offset, len })
            }
            Store::Spill { at, .. } => {
                let (at, len) = (at + back.len as u64, back.spill_room().min(most));
                let file = Arc::clone(shared.spill.as_ref().expect("a spill file"));
                state.spill_vacant = true;
                drop(state);
                Space::Spill(SpillVacant { producer: self, file, at, len })
            }
            Store::Pipe(_) => unreachable!("room found in memory or the spill"),
        };
        Ok(Some(space))
    }

    /// Adds `bytes` read already to the backlog, waiting for room as a read would; dropped
    /// only when no reader is left to take them.
    pub fn queue(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let n = match self.reserve()? {
                None => break,
                Some(Space::Memory(mut vacant)) => {
                    let room = vacant.as_mut_slice();
                    let n = room.len().min(bytes.len());
                    room[..n].copy_from_slice(&bytes[..n]);
                    vacant.commit(n);
                    n
                }
                Some(Space::Spill(mut vacant)) => {
                    let room = vacant.staging(bytes.len());
                    let n = room.len();
                    room.copy_from_slice(&bytes[..n]);
                    vacant.commit_staged(n)?;
                    n
                }
            };
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// The pipe of the back segment, to splice more into; `None` if the back is not a pipe.
    pub fn back_pipe(&mut self) -> Option<Arc<PoolPipe>> {
        match &self.shared.lock().segments.back()?.store {
            Store::Pipe(pipe) => Some(Arc::clone(pipe)),
            Store::Memory(_) | Store::Spill { .. } => None,
        }
    }

    /// Bytes held in the back segment when it is a pipe (what that pipe holds now).
    pub fn back_pipe_held(&mut self) -> usize {
        let state = self.shared.lock();
        let Some(back) = state.segments.back() else { return 0 };
        let taken = state.released.clamp(back.start, back.end());
        (back.end() - taken) as usize
    }

    /// Starts a new segment in `pipe`, which must be empty; what is spliced into it next is
    /// [`commit_pipe`](Producer::commit_pipe)ted there.
    ///
    /// # Panics
    /// With more than one reader: a pipe's bytes can be read only once.
    pub fn push_pipe(&mut self, pipe: Arc<PoolPipe>) {
        let mut state = self.shared.lock();
        assert_eq!(state.cursors.len(), 1, "pipe segments need a single reader");
        let start = state.produced;
        state.segments.push_back(Segment { store: Store::Pipe(pipe), start, len: 0 });
    }

    /// Makes `n` bytes spliced into the back pipe visible to the reader.
    pub fn commit_pipe(&mut self, n: usize) {
        self.commit(n, Tier::Pipe);
    }

    /// An empty pool pipe kept from earlier, if any.
    pub fn spare_pipe(&mut self) -> Option<Arc<PoolPipe>> {
        self.shared.lock().spare_pipes.pop()
    }

    /// Pool pipes open right now: in segments and spare.
    pub fn pipes_open(&mut self) -> usize {
        let state = self.shared.lock();
        let in_use = state.segments.iter().filter(|s| matches!(s.store, Store::Pipe(_))).count();
        in_use + state.spare_pipes.len()
    }

    fn commit(&mut self, n: usize, tier: Tier) {
        let shared = &self.shared;
        let mut state = shared.lock();
        let back = state.segments.back_mut().expect("commit follows reserve or push_pipe");
        back.len += n;
        let mut full_window = None;
        match back.store {
            Store::Memory(ref chunk) => {
                assert!(back.len <= chunk.size(), "committed past the end of a chunk");
            }
            Store::Spill { at, reserved } => {
                assert!(back.len as u64 <= reserved, "committed past a spill window");
                if back.len as u64 == WINDOW {
                    full_window = Some(at);
                }
            }
            Store::Pipe(_) => {}
        }
        if tier == Tier::Disk {
            state.held_spill += n as u64;
        } else {
            state.held_memory += n;
        }
        state.produced += n as u64;
        shared.meter.add_in(n, Shared::held(&state), tier);
        shared.publish(&state);
        if state.readers_waiting > 0 {
            shared.has_data.notify_all();
        }
        drop(state);
        if let (Some(at), Some(spill)) = (full_window, &shared.spill)
            && let Err(error) = spill.window_full(at)
        {
            shared.spill_failed(spill, &SpillFailure::WriteBack(error));
        }
    }
}

impl Shared {
    /// Locks the state once there is room for a read of at least a page (in memory or the
    /// spill), or no reader is left.
    fn room_locked(&self) -> MutexGuard<'_, State> {
        self.room_locked_again(self.lock())
    }

    /// As [`room_locked`](Shared::room_locked), with the lock already held.
    fn room_locked_again<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let full = |s: &State| self.memory_free(s) < self.min_read && !self.can_spill(s);
        if full(&state) && state.open() {
            self.meter.input_held(true);
            state.producer_waiting = Some(Shortage::Room);
            // As full as it gets: a reader held by its start watermark goes now.
            self.has_data.notify_all();
            state = self.wait(&self.has_room, state, |s| {
                self.memory_free(s) < self.resume_gap && !self.can_spill(s) && s.open()
            });
            state.producer_waiting = None;
            self.meter.input_held(false);
        }
        state
    }

    /// Reserves the next window of the spill file and starts a spill segment in it; where the
    /// disk (or `--spill-size`) says no, spills no more until the spill has drained, and says
    /// so once.
    fn open_window(&self, state: &mut State) -> io::Result<()> {
        let spill = self.spill.as_ref().expect("spilling needs a spill file");
        // The back window grows a step at a time, so that little is reserved ahead of what
        // is read: a reservation is held while the input waits for data.
        let grows = match state.segments.back() {
            Some(Segment { store: Store::Spill { at, reserved }, .. }) if *reserved < WINDOW => {
                Some(at + reserved)
            }
            _ => None,
        };
        let at = grows.unwrap_or(state.spill_tail);
        if spill.reserve(at, STEP, state.held_spill)? {
            match state.segments.back_mut() {
                Some(Segment { store: Store::Spill { reserved, .. }, .. }) if grows.is_some() => {
                    *reserved += STEP;
                }
                _ => {
                    state.spill_tail += WINDOW;
                    let start = state.produced;
                    let store = Store::Spill { at, reserved: STEP };
                    state.segments.push_back(Segment { store, start, len: 0 });
                }
            }
        } else {
            state.spill_full = true;
            if self.spill_full.first() {
                self.log.warn(format_args!(
                    "the spill in {} is full with {} on disk; the producer waits while it drains",
                    spill.dir().display(),
                    Bytes(state.held_spill)
                ));
            }
        }
        Ok(())
    }

    /// Holds the producer, as if the backlog were full, until a chunk comes free or the
    /// backlog has drained; says why, once.
    fn wait_for_memory<'a>(
        &self,
        mut state: MutexGuard<'a, State>,
        error: &io::Error,
    ) -> MutexGuard<'a, State> {
        if self.memory_refused.first() {
            self.log.warn(format_args!(
                "memory refused with {} buffered ({}); the producer waits while it drains",
                Bytes(Shared::held(&state) as u64),
                crate::words::describe(error)
            ));
        }
        self.meter.input_held(true);
        state.producer_waiting = Some(Shortage::Memory);
        self.has_data.notify_all();
        state = self.wait(&self.has_room, state, |s| {
            s.spare_chunks.is_empty() && Shared::held(s) > 0 && s.open()
        });
        state.producer_waiting = None;
        self.meter.input_held(false);
        state
    }
}

/// The input has ended, or failed: readers pass on what is there, then stop. Whatever the
/// producer was doing, dropping it says so.
impl Drop for Producer {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.input_ended = true;
        self.shared.has_data.notify_all();
    }
}

impl Reader {
    /// This reader's place in the meter's order.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The meter this backlog reports to.
    pub fn meter(&self) -> &Meter {
        &self.shared.meter
    }

    /// The directory spilled into, if any (`--spill`).
    pub fn spill_dir(&self) -> Option<std::path::PathBuf> {
        self.shared.spill.as_ref().map(|spill| spill.dir().to_owned())
    }

    /// Waits for data, then says where the bytes at this reader's place are; `None` once
    /// input has ended and this reader has taken everything, or the run is over.
    pub fn front(&mut self) -> Option<Front<'_>> {
        self.front_of_at_least(1)
    }

    /// As [`front`](Reader::front), but waits until at least `min` bytes are ahead (a whole
    /// output block), unless the input has ended, or memory was refused with less held (the
    /// producer waits for this reader to free a chunk: see [`at_end`](Reader::at_end)). The
    /// front itself may be shorter, where the bytes span segments:
    /// [`copy_out`](Reader::copy_out) gathers them.
    pub fn front_of_at_least(&mut self, min: usize) -> Option<Front<'_>> {
        let shared = &self.shared;
        let mut state = shared.lock();
        loop {
            if state.closed {
                return None;
            }
            match state.redirected[self.index].take() {
                Some(Redirect::Stop) => {
                    state.redirected[self.index] = Some(Redirect::Stop);
                    return None;
                }
                Some(Redirect::GoOnFrom(to)) => {
                    // Checked by Keep::go_on_from: a kept byte, or one read.
                    state.cursors[self.index] = Some(to);
                    self.shared.count_out(&mut state, self.index, to);
                }
                None => {}
            }
            let cursor = state.cursors[self.index].expect("a reader still there");
            let ahead = (state.produced - cursor) as usize;
            if ahead >= shared.start_at.max(1)
                || state.input_ended
                || state.producer_waiting.is_some()
            {
                // Past the watermark, or nothing more can come (the input has ended, or the
                // backlog is as full as it gets).
                state.started[self.index] = true;
            }
            let gate_open = state.started[self.index] || shared.start_at == 0;
            let no_more = state.input_ended || state.producer_waiting == Some(Shortage::Memory);
            if ahead > 0 && gate_open && (ahead >= min || no_more) {
                let at = state.segments.partition_point(|s| s.end() <= cursor);
                let segment = &state.segments[at];
                let len = (segment.end() - cursor) as usize;
                return Some(match &segment.store {
                    Store::Memory(chunk) => Front::Memory(Filled {
                        chunk: Arc::clone(chunk),
                        offset: (cursor - segment.start) as usize,
                        len,
                        _reader: PhantomData,
                    }),
                    Store::Pipe(pipe) => Front::Pipe(Arc::clone(pipe), len),
                    Store::Spill { at, .. } => Front::Spill(SpillRange {
                        file: Arc::clone(shared.spill.as_ref().expect("a spill file")),
                        at: at + (cursor - segment.start),
                        len,
                    }),
                });
            }
            if state.input_ended {
                state.give_back_spares();
                return None;
            }
            shared.meter.reader_starved(self.index, true);
            state.readers_waiting += 1;
            if state.producer_gathering {
                // This reader's consumer may soon wait: the input is read now.
                shared.has_room.notify_all();
            }
            // Enough for this reader: a byte, a block, or its start watermark.
            let wanted = if gate_open { min } else { shared.start_at.max(min) };
            let nothing_new = |s: &mut State| {
                let held = !gate_open && s.producer_waiting.is_some();
                // Memory refused: what is there goes as a short block (with nothing there,
                // the producer is let go: it waits only while something is held).
                let ahead = (s.produced - cursor) as usize;
                let short = s.producer_waiting == Some(Shortage::Memory) && ahead > 0;
                let redirected = s.redirected[self.index].is_some();
                ahead < wanted && !s.input_ended && !s.closed && !held && !short && !redirected
            };
            if state.has_surplus_spares() && state.released == state.produced {
                // Drained. If it stays so, what the backlog grew to is not needed: give it
                // back. A backlog that only touched empty takes in more at once, and keeps it.
                let (guard, waited) = shared
                    .has_data
                    .wait_timeout_while(state, GIVE_BACK_AFTER, nothing_new)
                    .unwrap_or_else(PoisonError::into_inner);
                state = guard;
                if waited.timed_out() && state.released == state.produced {
                    state.give_back_spares();
                }
            }
            state = shared.wait(&shared.has_data, state, nothing_new);
            state.readers_waiting -= 1;
            shared.meter.reader_starved(self.index, false);
        }
    }

    /// Whether the `n` bytes at this reader's place are the last there will be: the input has
    /// ended and they are all it read. (A short output block that is not the last was cut
    /// because memory was refused.)
    pub fn at_end(&self, n: usize) -> bool {
        let state = self.shared.lock();
        let cursor = state.cursors[self.index].expect("a reader still there");
        state.input_ended && cursor + n as u64 == state.produced
    }

    /// Lets small pieces gather: when fewer than `most` bytes are ahead of this reader and
    /// more can come (the input has not ended, the backlog is not full), sleeps until `until`.
    /// A sleep, not a wait on the producer: the producer would otherwise wake this reader
    /// for every piece it adds, which is the cost gathering is there to save.
    pub fn gather(&self, most: usize, until: Instant) {
        let more_can_come = {
            let state = self.shared.lock();
            let cursor = state.cursors[self.index].expect("a reader still there");
            ((state.produced - cursor) as usize) < most
                && !state.input_ended
                && !state.closed
                && state.producer_waiting.is_none()
        };
        if more_can_come {
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
        }
    }

    /// Copies the bytes at this reader's place into `out`, across segments, without taking
    /// them; how many there were (less than `out.len()` at the end of what was read). For
    /// output blocks that span chunks; never for a backlog with pipes. Fails only when the
    /// spill file cannot be read.
    pub fn copy_out(&self, out: &mut [u8]) -> io::Result<usize> {
        let state = self.shared.lock();
        let mut at = state.cursors[self.index].expect("a reader still there");
        let mut copied = 0;
        let first = state.segments.partition_point(|s| s.end() <= at);
        for segment in state.segments.range(first..) {
            let offset = (at - segment.start) as usize;
            let n = (segment.len - offset).min(out.len() - copied);
            match &segment.store {
                Store::Memory(chunk) => {
                    // SAFETY: committed bytes of a chunk that cannot be reused while this
                    // reader has not passed them (it holds the backlog back), read under the
                    // lock.
                    let bytes = unsafe { std::slice::from_raw_parts(chunk.at(offset), n) };
                    out[copied..copied + n].copy_from_slice(bytes);
                }
                Store::Spill { at: file_at, .. } => {
                    let spill = self.shared.spill.as_ref().expect("a spill file");
                    spill.read_at(&mut out[copied..copied + n], file_at + offset as u64)?;
                }
                Store::Pipe(_) => unreachable!("blocks are written from memory or the spill"),
            }
            copied += n;
            at += n as u64;
            if copied == out.len() {
                break;
            }
        }
        Ok(copied)
    }

    /// Keeps every byte this reader passes from now on, until its [`Keep`] says which are
    /// needed no more: a network output's bytes, until its receiver confirms them, so that a
    /// dropped connection resumes from the backlog without a copy. Kept bytes count against
    /// the buffer's size like any other.
    pub fn keep(&self) -> Keep {
        let mut state = self.shared.lock();
        state.kept[self.index] = state.cursors[self.index];
        Keep { shared: Arc::clone(&self.shared), index: self.index }
    }

    /// Moves this reader's place past `n` bytes: they were written (or hashed).
    pub fn consume(&mut self, n: usize) {
        let shared = &self.shared;
        let mut state = shared.lock();
        let cursor = state.cursors[self.index].as_mut().expect("a reader still there");
        *cursor += n as u64;
        let cursor = *cursor;
        assert!(cursor <= state.produced, "consumed more than was committed");
        if cursor == state.produced {
            // Run empty: the start watermark holds this reader back again.
            state.started[self.index] = false;
        }
        shared.count_out(&mut state, self.index, cursor);
    }
}

impl Shared {
    /// Reader `index` is at `cursor` now: counts out what it had never passed, and lets go
    /// of what nobody needs.
    fn count_out(&self, state: &mut State, index: usize, cursor: u64) {
        let furthest = &mut state.furthest[index];
        if cursor > *furthest {
            self.meter.add_out(index, (cursor - *furthest) as usize);
            *furthest = cursor;
        }
        self.release(state);
    }

    /// Recomputes what every reader has passed, frees the segments behind it, and wakes the
    /// producer if that made what it waits for.
    fn release(&self, state: &mut State) {
        let before = state.released;
        let needed = |(cursor, kept): (&Option<u64>, &Option<u64>)| {
            cursor.map(|cursor| kept.map_or(cursor, |kept| kept.min(cursor)))
        };
        let slowest = state.cursors.iter().zip(&state.kept).filter_map(needed).min();
        state.released = slowest.unwrap_or(state.produced);
        // What was held before and is not now, by where it was held.
        let (from, to) = (before, state.released);
        for segment in state.segments.iter().take_while(|s| s.start < to) {
            let passed = segment.end().min(to).saturating_sub(segment.start.max(from));
            if segment.is_spill() {
                state.held_spill -= passed;
            } else {
                state.held_memory -= passed as usize;
            }
        }
        while state.segments.len() > 1 && state.segments[0].end() <= state.released {
            let segment = state.segments.pop_front().expect("more than one segment");
            state.recycle(segment.store, self.spill.as_deref());
        }
        if state.held_spill == 0 && state.spill_full {
            // Drained: the disk is ours again.
            state.spill_full = false;
        }
        if Shared::held(state) == 0 {
            state.drop_drained_spill(self.spill.as_deref());
        }
        self.publish(state);
        let wake = match state.producer_waiting {
            None => false,
            _ if state.readers_left == 0 => true,
            Some(Shortage::Room) => {
                self.memory_free(state) >= self.resume_gap || self.can_spill(state)
            }
            Some(Shortage::Memory) => !state.spare_chunks.is_empty() || Shared::held(state) == 0,
        };
        if wake {
            self.has_room.notify_one();
        }
    }
}

/// A reader's hold on the bytes it passed ([`Reader::keep`]), for whoever learns which are
/// needed no more: another thread than the reader's own.
#[derive(Debug, Clone)]
pub struct Keep {
    shared: Arc<Shared>,
    index: usize,
}

impl Keep {
    /// Whether the bytes kept fill a quarter of the buffer or more: time to ask for the
    /// word that lets them go, before the buffer is full of them.
    pub fn pressing(&self) -> bool {
        let state = self.shared.lock();
        match (state.kept[self.index], state.cursors[self.index]) {
            (Some(kept), Some(cursor)) => cursor - kept >= (self.shared.capacity / 4) as u64,
            _ => false,
        }
    }

    /// Has the reader go on from `to` at its next look for data, even while it waits: back
    /// to a kept byte, or on past bytes delivered another way. An error when `to` is before
    /// what was kept, or past what was read.
    pub fn go_on_from(&self, to: u64) -> io::Result<()> {
        let mut state = self.shared.lock();
        let kept = state.kept[self.index].unwrap_or(0);
        if to < kept || to > state.produced {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "asked to go on from byte {to}, but bytes {kept} to {} are held",
                    state.produced
                ),
            ));
        }
        state.redirected[self.index] = Some(Redirect::GoOnFrom(to));
        self.shared.has_data.notify_all();
        Ok(())
    }

    /// Has the reader take nothing more, even while it waits: its next look for data finds
    /// none (what it writes to is gone for good; its own thread says why).
    pub fn stop_reader(&self) {
        let mut state = self.shared.lock();
        state.redirected[self.index] = Some(Redirect::Stop);
        self.shared.has_data.notify_all();
    }

    /// The bytes before `to` are needed no more: the backlog may let them go.
    pub fn release(&self, to: u64) {
        let mut state = self.shared.lock();
        let State { kept, cursors, .. } = &mut *state;
        let (Some(kept), Some(cursor)) = (&mut kept[self.index], cursors[self.index]) else {
            return;
        };
        let to = to.min(cursor.max(*kept));
        if to > *kept {
            *kept = to;
            self.shared.release(&mut state);
        }
    }
}

/// A reader that goes (its output failed, or it finished) no longer holds the backlog back;
/// when the last one goes, the producer stops.
impl Drop for Reader {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.kept[self.index] = None;
        if let Some(cursor) = state.cursors[self.index].take() {
            if cursor < state.produced || !state.input_ended {
                // Left before taking everything: the meter no longer counts it as a reader.
                self.shared.meter.reader_gone(self.index);
            }
            state.readers_left -= 1;
            self.shared.release(&mut state);
        }
    }
}

impl State {
    /// Whether the producer may go on: a reader is left, and the run is not over.
    fn open(&self) -> bool {
        self.readers_left > 0 && !self.closed
    }

    fn has_surplus_spares(&self) -> bool {
        self.spare_chunks.len().max(self.spare_pipes.len()) > SPARES_WHEN_DRAINED
    }

    fn give_back_spares(&mut self) {
        self.spare_chunks.truncate(SPARES_WHEN_DRAINED);
        self.spare_pipes.truncate(SPARES_WHEN_DRAINED);
    }

    /// With nothing held, gives the disk of a drained spill back at once: every spill segment
    /// goes, and the file is emptied. Not while the producer holds the back window (a
    /// [`SpillVacant`]): that one goes when it is full and passed.
    fn drop_drained_spill(&mut self, spill: Option<&SpillFile>) {
        let Some(spill) = spill.filter(|_| !self.spill_vacant) else { return };
        let before = self.segments.len();
        self.segments.retain(|segment| !segment.is_spill());
        if self.segments.len() < before {
            spill.empty();
            self.spill_tail = 0;
        }
    }

    /// With nothing held (every reader has taken everything, so no output is under way),
    /// keeps only the back segment, restarted at the stream's end: a chunk whose pages are
    /// resident and likely in cache, or an empty pipe. A spill segment goes, and the spill
    /// file is emptied: offsets start again at 0.
    fn rewind(&mut self, spill: Option<&SpillFile>) {
        debug_assert_eq!(self.produced, self.released);
        while self.segments.len() > 1 || self.segments.back().is_some_and(Segment::is_spill) {
            let segment = self.segments.pop_front().expect("a segment");
            self.recycle(segment.store, spill);
        }
        if let Some(spill) = spill.filter(|_| self.spill_tail > 0) {
            spill.empty();
            self.spill_tail = 0;
        }
        let produced = self.produced;
        if let Some(segment) = self.segments.front_mut() {
            (segment.start, segment.len) = (produced, 0);
        }
    }

    fn recycle(&mut self, store: Store, spill: Option<&SpillFile>) {
        // Only what nobody else refers to is kept; dropping the last reference unmaps a chunk
        // or closes a pipe. Spares are bounded by the capacity, since each held bytes of it.
        match store {
            Store::Memory(chunk) => {
                if Arc::strong_count(&chunk) == 1 {
                    self.spare_chunks.push(chunk);
                }
            }
            Store::Pipe(pipe) => {
                if Arc::strong_count(&pipe) == 1 {
                    self.spare_pipes.push(pipe);
                }
            }
            // Every reader has passed it: the disk goes back (a reader that spliced it on
            // still has the pages in its pipe).
            Store::Spill { at, .. } => {
                if let Some(spill) = spill {
                    spill.release_window(at);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
