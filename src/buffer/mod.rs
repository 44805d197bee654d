//! The library's face: a configured [`Buffer`] between one input and one or more outputs, the
//! [`WriteBehind`] and [`ReadAhead`] adapters, and what a run reports ([`Report`],
//! [`Progress`]).
//!
//! It drives the same engine and backlog as the command line: a thread reads the input into
//! the backlog, a thread per output writes from it, and each side waits only on its own end.
//! Descriptors ([`Input::fd`], [`Output::fd`]) are inspected as the command line's are, and
//! pipes and files get the zero-copy tiers (splice); a program's reader or writer
//! ([`Input::reader`], [`Output::writer`]) is read and written through memory.
//!
//! Readers and writers are `Send + 'static`, moved into the run's threads, rather than
//! borrowed by scoped threads: a run that ends early (an output failed, a stall) must be able
//! to return while a thread is still blocked in a `read` it cannot interrupt (a program's
//! reader knows no signal), and only an owned reader can be left to finish on its own.
//!
//! Nothing here prints or exits: errors are values, and warnings are said on stderr only when
//! asked ([`Buffer::warnings`]).

mod adapters;
mod plan;
mod report;
mod sides;
#[cfg(test)]
mod tests;
mod watchdog;

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::backlog::spill::SpillFile;
use crate::endpoint::stream::Stream;
use crate::engine::{self, Block, OutputErrors, Preference};
use crate::log::Log;
use crate::meter::Meter;
use crate::stop::Stop;

pub use adapters::{Incomplete, ReadAhead, WriteBehind};
pub(crate) use plan::{Blueprint, Planned, spill_size_refused, transfer};
pub use report::{Bottleneck, Error, Outcome, OutputReport, Progress, Report};
pub use sides::{Input, Output};

/// The buffer size when none is given: 32 MiB, as the command line's `-m`. Memory is taken as
/// the backlog grows, in chunks of up to 2 MiB, and given back once it has drained.
///
/// ```
/// assert_eq!(accel_buffer::DEFAULT_SIZE, 32 << 20);
/// ```
pub const DEFAULT_SIZE: usize = 32 << 20;

/// A configured buffer: how much it holds, where it spills, how fast and in what pieces
/// bytes move, and how long nothing may move; [`run`](Buffer::run) moves an input through it
/// to its outputs.
///
/// # A run that ends early, and `SIGURG`
///
/// A run ends early when an output fails under [`OnOutputError::EndRun`] or every output
/// has failed, or when nothing moved for the [`stall_timeout`](Buffer::stall_timeout). Its
/// threads stop at their next step; one blocked in a call (a read of a silent pipe, a
/// write to a consumer that reads nothing) is interrupted by `SIGURG`, which makes the
/// call return: once if it has not ended a moment (5 ms) after the end, and once more
/// 0.1 s later should it still run, since the first can land just before it enters its
/// call; never more. The run returns once every thread has ended, or after 2 s at most: a
/// thread still in a call then (the program's own reader waiting on something no signal
/// ends) is left to return on its own, and drops the reader or writer it holds when it
/// does.
///
/// The first run installs a handler for `SIGURG` that does nothing, unless the program
/// has set the signal's action itself. A program's own handler is called on those threads:
/// at most twice on each thread still blocked when a run ends early; accel sends `SIGURG`
/// at no other time. Installed without `SA_RESTART`, it lets the interrupts end blocked
/// calls as the run's own handler does; with `SA_RESTART` (or with `SIGURG` ignored), a
/// blocking read or write of a descriptor goes on after it, and a run ended early waits
/// the 2 s for a thread blocked in one.
///
/// ```
/// use accel_buffer::{Buffer, Input, Output};
///
/// let report = Buffer::new()
///     .size(1 << 20)
///     .run(Input::reader(&b"hello"[..]), vec![Output::writer(Vec::new())])?;
/// assert_eq!(report.bytes_in, 5);
/// assert_eq!(report.outputs[0].delivered, 5);
/// # Ok::<(), accel_buffer::Error>(())
/// ```
#[derive(Clone)]
pub struct Buffer {
    size: usize,
    spill: Option<PathBuf>,
    spill_size: Option<u64>,
    rate: Option<u64>,
    input_rate: Option<u64>,
    block_size: Option<usize>,
    pad: bool,
    input_block_size: Option<usize>,
    stall_timeout: Option<Duration>,
    on_output_error: OnOutputError,
    warnings: bool,
    progress: Option<(Duration, Arc<Mutex<ProgressCallback>>)>,
}

/// What [`Buffer::progress_every`] calls.
type ProgressCallback = dyn FnMut(&Progress) + Send;

