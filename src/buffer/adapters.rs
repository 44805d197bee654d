//! The adapters for the common case, on the engine's own halves: [`WriteBehind`] is the
//! backlog's producer in the caller's thread and the engine's output loop in a thread of its
//! own; [`ReadAhead`] is the engine's input loop in a thread of its own and a backlog reader
//! in the caller's.

use std::any::Any;
use std::fmt;
use std::io::{self, Read, Write};
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::{self, JoinHandle};

use super::{DEFAULT_SIZE, Progress};
use crate::backlog::{self, Closer, Front, Gates, Producer, Space};
use crate::endpoint::Endpoint;
use crate::endpoint::stream::Stream;
use crate::engine::pace::Limits;
use crate::engine::{EngineKind, Failure, Flow, InputEnd, Route, copy, output};
use crate::log::Log;
use crate::meter::Meter;
use crate::stop::Stop;
use crate::words::panic_message;

/// A `Write` whose writes return as soon as the bytes are in the buffer, while a thread of
/// its own writes them to the inner writer: a slow writer no longer holds up the code that
/// produces its bytes, up to the buffer's size.
///
/// A failure of the inner writer is returned by the next [`write`](Write::write),
/// [`flush`](Write::flush) or [`finish`](WriteBehind::finish), and again by every `write`
/// and `flush` after (the same OS error, or the same kind and words); `finish` also says
/// how many bytes the inner writer took, and hands it back.
///
/// The inner writer is called as a blocking descriptor is. An interrupted write is retried
/// at once; `WouldBlock` says a non-blocking writer has no room yet, and since a `Write`
/// cannot say when it will have, it is tried again after a pause, of 1 ms at first,
/// doubling up to 50 ms while it goes on: neither is a failure. A panic of the inner writer
/// is one, `the inner writer panicked (its message)`, after which it is not called again,
/// not even flushed (as [`BufWriter`](std::io::BufWriter) does not flush a writer that
/// panicked).
///
/// Dropping a `WriteBehind` without `finish` waits until the inner writer has taken every
/// byte buffered (or has failed), flushes it, ignoring any error as
/// [`BufWriter`](std::io::BufWriter) does, and drops it: it never panics, and it waits only as
/// long as the inner writer takes.
///
/// ```
/// use std::io::Write;
/// use accel_buffer::WriteBehind;
///
/// let mut out = WriteBehind::new(Vec::new())?;
/// out.write_all(b"written behind")?;
/// let (inner, delivered) = out.finish()?;
/// assert_eq!((inner.as_slice(), delivered), (&b"written behind"[..], 14));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct WriteBehind<W: Write + Send + 'static> {
    producer: Option<Producer>,
    stream: Arc<Stream>,
    thread: Option<JoinHandle<Result<(), Failure>>>,
    meter: Arc<Meter>,
    /// Bytes the caller has written into the buffer.
    taken: u64,
    /// The inner writer's failure, once heard.
    failure: Option<io::Error>,
    _writer: PhantomData<W>,
}

impl<W: Write + Send + 'static> fmt::Debug for WriteBehind<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBehind")
            .field("taken", &self.taken)
            .field("failure", &self.failure)
            .finish_non_exhaustive()
    }
}

