//! What a run tells its caller: [`Progress`] while it runs, a [`Report`] at its end, and an
//! [`Error`] when it could not start or not every byte reached every output.
//!
//! All of it is read from the meter's counters, as the command line's progress line and
//! report are; the verdict on the bottleneck is the meter's, which the command line names too.

use std::fmt;
use std::io;
use std::time::Duration;

use crate::engine::{self, Failure, Outcomes};
use crate::meter::{Snapshot, bottleneck};
use crate::words::{byte_count, describe};

/// The command line's verdict, for a library run: the side that waited at least a tenth of
/// the run, and longer than the other.
///
/// ```
/// use accel_buffer::{Bottleneck, Buffer, Input, Output};
///
/// let report = Buffer::new().run(Input::reader(std::io::empty()), vec![Output::writer(std::io::sink())])?;
/// if report.bottleneck == Bottleneck::Consumer {
///     eprintln!("the output was the slow side: {}", report.bottleneck.as_str());
/// }
/// # Ok::<(), accel_buffer::Error>(())
/// ```
pub use crate::meter::Bottleneck;

/// The counters of a run at one moment, for a caller's own display.
///
/// ```
/// use accel_buffer::{Buffer, Input, Output};
///
/// let report = Buffer::new().run(Input::reader(&b"abc"[..]), vec![Output::writer(Vec::new())])?;
/// let last = &report.progress;
/// assert_eq!((last.bytes_in, last.delivered[0], last.held), (3, 3, 0));
/// # Ok::<(), accel_buffer::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Progress {
    /// Time since the run started.
    pub elapsed: Duration,
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// Bytes written to each output, in the order given.
    pub delivered: Vec<u64>,
    /// Bytes read and not yet written to the slowest output: what the buffer holds.
    pub held: u64,
    /// Of those, bytes in the spill file.
    pub held_on_disk: u64,
    /// The most bytes the buffer holds in memory.
    pub capacity: u64,
    /// The most bytes held at once.
    pub peak: u64,
    /// How long the input was held back by a full buffer: the outputs were the slow side.
    pub input_held: Duration,
    /// How long the slowest output waited on an empty buffer: the input was the slow side.
    pub output_waited: Duration,
    snapshot: Snapshot,
}

impl Progress {
    pub(crate) fn of(snapshot: Snapshot, outputs: usize) -> Progress {
        Progress {
            elapsed: snapshot.elapsed,
            bytes_in: snapshot.bytes_in,
            delivered: snapshot.readers.iter().take(outputs).map(|r| r.delivered()).collect(),
            held: snapshot.held(),
            held_on_disk: snapshot.held_disk,
            capacity: snapshot.capacity,
            peak: snapshot.peak_held,
            input_held: snapshot.producer_blocked,
            output_waited: snapshot.consumer_starved,
            snapshot,
        }
    }

    /// Which side held the other up so far, if either did: the side that waited a tenth of
    /// the run or more, and longer than the other (runs under 0.1 s get no verdict).
    ///
    /// ```
    /// use accel_buffer::{Bottleneck, Buffer, Input, Output};
    ///
    /// let report = Buffer::new().run(Input::reader(&b"abc"[..]), vec![Output::writer(Vec::new())])?;
    /// assert_eq!(report.progress.bottleneck(), Bottleneck::None); // too short to tell
    /// # Ok::<(), accel_buffer::Error>(())
    /// ```
    pub fn bottleneck(&self) -> Bottleneck {
        bottleneck(&self.snapshot)
    }
}

