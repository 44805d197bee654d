//! An output's thread: writes whatever is at its reader's place until the input has ended and
//! the output has it all, then (`--sync`) flushes it to stable storage.
//!
//! Under `-r` each write is a quantum of the rate, paced ([`Pacer`]); under `--block-size`
//! every write is exactly one block, the last one short or padded with zeros (`--pad`), and
//! partial data waits for a whole block: the only case where it waits for more. A network
//! output, having just sent, lets small pieces coalesce for at most a millisecond
//! ([`COALESCE`]); a pipe the consumer is slow to drain is refilled when it has drained a
//! while ([`Drain`]).

use std::io;
use std::time::{Duration, Instant};

use super::fault::test_panic;
use super::gather::Drain;
use super::pace::Pacer;
use super::spill::{self, PassError};
use super::splice::PipeWriter;
use super::{Block, Failure, Flow, InputEnd, Route};
use crate::backlog::{Front, Reader};
use crate::endpoint::{Endpoint, FdKind, resumed_at};
use crate::log::{Log, Once};

/// How long a network output, having just sent, lets small pieces coalesce before it sends
/// again (at most; it sends as soon as [`COALESCE_BYTES`] are there). A producer that writes a
/// few KiB at a time (`bzip2 -dc` writes 5,000 bytes) would otherwise cost a frame, a
/// segment and a wakeup at both ends per piece: through accel encrypted, 300 MiB of them took
/// 2.6 times mbuffer's CPU. A piece after a pause goes at once; one in a stream waits at most
/// this long.
const COALESCE: Duration = Duration::from_millis(1);

/// What a network output sends at once without waiting for more: one full frame.
const COALESCE_BYTES: usize = 64 * 1024;

/// Writes every byte to `output`: from memory with `write`, from a pool pipe by splice (or
/// by copying out of it where the output refuses splice), then ends a network output's
/// stream ([`end_stream`]). Returns once the output has every byte the input gave, or with
/// how it failed; an `Interrupted` error when the run was stopped first.
///
/// A network output that resumes dropped connections keeps its bytes in the backlog until
/// the receiver confirms them; when a connection is back, it goes on from where the
/// receiver says, sending again what the receiver did not have.
pub fn write_all(
    output: &Endpoint,
    mut reader: Reader,
    route: &Route,
    flow: &Flow,
    sync: bool,
    input: &InputEnd,
) -> Result<(), Failure> {
    output.keep_until_confirmed(&reader);
    let mut pacer = Pacer::new(&flow.limits.output);
    let written = loop {
        let written = match flow.block {
            None => write_as_it_comes(output, &mut reader, route, &mut pacer),
            Some(block) => write_blocks(output, &mut reader, block, &mut pacer, route),
        }
        // A peer that gave up stops its reader, which then finds no more data.
        .and_then(|()| match output.gave_up() {
            Some(error) => Err(Failure::Io(error)),
            None => end_stream(output, input, &route.log),
        });
        if let Err(Failure::Io(error)) = &written {
            // The connection is back: the reader goes on where the receiver said (the
            // endpoint sent it back there) at its next look for data.
            if resumed_at(error).is_some() {
                continue;
            }
        }
        break written;
    };
    // Gone: this output holds the backlog back no more, whether it failed or has it all.
    drop(reader);
    if output.stop().requested() {
        return Err(Failure::Io(io::ErrorKind::Interrupted.into()));
    }
    written?;
    if sync {
        output.sync().map_err(Failure::Sync)?;
    }
    Ok(())
}

/// A network output's last step, once it has sent every byte: when the input ended
/// cleanly, the end of the stream and the receiver's confirmation of it
/// ([`Endpoint::end_stream`]), this output's own work, so that a frozen receiver holds up no
/// other output, and the run's stop (a stall, a signal) cuts the wait short like any other.
/// (A stream that did not end cleanly is aborted after the run, saying why.)
fn end_stream(output: &Endpoint, input: &InputEnd, log: &Log) -> Result<(), Failure> {
    if !output.is_remote() {
        return Ok(());
    }
    let interrupted = || Failure::Io(io::ErrorKind::Interrupted.into());
    match input.wait(output.stop()) {
        None => Err(interrupted()),
        Some(false) => Ok(()),
        Some(true) => {
            log.debug(format_args!(
                "{}: every byte sent; ending the stream, waiting for the receiver's confirmation",
                output.name
            ));
            output.end_stream().map_err(|error| match output.stop().requested() {
                true => interrupted(),
                false => Failure::Io(error),
            })
        }
    }
}

