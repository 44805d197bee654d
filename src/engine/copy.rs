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
    while read_once(input, backlog)? {}
    Ok(())
}

/// One `read` into the backlog; `false` at end of input or once the output has closed.
pub fn read_once(input: &Endpoint, backlog: &Backlog) -> io::Result<bool> {
    let Some(mut vacant) = backlog.reserve()? else { return Ok(false) };
    match input.read(vacant.as_mut_slice())? {
        0 => Ok(false),
        n => {
            backlog.commit(n);
            Ok(true)
        }
    }
}