/// How one side of a run ended.
///
/// ```
/// use accel_buffer::{Buffer, Input, Outcome, Output};
///
/// let report = Buffer::new().run(Input::reader(&b"abc"[..]), vec![Output::writer(Vec::new())])?;
/// assert!(matches!(report.input, Outcome::Complete));
/// # Ok::<(), accel_buffer::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Outcome {
    /// The input reached its end; an output got every byte read (and, for a writer, was
    /// flushed).
    Complete,
    /// Reading the input, or writing (or flushing) an output, failed with this error. A
    /// panic in the program's reader or writer is such a failure, `the program's writer
    /// panicked (its message)`; one in accel's own code says `its thread failed, a bug in
    /// accel (its message)`.
    Failed(io::Error),
    /// An output: reading spilled bytes back from the spill file failed (the disk).
    SpillFailed(io::Error),
    /// The run ended first (another output's failure, a stall, no output left): cut short,
    /// with no error of its own.
    CutShort,
}

impl Outcome {
    /// Whether this side got to its end.
    ///
    /// ```
    /// assert!(accel_buffer::Outcome::Complete.is_complete());
    /// ```
    pub fn is_complete(&self) -> bool {
        matches!(self, Outcome::Complete)
    }

    /// The engine's outcome of a side, as the library tells it.
    fn of(outcome: engine::Outcome) -> Outcome {
        use engine::Outcome as Side;
        match outcome {
            Side::Complete => Outcome::Complete,
            Side::CutShort => Outcome::CutShort,
            Side::Failed(Failure::Spill { error, .. }) => Outcome::SpillFailed(error),
            Side::Failed(Failure::Io(error) | Failure::Sync(error) | Failure::Panic(error)) => {
                Outcome::Failed(error)
            }
        }
    }
}

/// What one output got.
///
/// ```
/// use accel_buffer::{Buffer, Input, Output};
///
/// let out = Output::writer(Vec::new()).named("copy");
/// let report = Buffer::new().run(Input::reader(&b"abc"[..]), vec![out])?;
/// let copy = &report.outputs[0];
/// assert_eq!((copy.name.as_str(), copy.delivered, copy.lost), ("copy", 3, 0));
/// # Ok::<(), accel_buffer::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct OutputReport {
    /// Its name, as given ([`Output::named`](crate::Output::named)) or `output N`.
    pub name: String,
    /// Bytes written to it: all of them reached it, in order, from the first.
    pub delivered: u64,
    /// Bytes read from the input that it did not get.
    pub lost: u64,
    /// How it ended.
    pub outcome: Outcome,
}

/// How a run went: the bytes read, what each output got, what was lost and why, and which
/// side was the bottleneck.
///
/// ```
/// use accel_buffer::{Buffer, Input, Output};
///
/// let report = Buffer::new().run(Input::reader(&[0u8; 4096][..]), vec![Output::writer(std::io::sink())])?;
/// assert!(report.is_complete());
/// assert_eq!(report.outputs[0].delivered, 4096);
/// println!("{report}");
/// # Ok::<(), accel_buffer::Error>(())
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Report {
    /// Bytes read from the input.
    pub bytes_in: u64,
    /// How the input ended.
    pub input: Outcome,
    /// Each output, in the order given.
    pub outputs: Vec<OutputReport>,
    /// The stall timeout ended the run, saying which side was stuck.
    pub stalled: Option<String>,
    /// Which side held the other up.
    pub bottleneck: Bottleneck,
    /// The counters at the end.
    pub progress: Progress,
}

impl Report {
    pub(crate) fn of(
        outcomes: Outcomes,
        snapshot: &Snapshot,
        names: &[String],
        flushed: Vec<Option<io::Error>>,
    ) -> Report {
        let progress = Progress::of(snapshot.clone(), names.len());
        let bytes_in = snapshot.bytes_in;
        let outputs = outcomes
            .outputs
            .into_iter()
            .zip(flushed)
            .enumerate()
            .map(|(index, (end, flush))| {
                let delivered = progress.delivered.get(index).copied().unwrap_or(0);
                let outcome = match flush {
                    Some(error) => Outcome::Failed(error),
                    None => Outcome::of(end),
                };
                let name = names[index].clone();
                OutputReport { name, delivered, lost: bytes_in.saturating_sub(delivered), outcome }
            })
            .collect();
        Report {
            bytes_in,
            input: Outcome::of(outcomes.input),
            outputs,
            stalled: outcomes.stalled,
            bottleneck: bottleneck(snapshot),
            progress,
        }
    }