impl<W: Write + Send + 'static> WriteBehind<W> {
    /// Writes behind into `inner` through a buffer of [`DEFAULT_SIZE`](crate::DEFAULT_SIZE)
    /// (memory is taken as it fills). Fails only when a thread cannot be had.
    ///
    /// ```
    /// let out = accel_buffer::WriteBehind::new(std::io::sink())?;
    /// # drop(out);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(inner: W) -> io::Result<WriteBehind<W>> {
        WriteBehind::with_capacity(DEFAULT_SIZE, inner)
    }

    /// Writes behind into `inner` through a buffer holding at most `capacity` bytes (at
    /// least a page).
    ///
    /// ```
    /// let out = accel_buffer::WriteBehind::with_capacity(1 << 20, std::io::sink())?;
    /// # drop(out);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_capacity(capacity: usize, inner: W) -> io::Result<WriteBehind<W>> {
        let gates = Gates::default();
        let capacity = backlog::capacity_for(capacity, &gates);
        let meter = Arc::new(Meter::new(capacity as u64, 1));
        let log = Arc::new(Log::new(true, false));
        let (producer, mut readers) =
            backlog::backlog(capacity, 1, gates, None, Arc::clone(&meter), Arc::clone(&log))?;
        let reader = readers.pop().expect("one reader");
        let stop = Arc::new(Stop::default());
        let stream = Arc::new(Stream::writer(Box::new(inner), "the inner writer"));
        let endpoint = Endpoint::stream(Arc::clone(&stream), "the inner writer", &stop);
        let route = memory_route(log);
        let flow = Flow { limits: Arc::new(Limits::default()), ..Flow::default() };
        let writer = Arc::clone(&stream);
        let thread = thread::Builder::new().name("accel-write-behind".into()).spawn(move || {
            // The inner writer's own panic is its error (the stream says so); one caught
            // here is accel's.
            let end = catch_unwind(AssertUnwindSafe(|| {
                output::write_all(&endpoint, reader, &route, &flow, false, &InputEnd::default())
            }))
            .unwrap_or_else(|panic| Err(Failure::Panic(accel_bug("write-behind", panic))));
            writer.as_writer().expect("a writer").done();
            end
        })?;
        Ok(WriteBehind {
            producer: Some(producer),
            stream,
            thread: Some(thread),
            meter,
            taken: 0,
            failure: None,
            _writer: PhantomData,
        })
    }

    /// The counters now: bytes taken in ([`Progress::bytes_in`]), bytes the inner writer
    /// has taken (`delivered[0]`), bytes held.
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let mut out = accel_buffer::WriteBehind::new(std::io::sink())?;
    /// out.write_all(b"abc")?;
    /// assert_eq!(out.progress().bytes_in, 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn progress(&self) -> Progress {
        Progress::of(self.meter.snapshot(), 1)
    }

    /// Waits until the inner writer has taken every byte written, flushes it, and hands it
    /// back with the number of bytes it took; or says how it failed, with the bytes it took
    /// before ([`Incomplete`]).
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let mut out = accel_buffer::WriteBehind::new(Vec::new())?;
    /// out.write_all(&[1; 10_000])?;
    /// let (inner, delivered) = out.finish()?;
    /// assert_eq!((inner.len(), delivered), (10_000, 10_000));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish(mut self) -> Result<(W, u64), Incomplete<W>> {
        let failure = self.end();
        let delivered = self.delivered();
        let failure = failure.or_else(|| self.stream.flush(&Stop::default()).err());
        let writer = self.take_writer();
        match failure {
            None => Ok((writer, delivered)),
            Some(error) => Err(Incomplete { error, delivered, writer }),
        }
    }

    /// Ends the input, waits for the thread, and says how the inner writer failed, if it did.
    fn end(&mut self) -> Option<io::Error> {
        drop(self.producer.take());
        self.heard();
        self.failure.take()
    }

    /// Joins the writing thread if it has ended, keeping its failure.
    fn heard(&mut self) {
        if self.producer.is_none() || self.thread.as_ref().is_some_and(|t| t.is_finished()) {
            self.join();
        }
    }

    /// Waits for the writing thread to end, keeping its failure: once it is done with the
    /// inner writer, or the input has ended.
    fn join(&mut self) {
        if let Some(thread) = self.thread.take() {
            let end = thread
                .join()
                .unwrap_or_else(|panic| Err(Failure::Panic(accel_bug("write-behind", panic))));
            if let Err(failure) = end {
                self.failure = Some(match failure {
                    Failure::Io(error)
                    | Failure::Sync(error)
                    | Failure::Panic(error)
                    | Failure::Spill { error, .. } => error,
                });
            }
        }
    }

    /// The inner writer's failure, as an error of its own (the original is kept for
    /// `finish`).
    fn failed(&self) -> Option<io::Error> {
        self.failure.as_ref().map(again)
    }

    fn delivered(&self) -> u64 {
        self.stream.as_writer().expect("a writer").written()
    }

    fn take_writer(&self) -> W {
        let sink = self.stream.as_writer().expect("a writer").take().expect("the writer");
        let any: Box<dyn Any + Send> = sink.into_any();
        *any.downcast::<W>().expect("the writer's own type")
    }

    /// The error of a write after the thread ended without a failure: cannot happen while
    /// the buffer is open, but said rather than assumed.
    fn gone() -> io::Error {
        io::Error::other("the writing thread has ended")
    }
}