/// What a failing output does to the others.
///
/// ```
/// use accel_buffer::{Buffer, OnOutputError};
///
/// let buffer = Buffer::new().on_output_error(OnOutputError::EndRun);
/// # let _ = buffer;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnOutputError {
    /// The other outputs go on; the failed one gets no more bytes (`tee`'s `warn`).
    #[default]
    GoOn,
    /// The whole run ends at the first failing output (`tee`'s `exit`).
    EndRun,
}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("size", &self.size)
            .field("spill", &self.spill)
            .field("spill_size", &self.spill_size)
            .field("rate", &self.rate)
            .field("input_rate", &self.input_rate)
            .field("block_size", &self.block_size)
            .field("pad", &self.pad)
            .field("input_block_size", &self.input_block_size)
            .field("stall_timeout", &self.stall_timeout)
            .field("on_output_error", &self.on_output_error)
            .field("warnings", &self.warnings)
            .field("progress_every", &self.progress.as_ref().map(|(every, _)| every))
            .finish()
    }
}

impl Default for Buffer {
    fn default() -> Buffer {
        Buffer::new()
    }
}

impl Buffer {
    /// A buffer of [`DEFAULT_SIZE`], in memory only, unlimited, quiet.
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new();
    /// # let _ = buffer;
    /// ```
    pub fn new() -> Buffer {
        Buffer {
            size: DEFAULT_SIZE,
            spill: None,
            spill_size: None,
            rate: None,
            input_rate: None,
            block_size: None,
            pad: false,
            input_block_size: None,
            stall_timeout: None,
            on_output_error: OnOutputError::default(),
            warnings: false,
            progress: None,
        }
    }

    /// The most bytes held in memory (`-m`); at least a page.
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().size(256 << 20);
    /// # let _ = buffer;
    /// ```
    pub fn size(mut self, bytes: usize) -> Buffer {
        self.size = bytes;
        self
    }

    /// Once memory is full, input goes on into an unnamed file in `dir` (`--spill`), which
    /// must be on a file system that can punch holes (ext4, xfs, btrfs, tmpfs).
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().spill(std::env::temp_dir());
    /// # let _ = buffer;
    /// ```
    pub fn spill(mut self, dir: impl Into<PathBuf>) -> Buffer {
        self.spill = Some(dir.into());
        self
    }

    /// The most bytes held in the spill file (`--spill-size`); unlimited when not given.
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().spill("/var/tmp").spill_size(1 << 30);
    /// # let _ = buffer;
    /// ```
    pub fn spill_size(mut self, bytes: u64) -> Buffer {
        self.spill_size = Some(bytes);
        self
    }

    /// Writes each output at no more than `bytes_per_second` (`-r`).
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().rate(10 << 20);
    /// # let _ = buffer;
    /// ```
    pub fn rate(mut self, bytes_per_second: u64) -> Buffer {
        self.rate = Some(bytes_per_second);
        self
    }

    /// Reads the input at no more than `bytes_per_second` (`--input-rate`).
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().input_rate(1 << 20);
    /// # let _ = buffer;
    /// ```
    pub fn input_rate(mut self, bytes_per_second: u64) -> Buffer {
        self.input_rate = Some(bytes_per_second);
        self
    }

    /// Every write to an output is exactly `bytes` long, as tape drives want it; the last
    /// one is short (`--block-size`). Partial data waits for its block to fill.
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().block_size(256 << 10);
    /// # let _ = buffer;
    /// ```
    pub fn block_size(mut self, bytes: usize) -> Buffer {
        self.block_size = Some(bytes);
        self
    }

    /// With [`block_size`](Buffer::block_size), the last block is filled with zeros to the
    /// full size (`--pad`).
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().block_size(512).pad(true);
    /// # let _ = buffer;
    /// ```
    pub fn pad(mut self, pad: bool) -> Buffer {
        self.pad = pad;
        self
    }

    /// Every read of the input is offered exactly `bytes` of room (`--input-block-size`),
    /// as a tape drive read in blocks needs.
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().input_block_size(64 << 10);
    /// # let _ = buffer;
    /// ```
    pub fn input_block_size(mut self, bytes: usize) -> Buffer {
        self.input_block_size = Some(bytes);
        self
    }

    /// Ends the run when no byte has moved for `timeout` (`--stall-timeout`); the report
    /// says which side was stuck.
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().stall_timeout(std::time::Duration::from_secs(60));
    /// # let _ = buffer;
    /// ```
    pub fn stall_timeout(mut self, timeout: Duration) -> Buffer {
        self.stall_timeout = Some(timeout);
        self
    }

    /// What a failing output does to the others; by default they go on.
    ///
    /// ```
    /// use accel_buffer::{Buffer, OnOutputError};
    /// let buffer = Buffer::new().on_output_error(OnOutputError::EndRun);
    /// # let _ = buffer;
    /// ```
    pub fn on_output_error(mut self, policy: OnOutputError) -> Buffer {
        self.on_output_error = policy;
        self
    }

