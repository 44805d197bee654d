//! The portable engine's input side: `read` into the backlog's memory.
//!
//! Two copies per byte (into user memory and out again), which costs about 0.2-0.3 CPU seconds
//! per GiB; compression pipelines move a few hundred MB/s at most and do not notice. Every read
//! is committed at once, so partial data (a short line) goes out without waiting for more.
//! While nothing is queued, what a read got goes on from the input thread itself where it can
//! ([`Bypass`]).

use std::io;

use super::gather::Gather;
use super::pace::Pacer;
use super::{Flow, Route, spill};
use crate::backlog::{Producer, Space};
use crate::endpoint::Endpoint;
use crate::sys;
use crate::words::describe;

/// Reads until end of input, an error, or no reader being left (an `Interrupted` error), at
/// no more than the input rate limit, for `outputs` (readers 0, 1, ... of the backlog).
pub fn read_input(
    input: &Endpoint,
    outputs: &[Endpoint],
    mut producer: Producer,
    route: &Route,
    flow: &Flow,
) -> io::Result<()> {
    let mut pacer = Pacer::new(&flow.limits.input);
    let mut gather = Gather::new(input, outputs);
    let mut bypass = Bypass::new(outputs, producer.meter().readers());
    loop {
        let mut most = pacer.quantum();
        let direct = match &mut bypass {
            Some(bypass) if bypass.allowed(flow) => {
                let Some(room) = producer.wait_for_room() else { return Err(nobody_left()) };
                room.empty.then_some((bypass, &outputs[0]))
            }
            _ => None,
        };
        if direct.is_some() {
            // A read that goes on at once stays in the cache.
            most = Some(most.map_or(Bypass::MOST, |most| most.min(Bypass::MOST)));
        }
        let Some(took) = read_passing(input, &mut producer, most, direct, route)? else {
            return Ok(());
        };
        pacer.moved(took.got, input.stop());
        // Under an input rate limit, the pacer decides when to read.
        if let (Some(gather), None) = (&mut gather, pacer.quantum()) {
            gather.after(took.got, &mut producer);
        }
    }
}

/// Bytes just read while nothing is queued, written on to the one output from the input
/// thread with a write that never waits ([`sys::write_nowait`]; what does not fit is queued as
/// usual). With nothing queued the output thread has nothing under way, so order is kept. A
/// line crosses with one wakeup instead of two, and a copy into an output that keeps up runs
/// in one thread, as `cat`'s does. Never past what only the output thread keeps
/// ([`Flow::output_thread_only`]), into another program's writer or a network link, or where
/// a hash or a second output reads the same bytes.
#[derive(Debug)]
pub struct Bypass {
    /// The output has not refused a write that never waits.
    open: bool,
}

impl Bypass {
    /// The most read at once to be passed on: a copy that stays in the cache.
    const MOST: usize = 256 << 10;

    /// A bypass to `outputs[0]`, where it may be used at all: one reader of the backlog, a
    /// descriptor.
    pub fn new(outputs: &[Endpoint], readers: usize) -> Option<Bypass> {
        let [output] = outputs else { return None };
        let plain = output.as_stream().is_none() && output.link().is_none();
        (readers == 1 && plain).then_some(Bypass { open: true })
    }

    /// Whether bytes may go past the output thread now.
    pub fn allowed(&self, flow: &Flow) -> bool {
        self.open && !flow.output_thread_only()
    }

    /// Writes what of `bytes` goes into `output` without waiting; how much did.
    fn pass(&mut self, output: &Endpoint, route: &Route, bytes: &[u8]) -> usize {
        match sys::write_nowait(output.fd(), bytes) {
            Some(Ok(n)) => n,
            // The output thread meets the error, and says it.
            Some(Err(_)) => 0,
            None => {
                self.open = false;
                route.note(format_args!("{} takes no write that never waits", output.name));
                0
            }
        }
    }
}