impl<W: Write + Send + 'static> Write for WriteBehind<W> {
    /// Copies as much of `buf` as there is room for into the buffer, waiting for room only
    /// when it is full; fails with the inner writer's error once that has failed.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.heard();
        if let Some(error) = self.failed() {
            return Err(error);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        let producer = self.producer.as_mut().ok_or_else(Self::gone)?;
        let n = match producer.reserve()? {
            Some(Space::Memory(mut vacant)) => {
                let room = vacant.as_mut_slice();
                let n = room.len().min(buf.len());
                room[..n].copy_from_slice(&buf[..n]);
                vacant.commit(n);
                n
            }
            Some(Space::Spill(_)) => unreachable!("a write-behind buffer does not spill"),
            None => 0,
        };
        if n == 0 {
            // No reader left: the writing thread ended, and says why.
            drop(self.producer.take());
            self.heard();
            return Err(self.failed().unwrap_or_else(Self::gone));
        }
        self.taken += n as u64;
        Ok(n)
    }

    /// Waits until the inner writer has taken every byte written so far, then flushes it.
    fn flush(&mut self) -> io::Result<()> {
        let written = self.stream.as_writer().expect("a writer").wait_for(self.taken);
        if written < self.taken {
            // The thread is done with the writer without having written everything: it
            // failed, and is ending.
            self.join();
            return Err(self.failed().unwrap_or_else(Self::gone));
        }
        self.heard();
        if let Some(error) = self.failed() {
            return Err(error);
        }
        self.stream.flush(&Stop::default())
    }
}

impl<W: Write + Send + 'static> Drop for WriteBehind<W> {
    fn drop(&mut self) {
        if self.thread.is_some() || self.producer.is_some() {
            let _ = self.end();
            let _ = self.stream.flush(&Stop::default());
        }
    }
}

/// What [`WriteBehind::finish`] says when the inner writer failed: the error, the bytes it
/// took before, and the writer itself.
///
/// ```
/// use std::io::{self, Write};
///
/// struct Full;
/// impl Write for Full {
///     fn write(&mut self, _: &[u8]) -> io::Result<usize> { Err(io::ErrorKind::StorageFull.into()) }
///     fn flush(&mut self) -> io::Result<()> { Ok(()) }
/// }
///
/// let mut out = accel_buffer::WriteBehind::new(Full)?;
/// let _ = out.write_all(b"lost");
/// let incomplete = out.finish().err().expect("a failure");
/// assert_eq!((incomplete.error().kind(), incomplete.delivered()), (io::ErrorKind::StorageFull, 0));
/// # Ok::<(), io::Error>(())
/// ```
pub struct Incomplete<W> {
    error: io::Error,
    delivered: u64,
    writer: W,
}

impl<W> Incomplete<W> {
    /// How the inner writer failed.
    ///
    /// See [`Incomplete`] for an example.
    pub fn error(&self) -> &io::Error {
        &self.error
    }

    /// Bytes the inner writer took before it failed: all of them reached it, in order.
    ///
    /// See [`Incomplete`] for an example.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The inner writer, handed back.
    ///
    /// ```
    /// # use std::io::{self, Write};
    /// # struct Full;
    /// # impl Write for Full {
    /// #     fn write(&mut self, _: &[u8]) -> io::Result<usize> { Err(io::ErrorKind::StorageFull.into()) }
    /// #     fn flush(&mut self) -> io::Result<()> { Ok(()) }
    /// # }
    /// let mut out = accel_buffer::WriteBehind::new(Full)?;
    /// let _ = out.write_all(b"lost");
    /// let _full: Full = out.finish().err().expect("a failure").into_inner();
    /// # Ok::<(), io::Error>(())
    /// ```
    pub fn into_inner(self) -> W {
        self.writer
    }

