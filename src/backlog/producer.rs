//! The producing half: the only way to add to the backlog. It waits for space (a full
//! backlog, memory the kernel refused), reserves where the next bytes go (memory at the back,
//! or a window of the spill file), and commits what was read or spliced there, waking the
//! readers that wait.

use std::io;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::time::Duration;

use super::chunk::{Chunk, Pages};
use super::owned::Owned;
use super::segments::{Segment, Store};
use super::spill::{FileRange, STEP, SpillFile, WINDOW};
use super::{Closer, Shared, Shortage, State};
use crate::meter::{Meter, Tier};
use crate::size::Bytes;
use crate::sys::PoolPipe;

/// The most input staged in memory at once on its way to the spill file, where it cannot be
/// spliced there.
const STAGING: usize = 1 << 20;

/// How full the backlog is, as the producer finds it after waiting for space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fill {
    /// Bytes of memory that may still be added (none while input goes to the spill).
    pub space: usize,
    /// Every reader has taken everything: nothing is held and no output is under way.
    pub empty: bool,
}

/// The producing half: the only way to add to the backlog.
#[derive(Debug)]
pub struct Producer {
    pub(super) shared: Arc<Shared>,
    /// Where input bound for the spill is read first, when it cannot be spliced there
    /// ([`SpillSpace::staging`]).
    pub(super) staging: Vec<u8>,
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
    /// Space in memory at the back of the backlog.
    Memory(MemorySpace<'a>),
    /// Reserved space at the end of the spill file.
    Spill(SpillSpace<'a>),
}

/// Space in memory at the back of the backlog, to read into and then
/// [`commit`](MemorySpace::commit).
#[derive(Debug)]
pub struct MemorySpace<'a> {
    producer: &'a mut Producer,
    chunk: Arc<Chunk>,
    pub(super) offset: usize,
    pub(super) len: usize,
}

/// Reserved space at the end of the spill file, for input: spliced into its
/// [`range`](SpillSpace::range) and [`commit`](SpillSpace::commit)ted, or read into its
/// [`staging`](SpillSpace::staging) memory and [`commit_staged`](SpillSpace::commit_staged).
#[derive(Debug)]
pub struct SpillSpace<'a> {
    producer: &'a mut Producer,
    file: Arc<SpillFile>,
    at: u64,
    len: usize,
}

/// The back spill window is the producer's no more: a drained spill may go.
impl Drop for SpillSpace<'_> {
    fn drop(&mut self) {
        let shared = &self.producer.shared;
        let mut state = shared.lock();
        state.back_window_in_use = false;
        shared.release(&mut state);
    }
}

impl SpillSpace<'_> {
    /// The reserved space in the spill file, to splice input into.
    pub fn range(&self) -> FileRange<'_> {
        self.file.range(self.at, self.len)
    }

    /// Memory to read up to `most` bytes of input into, where it cannot be spliced into the
    /// spill: at most what is reserved, and 1 MiB.
    pub fn staging(&mut self, most: usize) -> &mut [u8] {
        let staging = &mut self.producer.staging;
        staging.resize(most.min(self.len).min(STAGING), 0);
        staging
    }

    /// Makes the first `n` bytes of the [`range`](SpillSpace::range), spliced there, visible to
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

    /// Writes the first `n` bytes of the [`staging`](SpillSpace::staging) memory into the
    /// spill, and makes them visible to every reader (none at end of input).
    ///
    /// When the spill file cannot be written (EIO), spilling stops for the rest of the run
    /// (the user is told once) and the bytes go to memory instead, when there is space:
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

