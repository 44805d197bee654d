//! The input thread passing what it read straight on, past the output thread, while nothing
//! is queued: [`Bypass`], and its [relay](Bypass::relay) (read, write, read: nothing between)
//! while the consumer waits on the input. Both engines' reads into memory go through it (the
//! splice engine's, where it reads rather than splices).

use std::io;
use std::sync::atomic::Ordering::Relaxed;

use super::gather::Gather;
use super::read::{Took, read_once};
use super::{Flow, Route};
use crate::backlog::Producer;
use crate::endpoint::{Endpoint, FdKind};
use crate::sys;

/// Bytes just read while nothing is queued, written on to the one output from the input
/// thread with a write that never waits (to a pipe, a plain write on a description of the
/// pipe of accel's own, [`sys::PrivateWriter`]; else [`sys::write_nowait`]; what does not fit
/// is queued as usual). With nothing queued the output thread has nothing under way, so order
/// is kept. A line crosses with one wakeup instead of two, and a copy into an output that
/// keeps up runs in one thread, as `cat`'s does. Never past what only the output thread keeps
/// ([`Flow::output_thread_only`]), into another program's writer or a peer on another host,
/// or where a hash or a second output reads the same bytes.
#[derive(Debug)]
pub struct Bypass {
    /// The output has not refused a write that never waits.
    open: bool,
    /// The last read filled what it asked for: the input is ahead, and reads go into the
    /// backlog, up to [`Bypass::MOST`] at once, rather than through a relay.
    ahead: bool,
    /// What a relay reads into; allocated at the first.
    buffer: Vec<u8>,
    /// The output pipe's own non-blocking description, where one could be had: closed with
    /// the bypass, before the input's end is told (the output's reader waits for every writer).
    writer: Option<sys::PrivateWriter>,
}

/// Where a relay ([`Bypass::relay`]) reads and writes, and how much at once.
pub struct Relay<'a> {
    pub input: &'a Endpoint,
    pub output: &'a Endpoint,
    pub route: &'a Route,
    pub flow: &'a Flow,
    /// The most one read takes.
    pub most: usize,
    /// A read of this many bytes ends the relay (as one that fills `most` does).
    pub until: usize,
}

impl Bypass {
    /// The most read at once to be passed on: a copy that stays in the cache.
    pub const MOST: usize = 256 << 10;

    /// The most a relay reads at once. A read that fills it shows the input ahead: the relay
    /// ends, and reads of up to [`Bypass::MOST`] go into the backlog.
    pub const RELAY: usize = 16 << 10;

    /// A bypass to `outputs[0]`, where it may be used at all: one reader of the backlog, a
    /// descriptor.
    pub fn new(outputs: &[Endpoint], readers: usize) -> Option<Bypass> {
        let [output] = outputs else { return None };
        let plain = output.as_stream().is_none() && !output.is_remote();
        if readers != 1 || !plain {
            return None;
        }
        // Not for a packet-mode pipe: a description of one's own would not make packets.
        let pipe = output.kind == FdKind::Pipe && !output.packets;
        let writer = pipe.then(|| sys::PrivateWriter::open(output.fd()));
        Some(Bypass { open: true, ahead: false, buffer: Vec::new(), writer: writer.flatten() })
    }

    /// Whether bytes may go past the output thread now.
    pub fn allowed(&self, flow: &Flow) -> bool {
        self.open && !flow.output_thread_only()
    }

    /// Whether the next read from `input`, with nothing queued and `space` bytes of memory,
    /// goes through a [relay](Bypass::relay): the input is a pipe (whose packets, if any, fit
    /// a relay's read; a datagram socket's might not) and is not ahead, neither an input rate
    /// limit (its `quantum`) nor `--input-block-size` sets the size of a read, and a relay's
    /// read fits in memory.
    pub fn relays(
        &self,
        input: &Endpoint,
        producer: &Producer,
        quantum: Option<usize>,
        space: usize,
    ) -> bool {
        let sized = quantum.is_some() || producer.read_block().is_some();
        input.kind == FdKind::Pipe && !self.ahead && !sized && space > 0
    }

