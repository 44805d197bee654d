//! The descriptors accel sits between, what kind of file each is, and blocking I/O on them
//! that copes with whatever flags they were inherited with, and ends when the run does.
//!
//! accel never sets `O_NONBLOCK` on a descriptor it inherited: the flag belongs to the open file
//! description, which the shell, the terminal and sibling processes share, and setting it breaks
//! them. But someone else may have set it, so every call here treats `EAGAIN` as "wait in
//! `poll`, then retry", and `EINTR` as "retry, unless the run is over" (see `stop.rs`).
//!
//! A network peer (`--to`, `--from`) is an endpoint too, whose socket is accel's own
//! (`O_NONBLOCK`, so splicing from it never holds a pipe's lock). It is connected or accepted
//! after the endpoints are planned, once signals are handled (see `net`). A plain peer
//! (`--insecure`) is read and written like any descriptor, and spliced; an encrypted one reads
//! and writes through its secure channel, and so through memory. What only a peer has (the
//! end of its stream, what its receiver confirms, a connection that comes back) the engine
//! asks in its own words, of `peer.rs`, and never of the network itself.

pub mod files;
pub mod open;
mod peer;
pub mod stream;

pub use peer::resumed_at;

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use rustix::event::PollFlags;
use rustix::fs::{FileType, OFlags};
use rustix::io::Errno;

use crate::backlog::{Filled, Owned};
use crate::net::Link;
use crate::stop::{self, Stop};
use crate::sys;
use files::{Files, Shape};
use stream::Stream;

/// What kind of file a descriptor is; decides which data paths are safe and fast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FdKind {
    /// A pipe or FIFO.
    Pipe,
    /// A regular file.
    File,
    /// A terminal.
    Terminal,
    /// A socket.
    Socket,
    /// Another character device (`/dev/null`, `/dev/full`, ...).
    CharDevice,
    /// Anything else (a directory, a block device, ...).
    Other,
    /// A program's own reader or writer (the library's `Read`, `Write`): no descriptor,
    /// only `read` and `write`.
    Stream,
}

impl fmt::Display for FdKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FdKind::Pipe => "pipe",
            FdKind::File => "file",
            FdKind::Terminal => "terminal",
            FdKind::Socket => "socket",
            FdKind::CharDevice => "character device",
            FdKind::Other => "other",
            FdKind::Stream => "stream",
        })
    }
}

/// One end of accel: its input (stdin, `-i FILE`, FILE operands) or one of its outputs
/// (stdout, `-o`).
#[derive(Debug, Clone)]
pub struct Endpoint {
    fd: Descriptor,
    /// How the user knows it: `stdin`, `stdout`, or the path given.
    pub name: String,
    /// What kind of file it is.
    pub kind: FdKind,
    /// Its size when it is a regular file (how much input to expect).
    pub file_size: Option<u64>,
    /// Device and inode when it is a regular file, to tell whether two are the same file.
    pub file_id: Option<(u64, u64)>,
    /// Opened with `O_APPEND` (splice refuses those).
    pub append: bool,
    /// Our end of a packet-mode pipe (`O_DIRECT`, pipe(7)), where each write makes packets of
    /// up to a page and a read shorter than a packet discards the rest of it. Only the write
    /// end shows the flag: a packet-mode stdin is found by reading (see the splice engine).
    pub packets: bool,
    /// An input's allowance: the bytes it may still read before it ends, when it stops at a
    /// size (pv's `-S`); shared by the endpoint's clones.
    left: Option<Arc<AtomicU64>>,
    /// An input's lines, counted as they are read (pv's `-l`): the byte that ends a line,
    /// and the count, which the watcher shows.
    lines: Option<(u8, Arc<AtomicU64>)>,
    /// The run's stop: an interrupted call gives up once it is requested.
    stop: Arc<Stop>,
    /// The program whose output this input is, when accel started it: its end of file is
    /// the input's end only once it exited 0.
    producer: Option<Producer>,
}

/// A program whose output is accel's input (the command `accel --serve-ssh` runs for a
/// pull): a `zfs send` that fails mid-way closes its stdout as one that finished does, so
/// the end of file alone would pass a cut stream off as whole. Its exit status decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Producer {
    /// Its process id (accel's child: its exit is looked at, not reaped).
    pub pid: u32,
    /// How the user knows it: its command line.
    pub command: String,
}

