//! An endpoint that is a program's own reader or writer (`Read`, `Write`), for the library:
//! bytes reach it only through `read` and `write`, never by splice, as with a terminal.
//!
//! The engine's threads call it as they call a descriptor: one thread reads an input, one
//! writes each output. A call interrupted (`ErrorKind::Interrupted`) is retried, as
//! `std::io` has it, unless the run is over. A writer counts what it has taken, so that
//! whoever waits for the bytes to be delivered (`flush` of the library's write adapter) is
//! woken as they go, and when the writer's thread is done with it.

use std::any::Any;
use std::fmt;
use std::io::{self, Read, Write};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::stop::Stop;

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
    Reader(Mutex<Box<dyn Read + Send>>),
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

/// An output writer, what it has taken, and whether its thread is done with it.
pub struct Writer {
    state: Mutex<WriterState>,
    moved: Condvar,
}

struct WriterState {
    /// The writer; `None` once taken back.
    sink: Option<Box<dyn Sink>>,
    /// Bytes it has taken.
    written: u64,
    /// The thread writing to it has ended.
    done: bool,
}

impl Stream {
    /// An input read from `reader`.
    pub fn reader(reader: Box<dyn Read + Send>) -> Stream {
        Stream::Reader(Mutex::new(reader))
    }

    /// An output written to `sink`.
    pub fn writer(sink: Box<dyn Sink>) -> Stream {
        Stream::Writer(Writer {
            state: Mutex::new(WriterState { sink: Some(sink), written: 0, done: false }),
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
        retried(stop, || reader.read(buf))
    }

    /// Writes some of `buf` (at least a byte) to the writer.
    pub fn write(&self, buf: &[u8], stop: &Stop) -> io::Result<usize> {
        let Stream::Writer(writer) = self else {
            return Err(io::Error::other("an input stream cannot be written"));
        };
        let mut state = writer.lock();
        let sink = state.sink.as_mut().ok_or_else(taken)?;
        let n = match retried(stop, || sink.write(buf))? {
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
                retried(stop, || sink.flush())
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
        self.lock().sink.take()
    }
}

/// Runs `call` until it is not interrupted, unless the run is over.
fn retried<T>(stop: &Stop, mut call: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match call() {
            Err(error) if error.kind() == io::ErrorKind::Interrupted => stop.check()?,
            result => return result,
        }
    }
}

/// The error of a writer used after it was handed back.
fn taken() -> io::Error {
    io::Error::other("the writer was handed back")
}