    /// Reads and passes each read on at once, from this thread, for as long as the consumer
    /// waits on the input: reads come back short (the input is drained), each goes on whole,
    /// and nothing else may need the input thread between two reads (`gather` has no pause
    /// to plan, the bypass is still allowed, no input rate is set). A line then costs a read
    /// and a write and nothing else, as it does `cat`: no clock, no lock (what the input
    /// thread does between a write and its next read delays the consumer, when the two share
    /// a CPU). The consumer counts as waiting throughout.
    ///
    /// Returns the last read (the caller treats it as any other), `None` at end of input. The
    /// reads before it are passed on, counted, and told to `gather` ([`Gather::relayed`]);
    /// what the output did not take of the last is queued.
    pub fn relay(
        &mut self,
        to: Relay<'_>,
        producer: &mut Producer,
        mut gather: Option<&mut Gather>,
    ) -> io::Result<Option<Took>> {
        let Relay { input, output, route, flow, most, until } = to;
        if self.buffer.len() < most {
            self.buffer.resize(most, 0);
        }
        producer.meter().reader_starved(0, true);
        let took = loop {
            let got = match input.read(&mut self.buffer[..most]) {
                Ok(0) => break Ok(None),
                Ok(got) => got,
                Err(error) => break Err(error),
            };
            let bytes = &self.buffer[..got];
            let took = Took { got, spilled: false };
            if !self.allowed(flow) {
                // The output thread alone may write now (an output rate was set meanwhile).
                break producer.queue(bytes).map(|()| Some(took));
            }
            // Whether to read again here, decided before the write: what is done after it
            // delays the consumer.
            self.ahead = got == most;
            let short = got < until && !self.ahead;
            let quiet = gather.as_deref().is_none_or(|gather| gather.consumers_short(producer));
            let unpaced = flow.limits.input.load(Relaxed) == 0;
            let again = short && quiet && unpaced;
            let passed = Self::pass(&mut self.open, self.writer.as_ref(), output, route, bytes);
            producer.meter().add_passed(passed);
            if passed < got {
                break producer.queue(&bytes[passed..]).map(|()| Some(took));
            }
            if !again {
                break Ok(Some(took));
            }
            if let Some(gather) = gather.as_deref_mut() {
                gather.relayed(got);
            }
        };
        producer.meter().reader_starved(0, false);
        took
    }

