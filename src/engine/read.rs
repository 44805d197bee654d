//! One read of the input into the backlog: into its memory, or into the spill file once
//! memory is full. Every read of both engines is one ([`read_once`]), where they do not
//! splice; what it took ([`Took`]); and the input side's end once no output is left
//! ([`nobody_left`]).

use std::io;

use super::spill;
use crate::backlog::{MAX_CHUNK, Producer, Space};
use crate::endpoint::Endpoint;
use crate::words::describe;

/// What one read took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Took {
    /// The bytes it returned.
    pub got: usize,
    /// They went to the spill file (maybe spliced), not read into memory.
    pub spilled: bool,
}

/// Passes bytes just read straight on, if it can without waiting; how many it passed.
pub type PassOn<'a> = &'a mut dyn FnMut(&[u8]) -> usize;

/// One `read` into the backlog, of at most `most` bytes when given; `None` at end of input.
/// Once no reader is left (or the run is over), an `Interrupted` error: there is nobody to
/// read for. With `pass_on`, what was read goes to it first, and only what it did not take
/// into the backlog.
pub fn read_once(
    input: &Endpoint,
    producer: &mut Producer,
    most: Option<usize>,
    mut pass_on: Option<PassOn<'_>>,
) -> io::Result<Option<Took>> {
    let read_block = producer.read_block();
    if read_block.is_none()
        && input.moves()
        && let Moved::Read(took) = read_moved(input, producer, most, &mut pass_on)?
    {
        return Ok(took);
    }
    let mut space = match producer.reserve()? {
        None => return Err(nobody_left()),
        Some(Space::Spill(space)) => {
            let offered = most.map_or(space.len(), |most| most.min(space.len()));
            let got = spill::take_in(input, space, offered)?;
            return Ok((got > 0).then_some(Took { got, spilled: true }));
        }
        Some(Space::Memory(space)) => space,
    };
    let into = space.as_mut_slice();
    let len = most.map_or(into.len(), |most| most.min(into.len()));
    let into = &mut into[..len];
    let offered = into.len();
    match input.read(into) {
        Ok(0) => Ok(None),
        Ok(got) => {
            let passed = pass_on.map_or(0, |pass_on| pass_on(&into[..got]));
            if passed < got {
                // Only when the bypass took the front: musl's memmove copies even onto itself
                // (glibc's returns at once), which cost the static binary 0.8 CPU s per 4 GiB.
                if passed > 0 {
                    into.copy_within(passed..got, 0);
                }
                space.commit(got - passed);
            }
            Ok(Some(Took { got, spilled: false }))
        }
        // A tape refuses a read smaller than its block, with ENOMEM.
        Err(error) if error.raw_os_error() == Some(libc::ENOMEM) && read_block.is_some() => {
            Err(io::Error::new(
                error.kind(),
                format!(
                    "{} (the input's blocks are larger than --input-block-size {offered})",
                    describe(&error)
                ),
            ))
        }
        Err(error) => Err(error),
    }
}

/// What a read of an input that moves its bytes did.
enum Moved {
    /// It took this (`None` at the end of input).
    Read(Option<Took>),
    /// Nothing: memory is full and the input goes to the spill, read as any other.
    Spilling,
}

/// One read of an input that [`moves`](Endpoint::moves) its bytes, in buffers of their own
/// (a peer over several connections: each frame opened where it came): what `pass_on`
/// does not take goes into the backlog's memory as it is, not copied
/// ([`Producer::adopt`]).
fn read_moved(
    input: &Endpoint,
    producer: &mut Producer,
    most: Option<usize>,
    pass_on: &mut Option<PassOn<'_>>,
) -> io::Result<Moved> {
    let Some(fill) = producer.wait_for_space() else { return Err(nobody_left()) };
    if fill.space == 0 {
        return Ok(Moved::Spilling);
    }
    // As much as a read into a chunk would take at most.
    let most = most.unwrap_or(usize::MAX).min(fill.space).min(MAX_CHUNK);
    let mut pieces = Vec::new();
    let got = match input.read_moved(most, &mut pieces) {
        Some(got) => got?,
        None => unreachable!("an input that moves its bytes"),
    };
    if got == 0 {
        return Ok(Moved::Read(None));
    }
    let mut passing = pass_on.is_some();
    for mut piece in pieces {
        if let (true, Some(pass)) = (passing, pass_on.as_mut()) {
            let passed = pass(piece.as_slice());
            // The output took no more: the rest is queued, in order.
            passing = passed == piece.len();
            piece.advance(passed);
        }
        producer.adopt(piece);
    }
    Ok(Moved::Read(Some(Took { got, spilled: false })))
}

/// The input side's end when no output is left to deliver to: the run's end, not a failure.
pub fn nobody_left() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "no output is left")
}
