//! The data path's side of the spill (`--spill`): input taken into the space the backlog
//! reserved in its spill file, and spilled bytes passed on to an output or read back for a
//! hash. Zero-copy where the kernel allows: a pipe input is spliced into the file (one copy,
//! by the kernel), and the file is spliced into a pipe output (page-cache references, none).
//! Anything else goes through memory: the backlog's staging memory on the way in, `scratch`
//! on the way out.
//!
//! A refused splice means "not here", as everywhere in the engine: the bytes stay where they
//! were, and reading and writing meet any real error and say which side it was.

use std::io;

use rustix::event::PollFlags;
use rustix::io::Errno;

use crate::backlog::{SpillRange, SpillSpace};
use crate::endpoint::{Endpoint, FdKind};
use crate::stop;
use crate::sys;

/// The most read back into memory at once, where spilled bytes cannot be spliced on.
const SCRATCH: usize = 1 << 20;

/// Why passing spilled bytes on failed.
#[derive(Debug)]
pub enum PassError {
    /// Reading them back from the spill file (EIO: the disk).
    ReadBack(io::Error),
    /// Writing them to the output.
    Write(io::Error),
}

/// Takes up to `most` bytes of `input` (at most what `space` reserves) into the spill, and
/// makes them visible to every reader; how many, 0 at end of input. A pipe is spliced in;
/// anything else is read into the backlog's staging memory, which the backlog writes into the
/// file, or into memory when the file fails: nothing read is lost.
pub fn take_in(input: &Endpoint, mut space: SpillSpace<'_>, most: usize) -> io::Result<usize> {
    if input.kind == FdKind::Pipe && input.can_splice_from() && sys::CAN_SPLICE {
        let range = space.range();
        let (mut at, len) = (range.offset, most.min(range.len));
        let spliced = stop::blocking(input.fd(), PollFlags::IN, input.stop(), None, || {
            unless_refused(input.splice_to_file(range.fd, &mut at, len))
        })?;
        match spliced {
            // The end of one FILE operand of several: the read below goes on with the next.
            Some(0) if !input.ended()? => {}
            Some(n) => {
                space.commit(n);
                return Ok(n);
            }
            None => {}
        }
    }
    let n = input.read(space.staging(most))?;
    space.commit_staged(n)?;
    Ok(n)
}

/// Passes on up to `most` of the spilled bytes of `range` to `output`; how many went. A pipe
/// gets them spliced (page-cache references, no copy); anything else by reading them back,
/// then writing.
pub fn pass_on(
    output: &Endpoint,
    range: &SpillRange,
    most: usize,
    scratch: &mut Vec<u8>,
) -> Result<usize, PassError> {
    let file = range.readable(most).map_err(PassError::ReadBack)?;
    if output.kind == FdKind::Pipe && output.can_splice_to() && sys::CAN_SPLICE {
        let mut at = file.offset;
        let spliced = stop::blocking(output.fd(), PollFlags::OUT, output.stop(), None, || {
            unless_refused(sys::splice_from_file(file.fd, &mut at, output.fd(), file.len))
        });
        if let Some(n) = spliced.map_err(PassError::Write)?.filter(|&n| n > 0) {
            return Ok(n);
        }
    }
    let bytes = read_back(range, file.len, scratch).map_err(PassError::ReadBack)?;
    output.write(bytes).map_err(PassError::Write)
}

/// Reads the first of `len` spilled bytes of `range` (at most 1 MiB) back into `scratch`:
/// those bytes, or an error (the disk).
pub fn read_back<'a>(
    range: &SpillRange,
    len: usize,
    scratch: &'a mut Vec<u8>,
) -> io::Result<&'a [u8]> {
    scratch.resize(len.min(SCRATCH), 0);
    let n = range.read(scratch)?;
    Ok(&scratch[..n])
}

/// A splice's answer for [`stop::blocking`], which retries it on `EINTR` and `EAGAIN`: any
/// other error is a refusal, `None`, on which the caller reads and writes instead.
fn unless_refused(answer: rustix::io::Result<usize>) -> rustix::io::Result<Option<usize>> {
    match answer {
        Ok(n) => Ok(Some(n)),
        Err(error @ (Errno::INTR | Errno::AGAIN)) => Err(error),
        Err(_) => Ok(None),
    }
}
