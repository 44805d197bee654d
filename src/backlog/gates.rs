//! The watermarks and blocks that hold each side back beyond a full or empty backlog:
//! `--start-at` (a reader waits until this much is ahead), `--resume-at` (a full backlog takes
//! input again once it holds this little), and reads of exactly one block
//! (`--input-block-size`); the capacity they need. A tape drive must stream: started and
//! stopped for every few bytes, it rewinds between them ("shoe-shining").
//!
//! The gates are kept where the sides wait: the start watermark in a reader's look for data
//! ([`Reader::front_of_at_least`](super::Reader::front_of_at_least)), the resume level in the
//! producer's wait for space.

/// A full backlog resumes input once it has 1/RESUME_FRACTION of its space, or RESUME_MAX
/// bytes.
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
    /// Each read is offered exactly this much space; `None` for whatever space there is (at
    /// least a page).
    pub read_block: Option<usize>,
    /// An output takes exactly this much at a time (`--block-size`), until the input has
    /// ended; `None` for whatever is there.
    pub write_block: Option<usize>,
}

impl Gates {
    /// The least space a read is offered: a read block, and never less than a page.
    pub(super) fn min_read(&self) -> usize {
        self.read_block.unwrap_or(0).max(rustix::param::page_size())
    }

    /// The bytes an output waits for before it writes: a block, else one.
    pub(super) fn min_write(&self) -> usize {
        self.write_block.unwrap_or(1)
    }

    /// The space a full backlog of `capacity` bytes (as [`capacity_for`] makes it) must have
    /// made before it takes input again: what `--resume-at` leaves, or the default.
    pub(super) fn resume_gap(&self, capacity: usize) -> usize {
        let min_read = self.min_read();
        let default_gap = (capacity / RESUME_FRACTION).clamp(min_read, RESUME_MAX.max(min_read));
        let resume_gap = match self.resume_at {
            Some(level) => (capacity - level.min(capacity - min_read)).max(min_read),
            None => default_gap,
        };
        // The producer resumes at the latest once less than an output block is held: the slowest
        // output cannot drain the buffer further before more comes. (At least `min_read`, since
        // the capacity holds a block and a read.)
        resume_gap.min(capacity - (self.min_write() - 1))
    }
}

/// The capacity a backlog asked for `asked` bytes has, under `gates`: at least a read (a
/// page, or an input block), the least the producer takes space for; and at least an output
/// block and a read less a byte, so that the producer, held only when it has less space than
/// a read's, has always made a whole block for the slowest output by then.
///
/// Raising `-m` by an input block is not for here: the caller refuses that (a read of a
/// page is accel's own minimum, and raising by less than it is).
pub fn capacity_for(asked: usize, gates: &Gates) -> usize {
    let min_read = gates.min_read();
    asked.max(min_read).max(gates.min_write() + min_read - 1)
}