    /// The error, without the writer.
    ///
    /// ```
    /// # use std::io::{self, Write};
    /// # struct Full;
    /// # impl Write for Full {
    /// #     fn write(&mut self, _: &[u8]) -> io::Result<usize> { Err(io::ErrorKind::StorageFull.into()) }
    /// #     fn flush(&mut self) -> io::Result<()> { Ok(()) }
    /// # }
    /// let mut out = accel_buffer::WriteBehind::new(Full)?;
    /// let _ = out.write_all(b"lost");
    /// let error: io::Error = out.finish().err().expect("a failure").into_error();
    /// # let _ = error;
    /// # Ok::<(), io::Error>(())
    /// ```
    pub fn into_error(self) -> io::Error {
        self.error
    }
}

impl<W> fmt::Debug for Incomplete<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Incomplete")
            .field("error", &self.error)
            .field("delivered", &self.delivered)
            .finish_non_exhaustive()
    }
}

impl<W> fmt::Display for Incomplete<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let delivered = crate::words::byte_count(self.delivered);
        write!(f, "{}; {delivered} delivered", crate::words::describe(&self.error))
    }
}

impl<W> std::error::Error for Incomplete<W> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl<W> From<Incomplete<W>> for io::Error {
    fn from(incomplete: Incomplete<W>) -> io::Error {
        incomplete.error
    }
}

/// A `Read` that a thread of its own keeps ahead of: it reads the inner reader into the
/// buffer while the caller works on what it read before, up to the buffer's size. Its
/// `read` waits while the buffer is empty, whatever the inner reader is.
///
/// What the caller sees of the inner reader:
///
/// - its bytes, in order; then `Ok(0)` at its end, and on every read after;
/// - its failure, once the bytes read before it have been read; and that failure again on
///   every later read (the same OS error, or the same kind and words), never `Ok(0)`: a
///   caller that logs an error and reads on does not take it for a clean end. A panic of
///   the inner reader is such a failure, `the inner reader panicked (its message)`;
/// - never `Interrupted` or `WouldBlock`, which end nothing. An interrupted read is retried
///   at once, as [`Read::read_to_end`] retries it. `WouldBlock` says a non-blocking reader
///   has nothing yet: since a `Read` cannot say when it will have, it is read again after a
///   pause, of 1 ms at first, doubling up to 50 ms while it goes on having nothing. A
///   blocking reader's bytes are taken as they come.
///
/// Dropping a `ReadAhead` stops the thread at its next step; a read of the inner reader
/// under way then is not waited for (it may block for as long as the reader does), and the
/// inner reader is dropped by the thread when that read returns.
///
/// ```
/// use std::io::Read;
/// use accel_buffer::ReadAhead;
///
/// let mut ahead = ReadAhead::new(&b"read ahead"[..])?;
/// let mut text = String::new();
/// ahead.read_to_string(&mut text)?;
/// assert_eq!(text, "read ahead");
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct ReadAhead<R: Read + Send + 'static> {
    /// The buffer's reader; `None` once the thread has ended and said how.
    reader: Option<backlog::Reader>,
    thread: Option<JoinHandle<io::Result<()>>>,
    /// The inner reader's failure, once returned: said again on every later read.
    failure: Option<io::Error>,
    closer: Closer,
    stop: Arc<Stop>,
    meter: Arc<Meter>,
    _reader: PhantomData<R>,
}

impl<R: Read + Send + 'static> fmt::Debug for ReadAhead<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadAhead").field("progress", &self.progress()).finish_non_exhaustive()
    }
}