    /// Whether the input reached its end and every output got every byte.
    ///
    /// ```
    /// use accel_buffer::{Buffer, Input, Output};
    ///
    /// let report = Buffer::new().run(Input::reader(std::io::empty()), vec![Output::writer(std::io::sink())])?;
    /// assert!(report.is_complete());
    /// # Ok::<(), accel_buffer::Error>(())
    /// ```
    pub fn is_complete(&self) -> bool {
        self.stalled.is_none()
            && self.input.is_complete()
            && self.outputs.iter().all(|output| output.outcome.is_complete())
    }
}

/// One line per side that did not complete, as the command line says it; `complete: N bytes
/// to 1 output(s)` when all did (`complete: 406 MiB (425197568 bytes) ...` from 1 KiB on).
impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_complete() {
            let outputs = self.outputs.len();
            return write!(f, "complete: {} to {outputs} output(s)", byte_count(self.bytes_in));
        }
        let mut lines = Vec::new();
        if let Some(why) = &self.stalled {
            lines.push(why.clone());
        }
        match &self.input {
            Outcome::Failed(error) | Outcome::SpillFailed(error) => lines.push(format!(
                "read from the input: {}; {} read before it",
                describe(error),
                byte_count(self.bytes_in)
            )),
            Outcome::Complete | Outcome::CutShort => {}
        }
        for output in &self.outputs {
            let counts = format!(
                "{} delivered, {} read but not delivered",
                byte_count(output.delivered),
                byte_count(output.lost)
            );
            lines.push(match &output.outcome {
                Outcome::Complete => continue,
                Outcome::Failed(error) => {
                    format!("write to {}: {}; {counts}", output.name, describe(error))
                }
                Outcome::SpillFailed(error) => format!(
                    "read back from the spill: {}; {counts} to {}",
                    describe(error),
                    output.name
                ),
                Outcome::CutShort => {
                    format!("{}: cut short when the run ended; {counts}", output.name)
                }
            });
        }
        f.write_str(&lines.join("\n"))
    }
}

/// Why a run could not start, or did not deliver every byte.
///
/// ```
/// use accel_buffer::{Buffer, Error, Input};
///
/// let refused = Buffer::new().run(Input::reader(std::io::empty()), Vec::new());
/// assert!(matches!(refused, Err(Error::Settings(_))));
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The settings or the endpoints cannot be used together (no output, a spill directory
    /// where spilling is not safe, the input file is an output file); nothing was read.
    Settings(String),
    /// The machine refused what the run needs (a thread, memory, inspecting a descriptor);
    /// nothing was read.
    Setup(io::Error),
    /// The run ended without every byte reaching every output: the report says what each
    /// got and why the rest was lost.
    Incomplete(Box<Report>),
}

impl Error {
    /// The report of a run that did not deliver everything.
    ///
    /// ```
    /// use accel_buffer::{Buffer, Input};
    ///
    /// let error = Buffer::new().run(Input::reader(std::io::empty()), Vec::new()).unwrap_err();
    /// assert!(error.report().is_none()); // refused before it ran
    /// ```
    pub fn report(&self) -> Option<&Report> {
        match self {
            Error::Incomplete(report) => Some(report),
            Error::Settings(_) | Error::Setup(_) => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Settings(why) => f.write_str(why),
            Error::Setup(error) => write!(f, "cannot start: {}; nothing was read", describe(error)),
            Error::Incomplete(report) => write!(f, "{report}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Setup(error) => Some(error),
            Error::Settings(_) | Error::Incomplete(_) => None,
        }
    }
}

impl From<Error> for io::Error {
    fn from(error: Error) -> io::Error {
        match error {
            Error::Setup(error) => error,
            other => io::Error::other(other.to_string()),
        }
    }
}
