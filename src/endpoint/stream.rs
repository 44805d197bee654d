//! An endpoint that is a program's own reader or writer (`Read`, `Write`), for the library:
//! bytes reach it only through `read` and `write`, never by splice, as with a terminal.
//!
//! The engine's threads call it as they call a descriptor: one thread reads an input, one
//! writes each output. Its calls are made to behave as a blocking descriptor's do, the
//! data path's rule for `EINTR` and `EAGAIN` ([`Program::call`]): a call interrupted
//! (`ErrorKind::Interrupted`) is retried, as `std::io` has it, unless the run is over; a call
//! that would block (`WouldBlock`: the program gave a non-blocking reader or writer) is
//! tried again after a pause, since a `Read` or `Write`, unlike a descriptor, cannot be
//! polled. A panic in the program's code is an error of this endpoint that says whose code
//! it was (`the program's writer panicked (...)`), not a failure of accel's thread, and the
//! reader or writer is not called again, as `BufWriter` does not flush a writer that
//! panicked. A writer counts what it has taken, so that whoever waits for the bytes to be
//! delivered (`flush` of the library's write adapter) is woken as they go, and when the
//! writer's thread is done with it.

use std::any::Any;
use std::fmt;
use std::io::{self, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::stop::Stop;
use crate::words::panic_message;

/// The first pause after a call that would block; it doubles while the calls go on saying
/// so, up to [`LONGEST_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(1);

/// The longest pause between calls that would block: how late bytes may be seen that a
/// non-blocking reader got meanwhile, against 20 wakeups a second while it has none.
const LONGEST_PAUSE: Duration = Duration::from_millis(50);

/// A writer the library may hand back to its owner once the run is over.
pub trait Sink: Write + Send {
    /// The writer, to be downcast to its own type.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

impl<W: Write + Send + 'static> Sink for W {
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// A program's reader or writer, shared by the endpoints that refer to it.
pub enum Stream {
    /// An input.
    Reader(Mutex<Program<Box<dyn Read + Send>>>),
    /// An output.
    Writer(Writer),
}

impl fmt::Debug for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stream::Reader(_) => "Stream::Reader",
            Stream::Writer(_) => "Stream::Writer",
        })
    }
}

/// The program's reader or writer, called as [`Program::call`] says.
pub struct Program<T> {
    code: T,
    /// What it is called in an error: `the program's reader`, `the inner writer`.
    called: &'static str,
    /// What it said when it panicked, after which it is not called again.
    panicked: Option<String>,
}

/// An output writer, what it has taken, and whether its thread is done with it.
pub struct Writer {
    state: Mutex<WriterState>,
    moved: Condvar,
}

struct WriterState {
    /// The writer; `None` once taken back.
    sink: Option<Program<Box<dyn Sink>>>,
    /// Bytes it has taken.
    written: u64,
    /// The thread writing to it has ended.
    done: bool,
}

impl Stream {
    /// An input read from `reader`, `called` so in errors (`the program's reader`).
    pub fn reader(reader: Box<dyn Read + Send>, called: &'static str) -> Stream {
        Stream::Reader(Mutex::new(Program::new(reader, called)))
    }

    /// An output written to `sink`, `called` so in errors (`the program's writer`).
    pub fn writer(sink: Box<dyn Sink>, called: &'static str) -> Stream {
        let sink = Some(Program::new(sink, called));
        Stream::Writer(Writer {
            state: Mutex::new(WriterState { sink, written: 0, done: false }),
            moved: Condvar::new(),
        })
    }

    /// The writer, when this is an output.
    pub fn as_writer(&self) -> Option<&Writer> {
        match self {
            Stream::Writer(writer) => Some(writer),
            Stream::Reader(_) => None,
        }
    }

    /// Reads what the reader gives, up to `buf.len()`; 0 at its end.
    pub fn read(&self, buf: &mut [u8], stop: &Stop) -> io::Result<usize> {
        let Stream::Reader(reader) = self else {
            return Err(io::Error::other("an output stream cannot be read"));
        };
        let mut reader = reader.lock().unwrap_or_else(PoisonError::into_inner);
        reader.call(stop, |reader| reader.read(buf))
    }

    /// Writes some of `buf` (at least a byte) to the writer.
    pub fn write(&self, buf: &[u8], stop: &Stop) -> io::Result<usize> {
        let Stream::Writer(writer) = self else {
            return Err(io::Error::other("an input stream cannot be written"));
        };
        let mut state = writer.lock();
        let sink = state.sink.as_mut().ok_or_else(taken)?;
        let n = match sink.call(stop, |sink| sink.write(buf))? {
            0 if !buf.is_empty() => return Err(io::ErrorKind::WriteZero.into()),
            n => n,
        };
        state.written += n as u64;
        writer.moved.notify_all();
        Ok(n)
    }

    /// Flushes the writer; nothing to do for a reader.
    pub fn flush(&self, stop: &Stop) -> io::Result<()> {
        match self {
            Stream::Reader(_) => Ok(()),
            Stream::Writer(writer) => {
                let mut state = writer.lock();
                let sink = state.sink.as_mut().ok_or_else(taken)?;
                sink.call(stop, |sink| sink.flush())
            }
        }
    }
}

impl<T> Program<T> {
    fn new(code: T, called: &'static str) -> Program<T> {
        Program { code, called, panicked: None }
    }

    /// Calls the program's code as a blocking descriptor is called: `Interrupted` is retried
    /// unless the run is over (then it is returned); `WouldBlock` is retried after a pause
    /// that doubles from [`FIRST_PAUSE`] to [`LONGEST_PAUSE`] while it goes on, cut short
    /// when the run is over (`Interrupted`). A panic is an error naming the code that
    /// panicked, and every later call says it again without calling.
    fn call<R>(
        &mut self,
        stop: &Stop,
        mut call: impl FnMut(&mut T) -> io::Result<R>,
    ) -> io::Result<R> {
        let mut pause = FIRST_PAUSE;
        loop {
            if let Some(said) = &self.panicked {
                return Err(io::Error::other(format!("{} panicked ({said})", self.called)));
            }
            match catch_unwind(AssertUnwindSafe(|| call(&mut self.code))) {
                Ok(Err(error)) if error.kind() == io::ErrorKind::Interrupted => stop.check()?,
                Ok(Err(error)) if error.kind() == io::ErrorKind::WouldBlock => {
                    stop.sleep(pause)?;
                    pause = (pause * 2).min(LONGEST_PAUSE);
                }
                Ok(result) => return result,
                Err(panic) => self.panicked = Some(panic_message(panic.as_ref())),
            }
        }
    }
}

impl Writer {
    fn lock(&self) -> MutexGuard<'_, WriterState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Bytes the writer has taken.
    pub fn written(&self) -> u64 {
        self.lock().written
    }

    /// Says the thread writing to it has ended, waking whoever waits.
    pub fn done(&self) {
        self.lock().done = true;
        self.moved.notify_all();
    }

    /// Waits until the writer has taken `bytes` in all, or its thread has ended; what it
    /// has taken.
    pub fn wait_for(&self, bytes: u64) -> u64 {
        let mut state = self.lock();
        while state.written < bytes && !state.done {
            state = self.moved.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.written
    }

    /// The writer, taken back; `None` if it was taken already.
    pub fn take(&self) -> Option<Box<dyn Sink>> {
        self.lock().sink.take().map(|sink| sink.code)
    }
}

/// The error of a writer used after it was handed back.
fn taken() -> io::Error {
    io::Error::other("the writer was handed back")
}
