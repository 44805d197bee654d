//! A reading half: an output's or a hash's place in the stream. It waits for data (and for
//! its start watermark), says where the bytes at its place are (memory, a pool pipe, the
//! spill), and moves past what was written, counting it out once; a reader that goes no
//! longer holds the backlog back.

use std::io;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::time::Instant;

use super::chunk::Chunk;
use super::keep::{Keep, Redirect};
use super::owned::Buffer;
use super::segments::Store;
use super::spill::{FileRange, SpillFile};
use super::{GIVE_BACK_AFTER, Shared, Shortage, State};
use crate::meter::Meter;
use crate::sys::PoolPipe;

/// One reading half: an output's or a hash's place in the stream.
#[derive(Debug)]
pub struct Reader {
    pub(super) shared: Arc<Shared>,
    pub(super) index: usize,
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
    bytes: Lent,
    _reader: PhantomData<&'a mut Reader>,
}

impl Filled<'_> {
    /// The bytes, to write out.
    pub fn as_slice(&self) -> &[u8] {
        self.bytes.as_slice()
    }

    /// The first `len` of these bytes, lent to another thread for as long as it holds them
    /// (a connection's thread seals them, and sends them again after a drop), after the
    /// reader has passed them: their chunk is reused only once nothing refers to it.
    ///
    /// # Panics
    /// If `len` is more than there are.
    pub fn lend(&self, len: usize) -> Lent {
        assert!(len <= self.bytes.len, "lent more than was filled");
        Lent { len, ..self.bytes.clone() }
    }
}

/// Committed bytes of the backlog's memory, held by whoever holds this, on any thread, past
/// the reader that lent them ([`Filled::lend`]): a network output's units over several
/// connections, sealed from the backlog rather than copied out of it.
///
/// What keeps the bytes as they were: the producer writes only past what it committed, and
/// a chunk is written from its start again only when nothing but its segment refers to it
/// (a segment passed by every reader keeps a chunk as a spare only then, else sets it aside
/// until it is so; a drained backlog rewinds its back chunk only then). The `Arc` keeps the
/// mapping alive. A buffer moved in ([`Producer::adopt`](super::Producer::adopt)) is
/// written no more, and goes back to its pool only when nothing refers to it.
#[derive(Debug, Clone)]
pub struct Lent {
    backing: Backing,
    offset: usize,
    len: usize,
}

/// Where lent bytes are.
#[derive(Debug, Clone)]
enum Backing {
    Chunk(Arc<Chunk>),
    Owned(Arc<Buffer>),
}

impl Lent {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.backing {
            // SAFETY: committed bytes, which the producer never writes again, of a chunk
            // that is written from its start again only when nothing else refers to it (see
            // the type); the Arc keeps the mapping alive.
            Backing::Chunk(chunk) => unsafe {
                std::slice::from_raw_parts(chunk.at(self.offset), self.len)
            },
            Backing::Owned(buffer) => &buffer[self.offset..self.offset + self.len],
        }
    }

    /// `range` of these bytes, lent on.
    ///
    /// # Panics
    /// If `range` reaches past them.
    pub fn cut(&self, range: std::ops::Range<usize>) -> Lent {
        assert!(range.start <= range.end && range.end <= self.len, "cut past the bytes lent");
        Lent { backing: self.backing.clone(), offset: self.offset + range.start, len: range.len() }
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
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
    /// [`copy_out`](Reader::copy_out) copies them into one block.
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
                        bytes: Lent {
                            backing: Backing::Chunk(Arc::clone(chunk)),
                            offset: (cursor - segment.start) as usize,
                            len,
                        },
                        _reader: PhantomData,
                    }),
                    Store::Owned { buffer, from } => Front::Memory(Filled {
                        bytes: Lent {
                            backing: Backing::Owned(Arc::clone(buffer)),
                            offset: from + (cursor - segment.start) as usize,
                            len,
                        },
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
            if state.producer_pausing {
                // This reader's consumer may soon wait: the input is read now.
                shared.has_space.notify_all();
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

    /// Lets small pieces coalesce: when fewer than `most` bytes are ahead of this reader and
    /// more can come (the input has not ended, the backlog is not full), sleeps until `until`.
    /// A sleep, not a wait on the producer: the producer would otherwise wake this reader
    /// for every piece it adds, which is the cost coalescing is there to save.
    pub fn coalesce(&self, most: usize, until: Instant) {
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
                Store::Owned { buffer, from } => {
                    out[copied..copied + n].copy_from_slice(&buffer[from + offset..][..n]);
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
