//! The portable engine: `read` into the backlog, `write` out of it, one thread per side.
//!
//! Two copies per byte (into user memory and out again), which costs about 0.2-0.3 CPU seconds
//! per GiB; compression pipelines move a few hundred MB/s at most and do not notice. Every read
//! is committed at once, so partial data (a short line) goes out without waiting for more.

use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread;

use super::Ending;
use crate::backlog::Backlog;
use crate::endpoint::Endpoint;

/// Runs the transfer: input on a new thread, output on this one.
pub fn run(input: Endpoint, output: Endpoint, backlog: Arc<Backlog>) -> io::Result<Ending> {
    let input_backlog = Arc::clone(&backlog);
    thread::Builder::new().name("accel-input".into()).spawn(move || {
        let end = catch_unwind(AssertUnwindSafe(|| read_input(&input, &input_backlog)))
            .unwrap_or_else(|_| Err(io::Error::other("input thread panicked")));
        input_backlog.finish_input(end);
    })?;
    if let Err(error) = write_output(&output, &backlog) {
        backlog.close_output();
        return Ok(Ending::OutputFailed { error, buffered: backlog.len() as u64 });
    }
    Ok(match backlog.take_input_end() {
        Some(Err(error)) => Ending::InputFailed(error),
        _ => Ending::Complete,
    })
}

/// Reads until end of input, an error, or the output closing.
fn read_input(input: &Endpoint, backlog: &Backlog) -> io::Result<()> {
    while let Some(mut vacant) = backlog.reserve()? {
        match input.read(vacant.as_mut_slice())? {
            0 => return Ok(()),
            n => backlog.commit(n),
        }
    }
    Ok(())
}

/// Writes until the backlog is drained after input ended, or an error.
fn write_output(output: &Endpoint, backlog: &Backlog) -> io::Result<()> {
    while let Some(filled) = backlog.next() {
        let n = output.write(filled.as_slice())?;
        backlog.consume(n);
    }
    Ok(())
}
