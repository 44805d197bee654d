//! The segments: the backlog's FIFO, each a range of the stream kept in one store (a chunk
//! of memory, one of accel's own pipes, or a window of the spill file); and what becomes of a
//! segment once every reader has passed it: its bytes no longer held, its chunk or pipe kept
//! as a spare (or given back), its spill window's disk given back. A backlog with nothing
//! held is rewound to its back segment.

use std::sync::Arc;

use super::chunk::Chunk;
use super::owned::Buffer;
use super::spill::SpillFile;
use super::{SPARES_WHEN_DRAINED, Shared, Shortage, State};
use crate::sys::PoolPipe;

/// Where a segment's bytes are kept.
#[derive(Debug, Clone)]
pub(super) enum Store {
    Memory(Arc<Chunk>),
    /// A buffer of its own moved in ([`Producer::adopt`](super::Producer::adopt)), its
    /// bytes from `from`; no more is written into it.
    Owned {
        buffer: Arc<Buffer>,
        from: usize,
    },
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
pub(super) struct Segment {
    pub(super) store: Store,
    pub(super) start: u64,
    pub(super) len: usize,
}

impl Segment {
    pub(super) fn end(&self) -> u64 {
        self.start + self.len as u64
    }

    /// Space left in a memory segment's chunk; 0 for a pipe or the spill.
    pub(super) fn space_in_chunk(&self) -> usize {
        match &self.store {
            Store::Memory(chunk) => chunk.size() - self.len,
            Store::Owned { .. } | Store::Pipe(_) | Store::Spill { .. } => 0,
        }
    }

    /// Reserved space left in a spill segment's window; 0 for memory or a pipe.
    pub(super) fn space_in_window(&self) -> usize {
        match self.store {
            Store::Spill { reserved, .. } => (reserved - self.len as u64) as usize,
            _ => 0,
        }
    }

    pub(super) fn is_spill(&self) -> bool {
        matches!(self.store, Store::Spill { .. })
    }
}

impl Shared {
    /// Recomputes what every reader has passed, frees the segments behind it, and wakes the
    /// producer if that made what it waits for.
    pub(super) fn release(&self, state: &mut State) {
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
            let segment = state.segments.pop_front().expect("a segment");
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
            Some(Shortage::Space) => {
                self.memory_space(state) >= self.resume_gap || self.can_spill(state)
            }
            Some(Shortage::Memory) => !state.spare_chunks.is_empty() || Shared::held(state) == 0,
        };
        if wake {
            self.has_space.notify_one();
        }
    }
}

impl State {
    pub(super) fn has_surplus_spares(&self) -> bool {
        self.spare_chunks.len().max(self.spare_pipes.len()) > SPARES_WHEN_DRAINED
    }

    pub(super) fn give_back_spares(&mut self) {
        self.reclaim_lent_chunks();
        self.spare_chunks.truncate(SPARES_WHEN_DRAINED);
        self.spare_pipes.truncate(SPARES_WHEN_DRAINED);
    }

    /// With nothing held, gives the disk of a drained spill back at once: every spill segment
    /// goes, and the file is emptied. Not while the producer holds the back window (a
    /// [`SpillSpace`](super::SpillSpace)): that one goes when it is full and passed.
    pub(super) fn drop_drained_spill(&mut self, spill: Option<&SpillFile>) {
        let Some(spill) = spill.filter(|_| !self.back_window_in_use) else { return };
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
    pub(super) fn rewind(&mut self, spill: Option<&SpillFile>) {
        debug_assert_eq!(self.produced, self.released);
        while self.segments.len() > 1 || self.segments.back().is_some_and(Segment::is_spill) {
            let segment = self.segments.pop_front().expect("a segment");
            self.recycle(segment.store, spill);
        }
        if let Some(spill) = spill.filter(|_| self.spill_tail > 0) {
            spill.empty();
            self.spill_tail = 0;
        }
        // A chunk with bytes still lent is not written from its start again: it goes, and
        // the producer takes another; so does a buffer moved in, which takes no more.
        let goes = match self.segments.front().map(|segment| &segment.store) {
            Some(Store::Memory(chunk)) => Arc::strong_count(chunk) > 1,
            Some(Store::Owned { .. }) => true,
            _ => false,
        };
        if goes {
            let segment = self.segments.pop_front().expect("a segment");
            self.recycle(segment.store, spill);
        }
        let produced = self.produced;
        if let Some(segment) = self.segments.front_mut() {
            (segment.start, segment.len) = (produced, 0);
        }
    }

    /// Chunks whose lent bytes nobody holds any more become spares.
    pub(super) fn reclaim_lent_chunks(&mut self) {
        let State { lent_chunks, spare_chunks, .. } = self;
        lent_chunks.retain(|chunk| {
            let free = Arc::strong_count(chunk) == 1;
            if free {
                spare_chunks.push(Arc::clone(chunk));
            }
            !free
        });
    }

    pub(super) fn recycle(&mut self, store: Store, spill: Option<&SpillFile>) {
        // Only what nobody else refers to is kept; dropping the last reference unmaps a chunk
        // or closes a pipe. Spares are bounded by the capacity, since each held bytes of it.
        match store {
            Store::Memory(chunk) => {
                if Arc::strong_count(&chunk) == 1 {
                    self.spare_chunks.push(chunk);
                } else {
                    // Some of its bytes are lent: a spare once they are given back.
                    self.lent_chunks.push(chunk);
                }
            }
            // Back to its pool, once nothing else holds it (a Lent).
            Store::Owned { .. } => {}
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