/// A descriptor accel inherited (kept open for the whole process) or opened (closed when the
/// last endpoint holding it goes).
#[derive(Debug, Clone)]
enum Descriptor {
    Inherited(BorrowedFd<'static>),
    Opened(Arc<OwnedFd>),
    /// A network peer's socket, once connected or accepted.
    Network(Arc<Link>),
    /// A program's reader or writer (the library).
    Stream(Arc<Stream>),
    /// FILE operands read in turn: the current one's descriptor.
    Files(Arc<Files>),
}

impl Endpoint {
    /// Standard input, as the producer left it.
    pub fn stdin(stop: &Arc<Stop>) -> io::Result<Endpoint> {
        Endpoint::inspect(Descriptor::Inherited(rustix::stdio::stdin()), "stdin", stop)
    }

    /// Standard output, as the consumer left it.
    pub fn stdout(stop: &Arc<Stop>) -> io::Result<Endpoint> {
        Endpoint::inspect(Descriptor::Inherited(rustix::stdio::stdout()), "stdout", stop)
    }

    /// A descriptor accel opened, known to the user as `name`.
    pub fn opened(fd: OwnedFd, name: &str, stop: &Arc<Stop>) -> io::Result<Endpoint> {
        Endpoint::inspect(Descriptor::Opened(Arc::new(fd)), name, stop)
    }

    /// A program's reader or writer, known as `name`: read and written, never spliced.
    pub fn stream(stream: Arc<Stream>, name: &str, stop: &Arc<Stop>) -> Endpoint {
        Endpoint::of(Descriptor::Stream(stream), name.to_owned(), FdKind::Stream, stop)
    }

    /// FILE operands read in turn, known by their names; `shape` says what they are
    /// together.
    pub fn files(files: Files, shape: Shape, stop: &Arc<Stop>) -> Endpoint {
        let name = files.name();
        let files = Endpoint::of(Descriptor::Files(Arc::new(files)), name, shape.kind, stop);
        Endpoint { file_size: shape.size, ..files }
    }

    /// An endpoint that is no regular file and has no flags to look at.
    fn of(fd: Descriptor, name: String, kind: FdKind, stop: &Arc<Stop>) -> Endpoint {
        Endpoint {
            fd,
            name,
            kind,
            file_size: None,
            file_id: None,
            append: false,
            packets: false,
            left: None,
            lines: None,
            stop: Arc::clone(stop),
            producer: None,
        }
    }

    /// This input, ending once it has read `bytes` (pv's `-S`), unless its end comes first.
    pub fn stopping_after(mut self, bytes: u64) -> Endpoint {
        self.left = Some(Arc::new(AtomicU64::new(bytes)));
        self
    }

    /// This input, counting the lines it reads into `count`: the bytes `end` (`\n`, or `\0`
    /// with pv's `-0`). A counted input is read, never spliced: the bytes must pass through
    /// memory to be counted.
    pub fn counting_lines(mut self, end: u8, count: Arc<AtomicU64>) -> Endpoint {
        self.lines = Some((end, count));
        self
    }

    /// This input, ending only once `producer`, which writes it, has exited 0.
    pub fn produced_by(mut self, producer: Producer) -> Endpoint {
        self.producer = Some(producer);
        self
    }

    /// The reader or writer, when this is a program's stream.
    pub fn as_stream(&self) -> Option<&Arc<Stream>> {
        match &self.fd {
            Descriptor::Stream(stream) => Some(stream),
            _ => None,
        }
    }

