//! The portable engine's input side: `read` into the backlog's memory.
//!
//! Two copies per byte (into user memory and out again), which costs about 0.2-0.3 CPU seconds
//! per GiB; compression pipelines move a few hundred MB/s at most and do not notice. Every read
//! is committed at once, so partial data (a short line) goes out without waiting for more.

use std::io;

use crate::backlog::Producer;
use crate::endpoint::Endpoint;

/// Reads until end of input, an error, or no reader being left (an `Interrupted` error).
pub fn read_input(input: &Endpoint, mut producer: Producer) -> io::Result<()> {
    while read_once(input, &mut producer)?.is_some() {}
    Ok(())
}

/// What one read took: `got` bytes, when `offered` could have been.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Took {
    /// The room the read was given (at least a page).
    pub offered: usize,
    /// The bytes it returned.
    pub got: usize,
}

/// One `read` into the backlog; `None` at end of input. Once no reader is left (or the run is
/// over), an `Interrupted` error: there is nobody to read for.
pub fn read_once(input: &Endpoint, producer: &mut Producer) -> io::Result<Option<Took>> {
    let Some(mut vacant) = producer.reserve()? else { return Err(nobody_left()) };
    let offered = vacant.as_mut_slice().len();
    match input.read(vacant.as_mut_slice())? {
        0 => Ok(None),
        got => {
            vacant.commit(got);
            Ok(Some(Took { offered, got }))
        }
    }
}

/// The input side's end when no output is left to deliver to: the run's end, not a failure.
pub fn nobody_left() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "no output is left")
}