/// One read into the backlog ([`read_once`]); with `direct`, nothing is queued and what the
/// read got goes on through the bypass first. Counts the consumer as waiting meanwhile: the
/// output thread, which waits too, does not (it is not the one feeding it).
pub fn read_passing(
    input: &Endpoint,
    producer: &mut Producer,
    most: Option<usize>,
    direct: Option<(&mut Bypass, &Endpoint)>,
    route: &Route,
) -> io::Result<Option<Took>> {
    let Some((bypass, output)) = direct else { return read_once(input, producer, most, None) };
    producer.meter().reader_starved(0, true);
    let mut passed = 0;
    let mut pass_on = |bytes: &[u8]| {
        passed = bypass.pass(output, route, bytes);
        passed
    };
    let took = read_once(input, producer, most, Some(&mut pass_on));
    producer.meter().reader_starved(0, false);
    producer.meter().add_passed(passed);
    took
}

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
    pass_on: Option<PassOn<'_>>,
) -> io::Result<Option<Took>> {
    let read_block = producer.read_block();
    let mut vacant = match producer.reserve()? {
        None => return Err(nobody_left()),
        Some(Space::Spill(vacant)) => {
            let offered = most.map_or(vacant.len(), |most| most.min(vacant.len()));
            let got = spill::take_in(input, vacant, offered)?;
            return Ok((got > 0).then_some(Took { got, spilled: true }));
        }
        Some(Space::Memory(vacant)) => vacant,
    };
    let room = vacant.as_mut_slice();
    let len = most.map_or(room.len(), |most| most.min(room.len()));
    let room = &mut room[..len];
    let offered = room.len();
    match input.read(room) {
        Ok(0) => Ok(None),
        Ok(got) => {
            let passed = pass_on.map_or(0, |pass_on| pass_on(&room[..got]));
            if passed < got {
                room.copy_within(passed..got, 0);
                vacant.commit(got - passed);
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

/// The input side's end when no output is left to deliver to: the run's end, not a failure.
pub fn nobody_left() -> io::Error {
    io::Error::new(io::ErrorKind::Interrupted, "no output is left")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::Relaxed;

    use super::*;
    use crate::backlog::Gates;
    use crate::endpoint::stream::Stream;
    use crate::stop::Stop;

    fn pipe(stop: &Arc<Stop>) -> (Endpoint, std::os::fd::OwnedFd) {
        let (read, write) = rustix::pipe::pipe().unwrap();
        (Endpoint::opened(write, "a pipe", stop).unwrap(), read)
    }

    #[test]
    fn only_a_lone_plain_output_is_bypassed() {
        let stop = Arc::new(Stop::default());
        let ((one, _a), (two, _b)) = (pipe(&stop), pipe(&stop));
        let plain = Flow::default();
        let bypass = Bypass::new(std::slice::from_ref(&one), 1).unwrap();
        assert!(bypass.allowed(&plain));
        // Two outputs, or a hash reading the same bytes.
        assert!(Bypass::new(&[one.clone(), two], 2).is_none());
        assert!(Bypass::new(std::slice::from_ref(&one), 2).is_none());
        // Another program's writer.
        let writer = Arc::new(Stream::writer(Box::new(io::sink())));
        let program = Endpoint::stream(writer, "a writer", &stop);
        assert!(Bypass::new(std::slice::from_ref(&program), 1).is_none());
        // What only the output thread keeps: blocks, a start watermark.
        let block = Some(super::super::Block { size: 512, pad: false });
        let blocks = Flow { block, ..Flow::default() };
        assert!(!bypass.allowed(&blocks));
        let gates = Gates { start_at: 1 << 20, ..Gates::default() };
        let gated = Flow { gates, ..Flow::default() };
        assert!(!bypass.allowed(&gated));
        // An output rate, which may be set while accel runs.
        plain.limits.output.store(1 << 20, Relaxed);
        assert!(!bypass.allowed(&plain));
    }
}