    /// Looks at `fd` to learn what it is; changes nothing.
    fn inspect(fd: Descriptor, name: &str, stop: &Arc<Stop>) -> io::Result<Endpoint> {
        let borrowed = fd.as_fd();
        let stat = rustix::fs::fstat(borrowed)?;
        let kind = match FileType::from_raw_mode(stat.st_mode) {
            FileType::Fifo => FdKind::Pipe,
            FileType::RegularFile => FdKind::File,
            FileType::Socket => FdKind::Socket,
            FileType::CharacterDevice if rustix::termios::isatty(borrowed) => FdKind::Terminal,
            FileType::CharacterDevice => FdKind::CharDevice,
            _ => FdKind::Other,
        };
        let file_size = (kind == FdKind::File).then_some(stat.st_size as u64);
        let file_id = (kind == FdKind::File).then_some((stat.st_dev as u64, stat.st_ino as u64));
        let flags = rustix::fs::fcntl_getfl(borrowed)?;
        let append = flags.contains(OFlags::APPEND);
        let packets = kind == FdKind::Pipe && sys::is_packet_mode(flags);
        Ok(Endpoint {
            fd,
            name: name.to_owned(),
            kind,
            file_size,
            file_id,
            append,
            packets,
            left: None,
            lines: None,
            stop: Arc::clone(stop),
            producer: None,
        })
    }

    /// The descriptor. A stream has none: only what splices asks, which a stream never is.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Done with it: the far end sees end of file now, not when accel exits (an output that
    /// has everything while another still writes). Best effort: at worst, at exit. Not a
    /// network peer, whose connection still carries the end mark and its confirmation.
    pub fn retire(&self) {
        if self.link().is_none() && self.as_stream().is_none() {
            let _ = sys::retire(self.fd());
        }
    }

    /// The run's stop, which every blocking call here heeds.
    pub fn stop(&self) -> &Stop {
        &self.stop
    }

    /// Whether `self` and `other` are the same regular file.
    pub fn same_file(&self, other: &Endpoint) -> bool {
        self.file_id.is_some() && self.file_id == other.file_id
    }

    /// Flushes what was written to a file or a block device to stable storage (`--sync`);
    /// nothing to do for pipes, sockets and character devices; a program's writer is flushed.
    pub fn sync(&self) -> io::Result<()> {
        if let Some(stream) = self.as_stream() {
            return stream.flush(&self.stop);
        }
        let stat = rustix::fs::fstat(self.fd())?;
        match FileType::from_raw_mode(stat.st_mode) {
            // An interrupted flush is tried again, the run over or not: the bytes are written,
            // and only this says that they are on stable storage.
            FileType::RegularFile | FileType::BlockDevice => {
                Ok(rustix::io::retry_on_intr(|| rustix::fs::fdatasync(self.fd()))?)
            }
            _ => Ok(()),
        }
    }

    /// For a regular file, the bytes from the current offset to its end: what there is to read
    /// (for FILE operands, in all of them that are left, when all are regular files).
    pub fn remaining(&self) -> Option<u64> {
        if let Descriptor::Files(files) = &self.fd {
            return files.remaining();
        }
        let size = self.file_size?;
        let offset = rustix::fs::seek(self.fd(), rustix::fs::SeekFrom::Current(0)).ok()?;
        Some(size.saturating_sub(offset))
    }

    /// Whether `self`, read from here on, would read what is written to `output`: the same
    /// regular file with bytes still ahead (`accel < f >> f` would grow `f` without end, so
    /// `cat` refuses it too). Its name if so: this input's, or the FILE operand's.
    pub fn feeds(&self, output: &Endpoint) -> Option<String> {
        if let (Descriptor::Files(files), Some(id)) = (&self.fd, output.file_id) {
            return files.holds(id);
        }
        (self.same_file(output) && self.remaining() != Some(0)).then(|| self.name.clone())
    }

    /// Whether bytes may be spliced out of this descriptor without risk.
    ///
    /// Pipes, and regular files (their pages are referenced from the page cache). Never a
    /// terminal or an inherited socket: splicing from those holds the destination pipe's lock
    /// while waiting for data, which would freeze whoever uses that pipe (linux-io.md, §7).
    /// Never a packet-mode pipe either (when it shows): splice would carry the packet marks on
    /// into the consumer's pipe, where a short read then discards the rest of a packet. Nor
    /// an input whose lines are counted. accel's own plain socket (`--insecure`) is
    /// O_NONBLOCK, and may be spliced.
    pub fn can_splice_from(&self) -> bool {
        if self.lines.is_some() {
            return false;
        }
        matches!(self.kind, FdKind::Pipe | FdKind::File) && !self.packets || self.plain_socket()
    }