/// Writes whatever is there, at once (at most a quantum of the rate at a time).
fn write_as_it_comes(
    output: &Endpoint,
    reader: &mut Reader,
    route: &Route,
    pacer: &mut Pacer<'_>,
) -> Result<(), Failure> {
    let mut pipes = PipeWriter::new(output, route);
    let mut scratch = Vec::new();
    // A program's writer (the library) too: a caller's small writes into a write-behind
    // buffer would otherwise wake this thread once each.
    let coalesces = output.is_remote() || output.kind == FdKind::Stream;
    let mut coalesce_until = None;
    let mut drain = Drain::new(output);
    let mut taken = 0;
    loop {
        let mut most = pacer.quantum();
        if let (Some(until), None) = (coalesce_until, most) {
            reader.coalesce(COALESCE_BYTES, until);
        }
        let Some(front) = reader.front() else { return Ok(()) };
        if let (Some(drain), None) = (&mut drain, most) {
            most = drain.before(output);
        }
        let limit = |len: usize| most.map_or(len, |most| most.min(len));
        let began = drain.as_ref().map(|_| Instant::now());
        let n = match front {
            Front::Memory(filled) => {
                let len = limit(filled.as_slice().len());
                output.write_filled(&filled, len).map_err(Failure::Io)?
            }
            Front::Pipe(pipe, len) => pipes.write(&pipe, limit(len)).map_err(Failure::Io)?,
            Front::Spill(range) => {
                let passed = spill::pass_on(output, &range, limit(range.len()), &mut scratch);
                passed.map_err(|error| match error {
                    PassError::ReadBack(error) => {
                        Failure::Spill { dir: range.dir().to_owned(), error }
                    }
                    PassError::Write(error) => Failure::Io(error),
                })?
            }
        };
        if let (Some(drain), Some(began)) = (&mut drain, began) {
            drain.after(n, began.elapsed());
        }
        reader.consume(n);
        taken += n as u64;
        test_panic("output", taken);
        pacer.moved(n, output.stop());
        if coalesces {
            coalesce_until = Some(Instant::now() + COALESCE);
        }
    }
}

/// Writes exactly one block at a time, straight from the buffer where a block lies in one
/// chunk, assembled in a block of its own where it spans two. The last block is short (or
/// padded); one before it only when memory was refused with less than a block held, which
/// is said once: a short block keeps every byte, where waiting would wait for ever.
fn write_blocks(
    output: &Endpoint,
    reader: &mut Reader,
    block: Block,
    pacer: &mut Pacer<'_>,
    route: &Route,
) -> Result<(), Failure> {
    let mut assembled = vec![0u8; block.size];
    let short_said = Once::default();
    let mut taken = 0;
    loop {
        let data = match reader.front_of_at_least(block.size) {
            None => return Ok(()),
            Some(Front::Memory(filled)) if filled.as_slice().len() >= block.size => {
                write_block(output, &filled.as_slice()[..block.size]).map_err(Failure::Io)?;
                block.size
            }
            Some(_) => {
                let data = reader.copy_out(&mut assembled).map_err(|error| Failure::Spill {
                    dir: reader.spill_dir().unwrap_or_default(),
                    error,
                })?;
                let last = data < block.size && reader.at_end(data);
                if data < block.size && !last && short_said.first() {
                    route.log.warn(format_args!(
                        "{}: a short block of {data} bytes: memory was refused before a whole \
                         --block-size block was read",
                        output.name
                    ));
                }
                let size = if block.pad && last {
                    // The last block: zeros to its full size, as a tape wants it.
                    assembled[data..].fill(0);
                    reader.meter().add_padding(reader.index(), block.size - data);
                    block.size
                } else {
                    data
                };
                write_block(output, &assembled[..size]).map_err(Failure::Io)?;
                data
            }
        };
        reader.consume(data);
        taken += data as u64;
        test_panic("output", taken);
        pacer.moved(data, output.stop());
    }
}

/// Writes all of `block`: one write on a tape or a packet socket, which take it whole.
fn write_block(output: &Endpoint, block: &[u8]) -> io::Result<()> {
    let mut written = 0;
    while written < block.len() {
        written += output.write(&block[written..])?;
    }
    Ok(())
}