    /// Says warnings (memory refused, the spill file failing) on stderr as `accel: ...`;
    /// by default nothing is printed.
    ///
    /// ```
    /// let buffer = accel_buffer::Buffer::new().warnings(true);
    /// # let _ = buffer;
    /// ```
    pub fn warnings(mut self, say: bool) -> Buffer {
        self.warnings = say;
        self
    }

    /// Calls `show` with the run's progress every `interval` while it runs, and once more at
    /// its end, from a thread of its own (a slow `show` delays only the next call).
    ///
    /// ```
    /// use std::time::Duration;
    /// use accel_buffer::Buffer;
    ///
    /// let buffer = Buffer::new().progress_every(Duration::from_millis(500), |progress| {
    ///     eprint!("\r{} bytes in", progress.bytes_in);
    /// });
    /// # let _ = buffer;
    /// ```
    pub fn progress_every(
        mut self,
        interval: Duration,
        show: impl FnMut(&Progress) + Send + 'static,
    ) -> Buffer {
        self.progress = Some((interval, Arc::new(Mutex::new(show))));
        self
    }

    /// Moves everything from `input` to each of `outputs` through the buffer, and says how it
    /// went. Returns once the input has ended and every output has it all, or the run ended
    /// early: then with [`Error::Incomplete`], whose report says what each output got and
    /// why the rest was lost.
    ///
    /// ```
    /// use accel_buffer::{Buffer, Input, Output};
    ///
    /// let (a, b) = (Output::writer(Vec::new()), Output::writer(Vec::new()));
    /// let report = Buffer::new().run(Input::reader(&[7u8; 100_000][..]), vec![a, b])?;
    /// assert!(report.is_complete());
    /// assert!(report.outputs.iter().all(|output| output.delivered == 100_000));
    /// # Ok::<(), accel_buffer::Error>(())
    /// ```
    pub fn run(&self, input: Input, outputs: Vec<Output>) -> Result<Report, Error> {
        self.start_here(input, outputs)?.run()
    }

    /// Starts moving `input` to `outputs` on threads of their own, and returns at once: the
    /// [`Transfer`] gives progress while it runs, and its report at the end.
    ///
    /// ```
    /// use accel_buffer::{Buffer, Input, Output};
    ///
    /// let transfer = Buffer::new().start(Input::reader(&b"abc"[..]), vec![Output::writer(Vec::new())])?;
    /// let _so_far = transfer.progress();
    /// let report = transfer.wait()?;
    /// assert_eq!(report.outputs[0].delivered, 3);
    /// # Ok::<(), accel_buffer::Error>(())
    /// ```
    pub fn start(&self, input: Input, outputs: Vec<Output>) -> Result<Transfer, Error> {
        let ready = self.start_here(input, outputs)?;
        let meter = Arc::clone(&ready.planned.meter);
        let outputs = ready.planned.plan.outputs.len();
        let run = thread::Builder::new()
            .name("accel-run".into())
            .spawn(move || ready.run())
            .map_err(Error::Setup)?;
        Ok(Transfer { meter, outputs, run })
    }

    /// Opens the endpoints and plans the run; nothing is read yet.
    fn start_here(&self, input: Input, outputs: Vec<Output>) -> Result<Ready, Error> {
        if outputs.is_empty() {
            return Err(Error::Settings("a run needs at least one output".into()));
        }
        let stop = Arc::new(Stop::default());
        let input = input.endpoint(&stop).map_err(Error::Setup)?;
        let outputs = outputs
            .into_iter()
            .enumerate()
            .map(|(index, output)| output.endpoint(index, &stop))
            .collect::<io::Result<Vec<_>>>()
            .map_err(Error::Setup)?;
        for output in &outputs {
            if let Some(name) = input.feeds(output) {
                return Err(Error::Settings(format!(
                    "{name} and {} are the same file: input file is output file",
                    output.name
                )));
            }
        }
        let spill = match &self.spill {
            Some(dir) => Some(Arc::new(
                SpillFile::create(dir, self.spill_size)
                    .map_err(|why| Error::Settings(format!("spill {}: {why}", dir.display())))?,
            )),
            None => None,
        };
        let log = Arc::new(Log::new(!self.warnings, false));
        let blueprint = Blueprint {
            size: self.size,
            rate: self.rate,
            input_rate: self.input_rate,
            block: self.block_size.map(|size| Block { size, pad: self.pad }),
            input_block_size: self.input_block_size,
            start_at: None,
            resume_at: None,
            hashes: Vec::new(),
            sync: false,
            output_errors: match self.on_output_error {
                OnOutputError::GoOn => OutputErrors::Warn,
                OnOutputError::EndRun => OutputErrors::Exit,
            },
            engine: Preference::Auto,
        };
        let planned = blueprint.plan(input, outputs, spill, log);
        Ok(Ready {
            planned,
            stop,
            stall_timeout: self.stall_timeout,
            progress: self.progress.clone(),
        })
    }
}

