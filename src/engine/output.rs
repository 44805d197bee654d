//! An output's thread: writes whatever is at its reader's place until the input has ended and
//! the output has it all, then (`--sync`) flushes it to stable storage.

use std::io;

use super::splice::PipeWriter;
use super::{Failure, Route};
use crate::backlog::{Front, Reader};
use crate::endpoint::Endpoint;

/// Writes every byte to `output`: from memory with `write`, from a pool pipe by splice (or
/// by copying out of it where the output refuses splice). Returns once the output has every
/// byte the input gave, or with how it failed; an `Interrupted` error when the run was
/// stopped first.
pub fn write_all(
    output: &Endpoint,
    mut reader: Reader,
    route: &Route,
    sync: bool,
) -> Result<(), Failure> {
    let mut pipes = PipeWriter::new(output, route);
    let written = loop {
        let Some(front) = reader.front() else { break Ok(()) };
        let n = match front {
            Front::Memory(filled) => output.write(filled.as_slice()),
            Front::Pipe(pipe, len) => pipes.write(&pipe, len),
        };
        match n {
            Ok(n) => reader.consume(n),
            Err(error) => break Err(error),
        }
    };
    // Gone: this output holds the backlog back no more, whether it failed or has it all.
    drop(reader);
    if output.stop().requested() {
        return Err(Failure::Io(io::ErrorKind::Interrupted.into()));
    }
    written.map_err(Failure::Io)?;
    if sync {
        output.sync().map_err(Failure::Sync)?;
    }
    Ok(())
}