impl MemorySpace<'_> {
    /// The space, to read into; at least a page.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: a MemorySpace covers bytes past the back segment's committed end, which no
        // Filled covers, and it borrows the one Producer, so no other MemorySpace exists; the Arc
        // keeps the mapping alive. Its bytes are initialised: zeros from the kernel in a fresh
        // chunk, earlier bytes of the stream in a reused one (any byte is a valid u8).
        unsafe { std::slice::from_raw_parts_mut(self.chunk.at(self.offset), self.len) }
    }

    /// Makes the first `n` bytes visible to every reader.
    pub fn commit(self, n: usize) {
        assert!(n <= self.len, "committed more than there was space for");
        self.producer.commit(n, Tier::Memory);
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

    /// Pauses the input for at most `longest`, letting input gather in its pipe so that the
    /// next read takes many pieces at once; the run's end ends the pause, and,
    /// `while_readers_have_bytes`, so does a reader that runs out (its consumer may soon wait).
    /// Whether it paused: not once the run is over, nor, `while_readers_have_bytes`, when a
    /// reader waits already or nothing is held.
    pub fn pause(&mut self, longest: Duration, while_readers_have_bytes: bool) -> bool {
        let shared = &self.shared;
        let state = shared.lock();
        let waiting = |s: &State| while_readers_have_bytes && s.readers_waiting > 0;
        let empty = while_readers_have_bytes && Shared::held(&state) == 0;
        if !state.open() || waiting(&state) || empty {
            return false;
        }
        let mut state = state;
        state.producer_pausing = while_readers_have_bytes;
        let (mut state, _) = shared
            .has_space
            .wait_timeout_while(state, longest, |s| s.open() && !waiting(s))
            .unwrap_or_else(PoisonError::into_inner);
        state.producer_pausing = false;
        true
    }

    /// Waits until there is space for a read of at least a page; `None` once no reader is left
    /// or the run is over.
    pub fn wait_for_space(&mut self) -> Option<Fill> {
        let state = self.shared.space_locked();
        state.open().then(|| {
            let held = Shared::held(&state);
            let space =
                if self.shared.spilling(&state) { 0 } else { self.shared.memory_space(&state) };
            Fill { space, empty: held == 0 }
        })
    }

    /// Waits for space, then says where the next bytes go: space in memory to read into (at
    /// least a page), or, memory being full, reserved space in the spill file (`--spill`); `None`
    /// once no reader is left. Starts a memory segment if the back one is full or not memory.
    ///
    /// When the kernel refuses memory for a new chunk (a memory limit below the buffer size),
    /// the backlog counts as full: the input spills, or the producer waits until a reader frees
    /// a chunk, and the user is told once. Fails only when no memory can be had with nothing
    /// buffered, or the spill file fails.
    pub fn reserve(&mut self) -> io::Result<Option<Space<'_>>> {
        let shared = Arc::clone(&self.shared);
        let mut state = shared.space_locked();
        loop {
            if !state.open() {
                return Ok(None);
            }
            if Shared::held(&state) == 0 {
                state.rewind(shared.spill.as_deref());
            }
            if shared.spilling(&state) {
                if state.segments.back().map_or(0, Segment::space_in_window) >= shared.min_read {
                    break;
                }
                shared.open_window(&mut state)?;
                continue;
            }
            if shared.memory_space(&state) < shared.min_read {
                state = shared.space_locked_again(state);
                continue;
            }
            if state.segments.back().map_or(0, Segment::space_in_chunk) >= shared.min_read {
                break;
            }
            if state.spare_chunks.is_empty() {
                state.reclaim_lent_chunks();
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
                let len = shared.memory_space(&state).min(chunk.size() - offset).min(most);
                drop(state);
                Space::Memory(MemorySpace { producer: self, chunk, offset, len })
            }
            Store::Spill { at, .. } => {
                let (at, len) = (at + back.len as u64, back.space_in_window().min(most));
                let file = Arc::clone(shared.spill.as_ref().expect("a spill file"));
                state.back_window_in_use = true;
                drop(state);
                Space::Spill(SpillSpace { producer: self, file, at, len })
            }
            Store::Owned { .. } | Store::Pipe(_) => {
                unreachable!("space found in memory or the spill")
            }
        };
        Ok(Some(space))
    }

    /// Adds `bytes` read already to the backlog, waiting for space as a read would; dropped
    /// only when no reader is left to take them.
    pub fn queue(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            let n = match self.reserve()? {
                None => break,
                Some(Space::Memory(mut space)) => {
                    let into = space.as_mut_slice();
                    let n = into.len().min(bytes.len());
                    into[..n].copy_from_slice(&bytes[..n]);
                    space.commit(n);
                    n
                }
                Some(Space::Spill(mut space)) => {
                    let into = space.staging(bytes.len());
                    let n = into.len();
                    into.copy_from_slice(&bytes[..n]);
                    space.commit_staged(n)?;
                    n
                }
            };
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Adds `owned`, read elsewhere into a buffer of its own, to the backlog as it is: a
    /// segment of its own, not copied; its buffer goes back to its pool once every reader
    /// has passed it. Counted in memory like bytes read into a chunk; the caller waited for
    /// that space ([`wait_for_space`](Producer::wait_for_space)). Dropped when no reader is
    /// left, or the run is over.
    pub fn adopt(&mut self, owned: Owned) {
        if owned.is_empty() {
            return;
        }
        let len = owned.len();
        let Owned { buffer, from, .. } = owned;
        let segment = Segment { store: Store::Owned { buffer, from }, start: 0, len: 0 };
        self.commit_into(Some(segment), len, Tier::Memory);
    }

    /// The pipe of the back segment, to splice more into; `None` if the back is not a pipe.
    pub fn back_pipe(&mut self) -> Option<Arc<PoolPipe>> {
        match &self.shared.lock().segments.back()?.store {
            Store::Pipe(pipe) => Some(Arc::clone(pipe)),
            Store::Memory(_) | Store::Owned { .. } | Store::Spill { .. } => None,
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
        self.commit_into(None, n, tier);
    }

    /// Commits `n` bytes into the back segment, or into `new`, pushed at the back under the
    /// same lock (a segment of nothing yet committed would be let go as passed).
    fn commit_into(&mut self, new: Option<Segment>, n: usize, tier: Tier) {
        let shared = &self.shared;
        let mut state = shared.lock();
        if let Some(segment) = new {
            if !state.open() {
                return;
            }
            let start = state.produced;
            state.segments.push_back(Segment { start, ..segment });
        }
        let back = state.segments.back_mut().expect("commit follows reserve or push_pipe");
        back.len += n;
        let mut full_window = None;
        match back.store {
            Store::Memory(ref chunk) => {
                assert!(back.len <= chunk.size(), "committed past the end of a chunk");
            }
            Store::Owned { ref buffer, from } => {
                assert!(from + back.len <= buffer.len(), "committed past the end of a buffer");
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
}

impl Shared {
    /// Locks the state once there is space for a read of at least a page (in memory or the
    /// spill), or no reader is left.
    fn space_locked(&self) -> MutexGuard<'_, State> {
        self.space_locked_again(self.lock())
    }

    /// As [`space_locked`](Shared::space_locked), with the lock already held.
    fn space_locked_again<'a>(&self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        let full = |s: &State| self.memory_space(s) < self.min_read && !self.can_spill(s);
        if full(&state) && state.open() {
            self.meter.input_held(true);
            state.producer_waiting = Some(Shortage::Space);
            // As full as it gets: a reader held by its start watermark goes now.
            self.has_data.notify_all();
            state = self.wait(&self.has_space, state, |s| {
                self.memory_space(s) < self.resume_gap && !self.can_spill(s) && s.open()
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
        state = self.wait(&self.has_space, state, |s| {
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