    /// Whether bytes may be spliced into this descriptor without risk.
    ///
    /// Pipes, regular files not opened with `O_APPEND` (which splice refuses), and character
    /// devices such as `/dev/null`. Never a terminal (a stalled splice into it would make the
    /// producer's writes uninterruptible) or an inherited socket (a blocking send holds the
    /// source pipe's lock, stopping the input thread too).
    /// Nor a packet-mode pipe, whose reader expects one packet per write, as `cat` makes them.
    /// accel's own plain socket (`--insecure`) is O_NONBLOCK: a full socket says EAGAIN.
    pub fn can_splice_to(&self) -> bool {
        match self.kind {
            FdKind::Pipe => !self.packets,
            FdKind::CharDevice => true,
            FdKind::File => !self.append,
            FdKind::Socket => self.plain_socket(),
            FdKind::Terminal | FdKind::Other | FdKind::Stream => false,
        }
    }

    /// Reads what is available, up to `buf.len()`; 0 means end of input (of the last FILE
    /// operand, or of the bytes it may read).
    ///
    /// Blocks until at least one byte has arrived, like `read(2)` on a blocking descriptor,
    /// whatever the descriptor's flags.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let wanted = buf.len();
        let buf = &mut buf[..self.allowance(wanted)];
        loop {
            let n = if buf.is_empty() {
                0
            } else if let Some(link) = self.link() {
                link.read(buf, &self.stop)?
            } else if let Some(stream) = self.as_stream() {
                stream.read(buf, &self.stop)?
            } else {
                stop::blocking(self.fd(), PollFlags::IN, &self.stop, None, || {
                    rustix::io::read(self.fd(), &mut *buf)
                })?
            };
            self.took(n);
            if let Some((end, count)) = &self.lines {
                let lines = buf[..n].iter().filter(|&&byte| byte == *end).count();
                count.fetch_add(lines as u64, Relaxed);
            }
            if n > 0 || wanted == 0 || self.ended()? {
                return Ok(n);
            }
        }
    }

    /// Splices up to `len` bytes of this input into `to` (a pipe): as [`sys::splice`], within
    /// the input's allowance. 0 is the end of the current file: [`Endpoint::ended`] says
    /// whether it is the input's.
    pub fn splice_to(
        &self,
        to: BorrowedFd<'_>,
        len: usize,
        nonblock: bool,
    ) -> Result<usize, Errno> {
        let len = self.allowance(len);
        let n = if len == 0 { 0 } else { sys::splice(self.fd(), to, len, nonblock)? };
        self.took(n);
        Ok(n)
    }

    /// Splices up to `len` bytes of this input (a pipe) into the file `to` at `*at`: as
    /// [`sys::splice_to_file`], within the input's allowance.
    pub fn splice_to_file(
        &self,
        to: BorrowedFd<'_>,
        at: &mut u64,
        len: usize,
    ) -> Result<usize, Errno> {
        let len = self.allowance(len);
        let n = if len == 0 { 0 } else { sys::splice_to_file(self.fd(), to, at, len)? };
        self.took(n);
        Ok(n)
    }

    /// A read or splice of this input returned 0: whether that is the end of the input. For
    /// FILE operands, the end of one that is not the last makes the next current (`false`:
    /// read on); one that can no longer be opened fails the input. An input stopping at a
    /// size (pv's `-S`) has ended once it has read that much.
    pub fn ended(&self) -> io::Result<bool> {
        if self.exhausted() {
            return Ok(true);
        }
        match &self.fd {
            Descriptor::Files(files) => files.next(&self.stop).map(|next| !next),
            _ => {
                if let Some(producer) = &self.producer {
                    producer.ended_well(&self.stop)?;
                }
                Ok(true)
            }
        }
    }

    /// Whether the input has read all it may (pv's `-S`): it has ended, whatever is left of it.
    pub fn exhausted(&self) -> bool {
        self.left.as_ref().is_some_and(|left| left.load(Relaxed) == 0)
    }