/// A run planned by [`Buffer`], ready to go: its endpoints open, nothing read yet.
struct Ready {
    planned: Planned,
    stop: Arc<Stop>,
    stall_timeout: Option<Duration>,
    progress: Option<(Duration, Arc<Mutex<ProgressCallback>>)>,
}

impl Ready {
    /// Runs the transfer on this thread, and reports.
    fn run(self) -> Result<Report, Error> {
        let Ready { planned, stop, stall_timeout, progress } = self;
        // Without a handler, a run ended early would wait up to two seconds for a thread
        // blocked in a call before going on without it.
        Stop::install_unless_set();
        let meter = Arc::clone(&planned.meter);
        let input = planned.plan.input.name.clone();
        let names: Vec<String> = planned.plan.outputs.iter().map(|o| o.name.clone()).collect();
        let streams: Vec<Option<Arc<Stream>>> =
            planned.plan.outputs.iter().map(|o| o.as_stream().cloned()).collect();
        let (events, inbox) = mpsc::channel();
        let watchdog = watchdog::Watchdog::start(
            Arc::clone(&meter),
            stall_timeout,
            progress,
            events.clone(),
            input,
            names.clone(),
        )
        .map_err(Error::Setup)?;
        let outcomes = transfer(planned, Arc::clone(&stop), events, inbox);
        let snapshot = meter.snapshot();
        watchdog.end(snapshot.clone());
        let outcomes = outcomes.map_err(Error::Setup)?;
        // A program's writer holds what it was given until flushed: a complete output is
        // delivered once that is done.
        let flushed: Vec<Option<io::Error>> = streams
            .iter()
            .zip(&outcomes.outputs)
            .map(|(stream, end)| match (stream, end) {
                (Some(stream), engine::Outcome::Complete) => stream.flush(&stop).err(),
                _ => None,
            })
            .collect();
        let report = Report::of(outcomes, &snapshot, &names, flushed);
        if report.is_complete() { Ok(report) } else { Err(Error::Incomplete(Box::new(report))) }
    }
}

/// A run under way ([`Buffer::start`]): its progress, and at its end its report.
///
/// ```
/// use accel_buffer::{Buffer, Input, Output};
///
/// let transfer = Buffer::new().start(Input::reader(&b"abc"[..]), vec![Output::writer(Vec::new())])?;
/// println!("{} bytes in so far", transfer.progress().bytes_in);
/// let report = transfer.wait()?;
/// # let _ = report;
/// # Ok::<(), accel_buffer::Error>(())
/// ```
#[derive(Debug)]
pub struct Transfer {
    meter: Arc<Meter>,
    outputs: usize,
    run: JoinHandle<Result<Report, Error>>,
}

impl Transfer {
    /// The counters now: bytes in, delivered to each output, held, and the waits.
    ///
    /// ```
    /// use accel_buffer::{Buffer, Input, Output};
    ///
    /// let transfer = Buffer::new().start(Input::reader(&b"abc"[..]), vec![Output::writer(Vec::new())])?;
    /// let progress = transfer.progress();
    /// assert!(progress.bytes_in <= 3);
    /// # transfer.wait()?;
    /// # Ok::<(), accel_buffer::Error>(())
    /// ```
    pub fn progress(&self) -> Progress {
        Progress::of(self.meter.snapshot(), self.outputs)
    }

    /// Whether the run has ended (its report is ready).
    ///
    /// ```
    /// use accel_buffer::{Buffer, Input, Output};
    ///
    /// let transfer = Buffer::new().start(Input::reader(&b""[..]), vec![Output::writer(Vec::new())])?;
    /// let _ = transfer.is_finished();
    /// # transfer.wait()?;
    /// # Ok::<(), accel_buffer::Error>(())
    /// ```
    pub fn is_finished(&self) -> bool {
        self.run.is_finished()
    }

    /// Waits for the run to end, and says how it went, as [`Buffer::run`] does.
    ///
    /// ```
    /// use accel_buffer::{Buffer, Input, Output};
    ///
    /// let transfer = Buffer::new().start(Input::reader(&b"abc"[..]), vec![Output::writer(Vec::new())])?;
    /// assert_eq!(transfer.wait()?.bytes_in, 3);
    /// # Ok::<(), accel_buffer::Error>(())
    /// ```
    pub fn wait(self) -> Result<Report, Error> {
        self.run.join().unwrap_or_else(|_| {
            Err(Error::Setup(io::Error::other("the thread running the transfer panicked")))
        })
    }
}
