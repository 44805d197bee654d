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
//! one and it is not `Clone`; a [`MemorySpace`](producer::MemorySpace) borrows it mutably, so
//! there is one place to write into at a time; each [`Reader`] has its own cursor, and a
//! [`Filled`](reader::Filled) borrows its reader, so its bytes cannot be consumed while they
//! are being written out.
//!
//! The backlog is a FIFO of segments, each covering a range of the stream. A segment's bytes
//! live in a chunk of memory, in a buffer of their own that was moved in whole (a frame
//! opened by a network connection's thread: [`Producer::adopt`]), in one of accel's own pipes, where they were spliced without
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
//!
//! The parts, one file each: [`gates`] (the watermarks, `--start-at` and `--resume-at`, and
//! input blocks), [`segments`] (what a segment is kept in, and what becomes of it once every
//! reader has passed it), [`producer`] (the producing half, and where it writes: memory or
//! the spill), [`reader`] (a reading half, and what it finds at its place), [`keep`] (a
//! reader's hold on what it passed, from another thread); the stores, [`chunk`] (memory),
//! [`owned`] (buffers moved in) and [`spill`] (the file). This file keeps what they share: the state under the lock, and the
//! policy of giving memory back.

mod chunk;
mod gates;
mod keep;
mod owned;
mod producer;
mod reader;
mod segments;
pub mod spill;

use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

pub use chunk::MAX_CHUNK;
use chunk::{Chunk, Pages};
pub use gates::{Gates, capacity_for};
pub use keep::Keep;
use keep::Redirect;
pub use owned::{Buffer, Owned, Pool};
pub use producer::{Producer, Space, SpillSpace};
pub use reader::{Filled, Front, Lent, Reader, SpillRange};
use segments::Segment;

use crate::log::{Log, Once};
use crate::meter::Meter;
use crate::sys::PoolPipe;
use spill::SpillFile;

/// Chunks and pool pipes kept once the backlog has drained. While a backlog stands, every
/// drained chunk or pipe is kept for the input to reuse: mapping a fresh chunk means the kernel
/// zeroes it again, which cost a fifth of accel's CPU with a standing backlog. Once the backlog
/// has stayed empty for [`GIVE_BACK_AFTER`], all but this many go back to the kernel.
const SPARES_WHEN_DRAINED: usize = 1;

/// How long the backlog must stay empty before its spare memory and pipes are given back.
const GIVE_BACK_AFTER: Duration = Duration::from_secs(1);

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
    let resume_gap = gates.resume_gap(capacity);
    let shared = Arc::new(Shared {
        state: Mutex::new(state),
        has_data: Condvar::new(),
        has_space: Condvar::new(),
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

/// What the two halves share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when data arrives or input ends; readers wait on it.
    has_data: Condvar,
    /// Signalled when space appears, a chunk comes free, or readers leave; the producer waits
    /// on it.
    has_space: Condvar,
    capacity: usize,
    /// The least space the input is ever offered: a page. A packet-mode pipe discards what
    /// does not fit in a read, and its packets are up to a page long; and moving less than a
    /// page per thread handoff would make tiny buffers crawl.
    min_read: usize,
    /// A full backlog takes input again once this much space has been made, not at the first
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
    /// first byte it may still need: the backlog holds everything from there, or from the
    /// reader's place if that is before (what was confirmed while the reader still held it
    /// is let go as the reader passes it).
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
    /// Chunks every reader has passed while some of their bytes were still lent
    /// ([`Lent`]): each becomes a spare once nothing else refers to it.
    lent_chunks: Vec<Arc<Chunk>>,
    spare_pipes: Vec<Arc<PoolPipe>>,
    /// The producer waits for space, or for a chunk to come free.
    producer_waiting: Option<Shortage>,
    /// Readers waiting for data.
    readers_waiting: usize,
    /// The producer pauses ([`Producer::pause`]) until a reader waits for data.
    producer_pausing: bool,
    /// Bytes held in memory and pool pipes (against `-m`).
    held_memory: usize,
    /// Bytes held in the spill file.
    held_spill: u64,
    /// The spill file's next window starts here.
    spill_tail: u64,
    /// The spill's disk or budget said no: spill no more until the spill has drained.
    spill_full: bool,
    /// The producer holds a [`SpillSpace`]: the back spill window is in use.
    back_window_in_use: bool,
    /// Writing the spill file failed: it takes nothing more (what it holds is still read).
    spill_failed: bool,
}

/// What the producer is short of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shortage {
    /// Space: the backlog is full.
    Space,
    /// Memory: the kernel refused a new chunk.
    Memory,
}

/// Ends every wait in the backlog when the run is over, whoever holds the halves.
#[derive(Debug, Clone)]
pub struct Closer {
    shared: Arc<Shared>,
}

impl Closer {
    /// From now on the producer gets no space and readers get no more bytes; whoever waits
    /// wakes up.
    pub fn close(&self) {
        let mut state = self.shared.lock();
        state.closed = true;
        self.shared.has_data.notify_all();
        self.shared.has_space.notify_all();
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

    /// Space in memory (and pool pipes) against `-m`.
    fn memory_space(&self, state: &State) -> usize {
        self.capacity.saturating_sub(state.held_memory)
    }

    /// Whether input may go to the spill file now.
    fn can_spill(&self, state: &State) -> bool {
        self.spill.is_some() && !state.spill_full && !state.spill_failed
    }

    /// Whether input goes to the spill now: memory is full, or something is spilled already
    /// (new bytes join the spill until it has drained, which keeps memory for the oldest).
    fn spilling(&self, state: &State) -> bool {
        self.can_spill(state)
            && (self.memory_space(state) < self.min_read
                || state.segments.iter().any(Segment::is_spill))
    }

    /// Tells the meter what is held where.
    fn publish(&self, state: &State) {
        self.meter.held(state.held_memory as u64, state.held_spill);
    }
}

impl State {
    /// Whether the producer may go on: a reader is left, and the run is not over.
    fn open(&self) -> bool {
        self.readers_left > 0 && !self.closed
    }
}

#[cfg(test)]
mod tests;
