//! The portable engine's input side: `read` into the backlog's memory.
//!
//! Two copies per byte (into user memory and out again), which costs about 0.2-0.3 CPU seconds
//! per GiB; compression pipelines move a few hundred MB/s at most and do not notice. Every read
//! is committed at once, so partial data (a short line) goes out without waiting for more.

use std::io;

use crate::backlog::Backlog;
use crate::endpoint::Endpoint;

/// Reads until end of input, an error, or the output closing.
pub fn read_input(input: &Endpoint, backlog: &Backlog) -> io::Result<()> {
    while read_once(input, backlog)?.is_some() {}
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

/// One `read` into the backlog; `None` at end of input or once the output has closed.
pub fn read_once(input: &Endpoint, backlog: &Backlog) -> io::Result<Option<Took>> {
    let Some(mut vacant) = backlog.reserve()? else { return Ok(None) };
    let offered = vacant.as_mut_slice().len();
    match input.read(vacant.as_mut_slice())? {
        0 => Ok(None),
        got => {
            backlog.commit(got);
            Ok(Some(Took { offered, got }))
        }
    }
}
