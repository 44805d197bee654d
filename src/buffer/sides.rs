//! The two sides of a library run: where its bytes come from ([`Input`]) and where they go
//! ([`Output`]), each a descriptor or a program's reader or writer, made into the engine's
//! endpoints.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use crate::endpoint::Endpoint;
use crate::endpoint::stream::{Sink, Stream};
use crate::stop::Stop;

/// Where a run's bytes come from: a descriptor (spliced where that is safe) or a program's
/// reader.
///
/// ```
/// use accel_buffer::Input;
///
/// let from_memory = Input::reader(&b"bytes"[..]);
/// let from_file = Input::fd(std::fs::File::open("Cargo.toml")?).named("Cargo.toml");
/// # let _ = (from_memory, from_file);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Input {
    pub(super) source: Source,
    name: Option<String>,
}

pub(super) enum Source {
    Fd(OwnedFd),
    Reader(Box<dyn Read + Send>),
}

impl fmt::Debug for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match &self.source {
            Source::Fd(fd) => format!("{fd:?}"),
            Source::Reader(_) => "a reader".to_owned(),
        };
        f.debug_struct("Input").field("source", &source).field("name", &self.name).finish()
    }
}

impl Input {
    /// Reads from `reader` on the run's input thread, calling it as a blocking descriptor is
    /// called: an interrupted read is retried at once; `WouldBlock` (a non-blocking reader
    /// with nothing yet) is read again after a pause, of 1 ms at first, doubling up to
    /// 50 ms while it goes on, since a `Read` cannot say when it will have something. A
    /// panic in it fails the input, `the program's reader panicked (its message)`, and it is
    /// not called again.
    ///
    /// ```
    /// let input = accel_buffer::Input::reader(std::io::Cursor::new(vec![1, 2, 3]));
    /// # let _ = input;
    /// ```
    pub fn reader(reader: impl Read + Send + 'static) -> Input {
        Input { source: Source::Reader(Box::new(reader)), name: None }
    }

    /// Reads from a descriptor the run owns and closes at its end: a [`File`](std::fs::File),
    /// a [`ChildStdout`](std::process::ChildStdout), a pipe, a socket. Pipes and files are
    /// spliced where that is safe; its `O_NONBLOCK` flag, if set, is coped with.
    ///
    /// ```
    /// use std::process::{Command, Stdio};
    ///
    /// let mut child = Command::new("echo").arg("hi").stdout(Stdio::piped()).spawn()?;
    /// let input = accel_buffer::Input::fd(child.stdout.take().unwrap());
    /// # let _ = input; child.wait()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn fd(fd: impl Into<OwnedFd>) -> Input {
        Input { source: Source::Fd(fd.into()), name: None }
    }

    /// The process's standard input, through a duplicate of its descriptor (so that the
    /// process's own stays open after the run).
    ///
    /// ```
    /// let input = accel_buffer::Input::stdin()?;
    /// # let _ = input;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stdin() -> io::Result<Input> {
        let fd = io::stdin().as_fd().try_clone_to_owned()?;
        Ok(Input::fd(fd).named("stdin"))
    }

    /// Known in the report and in messages as `name` (by default `input`).
    ///
    /// ```
    /// let input = accel_buffer::Input::reader(std::io::empty()).named("the archive");
    /// # let _ = input;
    /// ```
    pub fn named(mut self, name: impl Into<String>) -> Input {
        self.name = Some(name.into());
        self
    }

    pub(super) fn endpoint(self, stop: &Arc<Stop>) -> io::Result<Endpoint> {
        let name = self.name.unwrap_or_else(|| "input".to_owned());
        match self.source {
            Source::Fd(fd) => Endpoint::opened(fd, &name, stop),
            Source::Reader(reader) => Ok(Endpoint::stream(
                Arc::new(Stream::reader(reader, "the program's reader")),
                &name,
                stop,
            )),
        }
    }
}