impl<R: Read + Send + 'static> ReadAhead<R> {
    /// Reads `inner` ahead into a buffer of [`DEFAULT_SIZE`](crate::DEFAULT_SIZE) (memory is
    /// taken as it fills). Fails only when a thread cannot be had.
    ///
    /// ```
    /// let ahead = accel_buffer::ReadAhead::new(std::io::empty())?;
    /// # drop(ahead);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new(inner: R) -> io::Result<ReadAhead<R>> {
        ReadAhead::with_capacity(DEFAULT_SIZE, inner)
    }

    /// Reads `inner` ahead into a buffer holding at most `capacity` bytes (at least a page).
    ///
    /// ```
    /// let ahead = accel_buffer::ReadAhead::with_capacity(1 << 20, std::io::empty())?;
    /// # drop(ahead);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn with_capacity(capacity: usize, inner: R) -> io::Result<ReadAhead<R>> {
        let gates = Gates::default();
        let capacity = backlog::capacity_for(capacity, &gates);
        let meter = Arc::new(Meter::new(capacity as u64, 1));
        let log = Arc::new(Log::new(true, false));
        let route = memory_route(Arc::clone(&log));
        let (producer, mut readers) =
            backlog::backlog(capacity, 1, gates, None, Arc::clone(&meter), log)?;
        let reader = readers.pop().expect("one reader");
        let closer = producer.closer();
        let stop = Arc::new(Stop::default());
        let stream = Arc::new(Stream::reader(Box::new(inner), "the inner reader"));
        let endpoint = Endpoint::stream(stream, "the inner reader", &stop);
        let thread = thread::Builder::new().name("accel-read-ahead".into()).spawn(move || {
            let flow = Flow::default();
            // The inner reader's own panic is its error (the stream says so); one caught
            // here is accel's.
            let read = || copy::read_input(&endpoint, &[], producer, &route, &flow);
            catch_unwind(AssertUnwindSafe(read))
                .unwrap_or_else(|panic| Err(accel_bug("read-ahead", panic)))
        })?;
        Ok(ReadAhead {
            reader: Some(reader),
            thread: Some(thread),
            failure: None,
            closer,
            stop,
            meter,
            _reader: PhantomData,
        })
    }

    /// The counters now: bytes read from the inner reader ([`Progress::bytes_in`]), bytes
    /// the caller has read (`delivered[0]`), bytes held.
    ///
    /// ```
    /// use std::io::Read;
    ///
    /// let mut ahead = accel_buffer::ReadAhead::new(&b"abc"[..])?;
    /// ahead.read_to_end(&mut Vec::new())?;
    /// assert_eq!(ahead.progress().delivered[0], 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn progress(&self) -> Progress {
        Progress::of(self.meter.snapshot(), 1)
    }
}

impl<R: Read + Send + 'static> Read for ReadAhead<R> {
    /// Copies what the buffer holds, up to `buf.len()`, waiting only when it is empty; 0 at
    /// the inner reader's end; its failure once the bytes before it were read, and on every
    /// read after.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let Some(reader) = self.reader.as_mut() else {
            return self.failure.as_ref().map_or(Ok(0), |failure| Err(again(failure)));
        };
        let n = match reader.front() {
            Some(Front::Memory(filled)) => {
                let bytes = filled.as_slice();
                let n = bytes.len().min(buf.len());
                buf[..n].copy_from_slice(&bytes[..n]);
                n
            }
            Some(Front::Pipe(..) | Front::Spill(_)) => {
                unreachable!("a read-ahead buffer holds bytes in memory only")
            }
            None => {
                // The end: the inner reader's, or its failure, kept to be said again.
                self.reader = None;
                let end = self.thread.take().map_or(Ok(()), |thread| {
                    thread.join().unwrap_or_else(|panic| Err(accel_bug("read-ahead", panic)))
                });
                self.failure = end.as_ref().err().map(again);
                return end.map(|()| 0);
            }
        };
        reader.consume(n);
        Ok(n)
    }
}

impl<R: Read + Send + 'static> Drop for ReadAhead<R> {
    fn drop(&mut self) {
        drop(self.reader.take());
        self.stop.request();
        self.closer.close();
        if let Some(thread) = self.thread.take() {
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

/// The same failure once more (an `io::Error` is not `Clone`): the same OS error, or the
/// same kind and words.
fn again(error: &io::Error) -> io::Error {
    match error.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(error.kind(), error.to_string()),
    }
}

/// A panic of an adapter's own thread outside the inner reader or writer: accel's bug, said
/// as the engine says its own.
fn accel_bug(adapter: &str, panic: Box<dyn Any + Send>) -> io::Error {
    let said = panic_message(panic.as_ref());
    io::Error::other(format!("the {adapter} thread failed, a bug in accel ({said})"))
}

/// The route of an adapter: through memory, both ways.
fn memory_route(log: Arc<Log>) -> Route {
    Route {
        engine: EngineKind::Copy,
        input_splice: AtomicBool::new(false),
        output_splice: AtomicBool::new(false),
        log,
    }
}