    /// How much of `len` one read or splice may take: all of it, or what is left of the
    /// input's allowance.
    fn allowance(&self, len: usize) -> usize {
        match &self.left {
            Some(left) => len.min(usize::try_from(left.load(Relaxed)).unwrap_or(usize::MAX)),
            None => len,
        }
    }

    /// Counts `n` bytes read against the allowance. Only the input thread reads.
    fn took(&self, n: usize) {
        if let Some(left) = &self.left {
            left.fetch_sub(n as u64, Relaxed);
        }
    }

    /// Whether this input's bytes come in buffers of their own, to be moved into the
    /// backlog as they are ([`read_moved`](Endpoint::read_moved)) rather than read into
    /// memory given: a peer over several connections (the frames opened where they came),
    /// whose bytes are neither counted in lines nor limited (pv's `-l`, `-S`).
    pub fn moves(&self) -> bool {
        self.lines.is_none() && self.left.is_none() && self.link().is_some_and(|l| l.moves())
    }

    /// Where this input [`moves`](Endpoint::moves) its bytes: the next, in buffers of their
    /// own, at most `most` bytes, appended to `into`; how many (0 means end of input).
    /// Blocks until at least one byte has arrived, as [`read`](Endpoint::read) does.
    /// `None` for an input that does not move its bytes.
    pub fn read_moved(&self, most: usize, into: &mut Vec<Owned>) -> Option<io::Result<usize>> {
        if !self.moves() {
            return None;
        }
        self.link()?.read_moved(most, into, &self.stop)
    }

    /// Writes some of `buf` (at least one byte), blocking while the consumer is not reading.
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        if let Some(link) = self.link() {
            return link.write(buf, &self.stop);
        }
        if let Some(stream) = self.as_stream() {
            return stream.write(buf, &self.stop);
        }
        match stop::blocking(self.fd(), PollFlags::OUT, &self.stop, None, || {
            rustix::io::write(self.fd(), buf)
        })? {
            0 if !buf.is_empty() => Err(io::ErrorKind::WriteZero.into()),
            n => Ok(n),
        }
    }

    /// Writes some of the first `len` bytes of `filled` (at least one), as [`Endpoint::write`]
    /// does; a peer may hold on to them past the write (the backlog lends them).
    pub fn write_filled(&self, filled: &Filled<'_>, len: usize) -> io::Result<usize> {
        match self.link() {
            Some(link) => link.write_lent(&filled.lend(len), &self.stop),
            None => self.write(&filled.as_slice()[..len]),
        }
    }

    /// Bytes a pipe, socket or terminal holds for reading now (`FIONREAD`), if it can say.
    pub fn queued(&self) -> Option<u64> {
        self.as_stream().is_none().then_some(())?;
        rustix::io::ioctl_fionread(self.fd()).ok()
    }

    /// Waits until the descriptor is ready for `events`, or has hung up or failed (the next I/O
    /// call then says how). A program's stream is always ready: its own calls block.
    pub fn wait(&self, events: PollFlags) -> io::Result<()> {
        if self.as_stream().is_some() {
            return Ok(());
        }
        stop::wait_for(self.fd(), events, &self.stop, None)
    }
}

impl AsFd for Endpoint {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd()
    }
}

impl AsFd for Descriptor {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Descriptor::Inherited(fd) => *fd,
            Descriptor::Opened(fd) => fd.as_fd(),
            Descriptor::Network(link) => link.socket().fd(),
            Descriptor::Stream(_) => panic!("a program's reader or writer has no descriptor"),
            Descriptor::Files(files) => files.fd(),
        }
    }
}

impl Producer {
    /// Waits for the program to exit (it has closed its output, so it is on its way):
    /// `Ok` when it exited 0, else the failure in its words (`zfs send x: exited with status
    /// 1`), which fails the input and so the run.
    fn ended_well(&self, stop: &Stop) -> io::Result<()> {
        let (status, signal) = sys::exit_of(self.pid, &|| stop.check())?;
        let how = match (status, signal) {
            (Some(0), None) => return Ok(()),
            (_, Some(signal)) => format!("killed by signal {signal}"),
            (Some(status), None) => format!("exited with status {status}"),
            (None, None) => "ended, how is not known".to_owned(),
        };
        Err(io::Error::other(format!("{}: {how}", self.command)))
    }
}