/// Where a run's bytes go: a descriptor (spliced into where that is safe) or a program's
/// writer. Each output gets every byte.
///
/// ```
/// use accel_buffer::Output;
///
/// let to_memory = Output::writer(Vec::new());
/// let to_file = Output::fd(tempfile_in_target()?).named("copy");
/// # fn tempfile_in_target() -> std::io::Result<std::fs::File> {
/// #     std::fs::File::create(std::env::temp_dir().join("accel-buffer-doc-output"))
/// # }
/// # let _ = (to_memory, to_file);
/// # Ok::<(), std::io::Error>(())
/// ```
pub struct Output {
    pub(super) sink: Target,
    name: Option<String>,
}

pub(super) enum Target {
    Fd(OwnedFd),
    Writer(Box<dyn Sink>),
}

impl fmt::Debug for Output {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sink = match &self.sink {
            Target::Fd(fd) => format!("{fd:?}"),
            Target::Writer(_) => "a writer".to_owned(),
        };
        f.debug_struct("Output").field("sink", &sink).field("name", &self.name).finish()
    }
}

impl Output {
    /// Writes to `writer` on an output thread of its own, and flushes it once it has every
    /// byte; it is dropped at the end of the run. It is called as a blocking descriptor is:
    /// an interrupted write is retried at once; `WouldBlock` (a non-blocking writer with no
    /// room yet) is tried again after a pause, of 1 ms at first, doubling up to 50 ms while
    /// it goes on. A panic in it fails this output like any error of it, `the program's
    /// writer panicked (its message)` ([`Buffer::on_output_error`] says whether the others
    /// go on), and it is not called again, not even flushed.
    ///
    /// [`Buffer::on_output_error`]: crate::Buffer::on_output_error
    ///
    /// ```
    /// let output = accel_buffer::Output::writer(std::io::sink());
    /// # let _ = output;
    /// ```
    pub fn writer(writer: impl Write + Send + 'static) -> Output {
        Output { sink: Target::Writer(Box::new(writer)), name: None }
    }

    /// Writes to a descriptor the run owns and closes at its end (the reader sees end of
    /// file as soon as this output has every byte): a [`File`](std::fs::File), a
    /// [`ChildStdin`](std::process::ChildStdin), a pipe, a socket. Pipes, files and
    /// character devices are spliced into where that is safe.
    ///
    /// ```
    /// let output = accel_buffer::Output::fd(std::fs::File::create(std::env::temp_dir().join("accel-doc"))?);
    /// # let _ = output;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn fd(fd: impl Into<OwnedFd>) -> Output {
        Output { sink: Target::Fd(fd.into()), name: None }
    }

    /// The process's standard output, through a duplicate of its descriptor (so that the
    /// process's own stays open after the run).
    ///
    /// ```
    /// let output = accel_buffer::Output::stdout()?;
    /// # let _ = output;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn stdout() -> io::Result<Output> {
        let fd = io::stdout().as_fd().try_clone_to_owned()?;
        Ok(Output::fd(fd).named("stdout"))
    }

    /// Known in the report and in messages as `name` (by default `output 1`, `output 2`, ...).
    ///
    /// ```
    /// let output = accel_buffer::Output::writer(std::io::sink()).named("the tape");
    /// # let _ = output;
    /// ```
    pub fn named(mut self, name: impl Into<String>) -> Output {
        self.name = Some(name.into());
        self
    }

    pub(super) fn endpoint(self, index: usize, stop: &Arc<Stop>) -> io::Result<Endpoint> {
        let name = self.name.unwrap_or_else(|| format!("output {}", index + 1));
        match self.sink {
            Target::Fd(fd) => Endpoint::opened(fd, &name, stop),
            Target::Writer(writer) => Ok(Endpoint::stream(
                Arc::new(Stream::writer(writer, "the program's writer")),
                &name,
                stop,
            )),
        }
    }
}