    /// Writes what of `bytes` goes into `output` without waiting, through `writer` where
    /// there is one; how much did. `open` is cleared when the output refuses such writes.
    fn pass(
        open: &mut bool,
        writer: Option<&sys::PrivateWriter>,
        output: &Endpoint,
        route: &Route,
        bytes: &[u8],
    ) -> usize {
        let wrote = match writer {
            Some(writer) => Some(writer.write(bytes)),
            None => sys::write_nowait(output.fd(), bytes),
        };
        match wrote {
            Some(Ok(n)) => n,
            // The output thread meets the error, and says it.
            Some(Err(_)) => 0,
            None => {
                *open = false;
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
    // A read may pass on several pieces (an input that moves its bytes: a buffer each).
    let mut passed = 0;
    let mut pass_on = |bytes: &[u8]| {
        let n = Bypass::pass(&mut bypass.open, bypass.writer.as_ref(), output, route, bytes);
        passed += n;
        n
    };
    let took = read_once(input, producer, most, Some(&mut pass_on));
    producer.meter().reader_starved(0, false);
    producer.meter().add_passed(passed);
    if let Ok(Some(took)) = &took {
        bypass.ahead = took.got >= Bypass::RELAY;
    }
    took
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::Ordering::Relaxed;

    use std::os::fd::OwnedFd;

    use super::*;
    use crate::backlog::{Gates, Reader};
    use crate::endpoint::stream::Stream;
    use crate::stop::Stop;

    fn pipe(stop: &Arc<Stop>) -> (Endpoint, OwnedFd) {
        let (read, write) = rustix::pipe::pipe().unwrap();
        (Endpoint::opened(write, "a pipe", stop).unwrap(), read)
    }

    /// A backlog of 1 MiB for one reader (kept while the test runs), a route, and a pipe into
    /// `input` (its write end).
    fn relay_setup(stop: &Arc<Stop>) -> (Producer, Reader, Route, Endpoint, OwnedFd) {
        let (producer, reader) = backlog_of(Gates::default());
        let route = Route {
            engine: super::super::EngineKind::Copy,
            input_splice: false.into(),
            output_splice: false.into(),
            log: Arc::new(crate::log::Log::default()),
        };
        let (read, write) = rustix::pipe::pipe().unwrap();
        let input = Endpoint::opened(read, "stdin", stop).unwrap();
        (producer, reader, route, input, write)
    }

    /// A relay from `input` to `output` reading up to `most` bytes at once, ended by a read
    /// that fills them.
    fn relay_of<'a>(
        input: &'a Endpoint,
        output: &'a Endpoint,
        route: &'a Route,
        flow: &'a Flow,
        most: usize,
    ) -> Relay<'a> {
        Relay { input, output, route, flow, most, until: most }
    }

    /// A backlog of 1 MiB for one reader, gated by `gates`.
    fn backlog_of(gates: Gates) -> (Producer, Reader) {
        let meter = Arc::new(crate::meter::Meter::new(1 << 20, 1));
        let log = Arc::new(crate::log::Log::default());
        let (producer, mut readers) =
            crate::backlog::backlog(1 << 20, 1, gates, None, meter, log).unwrap();
        (producer, readers.pop().unwrap())
    }

    #[test]
    fn a_relay_passes_short_reads_on_until_one_fills_its_buffer() {
        use std::io::{Read, Write};
        let stop = Arc::new(Stop::default());
        let (mut producer, _reader, route, input, feed) = relay_setup(&stop);
        let (output, out) = pipe(&stop);
        let mut bypass = Bypass::new(std::slice::from_ref(&output), 1).unwrap();
        let most = Bypass::RELAY;
        let relay = std::thread::spawn(move || {
            let flow = Flow::default();
            let took =
                bypass.relay(relay_of(&input, &output, &route, &flow, most), &mut producer, None);
            (took.unwrap(), bypass.ahead, producer)
        });
        let (mut feed, mut out) = (std::fs::File::from(feed), std::fs::File::from(out));
        // What arrives at the output within a minute (a relay that stopped early fails here).
        let mut arrives = |len: usize| {
            let mut fds = [rustix::event::PollFd::new(&out, rustix::event::PollFlags::IN)];
            let minute = rustix::event::Timespec { tv_sec: 60, tv_nsec: 0 };
            assert_eq!(rustix::event::poll(&mut fds, Some(&minute)).unwrap(), 1, "nothing came");
            let mut got = vec![0; len];
            out.read_exact(&mut got).unwrap();
            got
        };
        // Each line arrives before the next is written: passed on, one read at a time.
        for line in [&b"one\n"[..], b"two\n", b"three\n"] {
            feed.write_all(line).unwrap();
            assert_eq!(arrives(line.len()), line);
        }
        // A read that fills the relay's buffer ends it: the input is ahead. (One that went on
        // would meet the end of input.)
        let burst = vec![9u8; 2 * most];
        feed.write_all(&burst).unwrap();
        drop(feed);
        assert_eq!(arrives(most), burst[..most]);
        let (took, ahead, producer) = relay.join().unwrap();
        assert_eq!(took, Some(Took { got: most, spilled: false }));
        assert!(ahead);
        let meter = producer.meter();
        assert_eq!(meter.reader_bytes(0), 4 + 4 + 6 + most as u64, "every passed byte counted");
        assert_eq!(producer.ahead(0), Some(0), "nothing queued");
    }

    #[test]
    fn what_a_relay_cannot_pass_is_queued() {
        use std::io::Write;
        let stop = Arc::new(Stop::default());
        let (mut producer, _reader, route, input, feed) = relay_setup(&stop);
        let (output, _out) = pipe(&stop);
        // The consumer's pipe is full.
        while sys::write_nowait(output.fd(), &[0; 4096]).unwrap().unwrap() > 0 {}
        let mut bypass = Bypass::new(std::slice::from_ref(&output), 1).unwrap();
        std::fs::File::from(feed).write_all(b"a line\n").unwrap();
        let flow = Flow::default();
        let to = || relay_of(&input, &output, &route, &flow, 4096);
        let took = bypass.relay(to(), &mut producer, None).unwrap();
        assert_eq!(took, Some(Took { got: 7, spilled: false }));
        assert_eq!(producer.ahead(0), Some(7), "queued for the output thread");
        assert_eq!(producer.meter().reader_bytes(0), 0);
        // The writer closed: the next relay meets the end of input.
        assert_eq!(bypass.relay(to(), &mut producer, None).unwrap(), None);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_relay_passes_into_a_pipe_that_was_spliced_into() {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        let stop = Arc::new(Stop::default());
        let (mut producer, _reader, route, input, feed) = relay_setup(&stop);
        let (output, out) = pipe(&stop);
        // A splice into the consumer's pipe, as the splice engine's output thread makes: the
        // kernel then refuses writes that never wait (`RWF_NOWAIT`) on that description.
        let (from, into) = rustix::pipe::pipe().unwrap();
        rustix::io::write(&into, b"spliced\n").unwrap();
        assert_eq!(sys::splice(from.as_fd(), output.fd(), 8, false), Ok(8));
        let mut bypass = Bypass::new(std::slice::from_ref(&output), 1).unwrap();
        std::fs::File::from(feed).write_all(b"a line\n").unwrap();
        let flow = Flow::default();
        let to = relay_of(&input, &output, &route, &flow, 4096);
        // The line is passed on, then the relay meets the end of input.
        assert_eq!(bypass.relay(to, &mut producer, None).unwrap(), None);
        assert!(bypass.open, "the output still takes writes that never wait");
        assert_eq!(producer.ahead(0), Some(0), "nothing queued");
        drop((bypass, output));
        let mut got = String::new();
        std::fs::File::from(out).read_to_string(&mut got).unwrap();
        assert_eq!(got, "spliced\na line\n");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_packet_mode_output_keeps_the_shared_description() {
        let stop = Arc::new(Stop::default());
        let (plain, _a) = pipe(&stop);
        assert!(Bypass::new(std::slice::from_ref(&plain), 1).unwrap().writer.is_some());
        // Each write into a packet-mode pipe is a packet, through the description that has
        // O_DIRECT: a description of accel's own would write a byte stream.
        let (_b, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::DIRECT).unwrap();
        let packets = Endpoint::opened(write, "a packet-mode pipe", &stop).unwrap();
        assert!(packets.packets);
        assert!(Bypass::new(std::slice::from_ref(&packets), 1).unwrap().writer.is_none());
    }

    #[test]
    fn a_relay_is_for_a_pipe_read_at_any_size() {
        let stop = Arc::new(Stop::default());
        let (producer, _reader, _route, input, _feed) = relay_setup(&stop);
        let (output, _out) = pipe(&stop);
        let bypass = Bypass::new(std::slice::from_ref(&output), 1).unwrap();
        assert!(bypass.relays(&input, &producer, None, 1 << 20));
        assert!(!bypass.relays(&input, &producer, Some(1000), 1 << 20), "an input rate");
        assert!(!bypass.relays(&input, &producer, None, 0), "no memory free");
        // A datagram longer than a relay's read would be cut.
        let (datagrams, _other) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let socket = Endpoint::opened(OwnedFd::from(datagrams), "a socket", &stop).unwrap();
        assert!(!bypass.relays(&socket, &producer, None, 1 << 20));
        // --input-block-size: every read is one block.
        let (blocks, _reader) = backlog_of(Gates { read_block: Some(512), ..Gates::default() });
        assert!(!bypass.relays(&input, &blocks, None, 1 << 20));
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
        let writer = Arc::new(Stream::writer(Box::new(io::sink()), "the program's writer"));
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
