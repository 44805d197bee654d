//! The data path: moves bytes from the input endpoint through the backlog to every output,
//! and to every hash.
//!
//! Every reader of the backlog (each output, each hash) and the input have a thread of their
//! own, so that a blocked write never stops reading, an empty input never stops writing, and a
//! slow output never paces a fast one within the buffer. The input thread blocks only on its
//! input or on a full backlog, an output thread only on its output or on having taken
//! everything. The engines differ in how the input side moves bytes:
//!
//! - [`copy`]: `read` into the backlog's memory. Portable POSIX; every kind of descriptor,
//!   any number of readers.
//! - [`splice`] (Linux, one output and no hash): zero-copy tiers, cheapest first: straight
//!   from the input to the output while nothing is queued, then into a small pool of
//!   accel's own pipes, then into memory. A pipe's bytes can be read once, so with several
//!   readers the bytes are shared through memory, which every reader can read.
//!
//! Both input sides read into memory the same way where they do not splice: one read into the
//! backlog ([`read`]), passed straight on from the input thread while nothing is queued
//! ([`bypass`]), with pauses that let input gather in its pipe ([`gather`]).
//!
//! The output side is the same for both ([`output`]): write whatever is at the reader's place,
//! by `write` from memory or by `splice` from a pool pipe. Spilled bytes (`--spill`) go into
//! the spill file and out of it by either engine alike ([`spill`]).
//!
//! [`run`] starts the threads, hears how each ends, and applies what a failing output does to
//! the others ([`OutputErrors`], `--output-error`); the run's end is decided by the caller.

mod bypass;
pub mod copy;
pub mod digest;
mod fault;
mod gather;
pub mod output;
pub mod pace;
mod read;
pub mod spill;
pub mod splice;

use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, PoisonError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::backlog::spill::SpillFile;
use crate::backlog::{self, Gates, Producer};
use crate::endpoint::Endpoint;
use crate::engine::digest::{Algorithm, Digest};
use crate::log::Log;
use crate::meter::Meter;
use crate::stop::Stop;
use crate::sys;
use crate::words::{describe, panic_message};
use pace::Limits;

/// How long a stopped run waits for its threads, all together, before it goes on without
/// those still running. A thread that an interrupt reaches ends far sooner: measured on 2
/// vCPUs beside four busy loops (load 6.7), 30 µs after the interrupt at the median, 24 ms
/// at the 99th percentile, 91 ms at worst; the second interrupt goes 0.1 s after the first.
/// So the patience is spent in full only on a thread in a call no signal ends (a program's
/// reader waiting on something else, a hung NFS server), and it is kept generous because
/// what a thread does while it ends (the last bytes an interrupted write took) is counted
/// only if it ends before the report is made.
const PATIENCE: Duration = Duration::from_secs(2);

/// Which engine the user asked for (`--engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preference {
    /// The fastest that is safe for the descriptors at hand.
    Auto,
    /// Zero-copy where it applies (one output, no hash), memory beyond.
    Splice,
    /// Portable read and write through memory.
    Copy,
}

/// The engine a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// Portable read/write through memory.
    Copy,
    /// Zero-copy tiers (Linux).
    Splice,
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EngineKind::Copy => "copy",
            EngineKind::Splice => "splice",
        })
    }
}

/// Everything the data path needs.
#[derive(Debug)]
pub struct Plan {
    /// Where bytes come from.
    pub input: Endpoint,
    /// Where they go, each getting every byte.
    pub outputs: Vec<Endpoint>,
    /// The hashes of the stream to compute.
    pub hashes: Vec<Algorithm>,
    /// The most bytes held.
    pub capacity: usize,
    /// Flush each file output to stable storage before calling it complete.
    pub sync: bool,
    /// What a failing output does to the others.
    pub output_errors: OutputErrors,
    /// Rate limits, watermarks and blocks.
    pub flow: Flow,
    /// Where input goes once memory is full (`--spill`).
    pub spill: Option<Arc<SpillFile>>,
}

/// Flow control: how fast, when, and in what pieces bytes move (`-r`, `--input-rate`,
/// `--start-at`, `--resume-at`, `--block-size`, `--input-block-size`).
#[derive(Debug, Clone, Default)]
pub struct Flow {
    /// The rate limits, which the control socket may change while accel runs.
    pub limits: Arc<Limits>,
    /// Watermarks and input blocks, kept by the backlog.
    pub gates: Gates,
    /// Every write to an output is exactly one block.
    pub block: Option<Block>,
}

impl Flow {
    /// Whether only an output's own thread may write to it now: it alone keeps the output
    /// rate (which the control socket may set while accel runs), the start watermark and
    /// output blocks. Otherwise the input thread may pass bytes straight on while nothing is
    /// queued (a splice straight through, [`bypass::Bypass`]).
    pub fn output_thread_only(&self) -> bool {
        self.block.is_some() || self.gates.start_at > 0 || self.limits.output.load(Relaxed) != 0
    }
}

/// `--block-size`: the size of every write to an output, as tape drives need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Bytes in a block.
    pub size: usize,
    /// Pad the last block with zeros to the full size (`--pad`); else it is short.
    pub pad: bool,
}

/// How the data path ended.
#[derive(Debug)]
pub struct Outcomes {
    /// How the input ended.
    pub input: Outcome,
    /// How each output ended, in the plan's order.
    pub outputs: Vec<Outcome>,
    /// Each hash, in the plan's order, when the input ended at its end.
    pub digests: Vec<Option<Digest>>,
    /// The hashes whose thread failed (a bug: it panicked), with why.
    pub hashes_failed: Vec<(Algorithm, String)>,
    /// The stall watchdog ended the run, saying this.
    pub stalled: Option<String>,
}

/// How one side ended.
#[derive(Debug)]
pub enum Outcome {
    /// Input: its end was reached. Output: it got every byte read.
    Complete,
    /// It failed; an output gets no more bytes after this.
    Failed(Failure),
    /// The run ended first (another output's failure, a stall): cut short, no error of its own.
    CutShort,
}

/// Why a side failed.
#[derive(Debug)]
pub enum Failure {
    /// Reading the input, or writing an output.
    Io(io::Error),
    /// `--sync`: every byte was written, but flushing it to stable storage failed.
    Sync(io::Error),
    /// Reading spilled bytes back from the spill file in `dir` failed (the disk).
    Spill {
        /// The directory spilled into.
        dir: std::path::PathBuf,
        /// What went wrong.
        error: io::Error,
    },
    /// The output's thread failed: a bug in accel (it panicked, saying this).
    Panic(io::Error),
}

impl Failure {
    /// The error itself.
    pub fn error(&self) -> &io::Error {
        match self {
            Failure::Io(error)
            | Failure::Sync(error)
            | Failure::Spill { error, .. }
            | Failure::Panic(error) => error,
        }
    }
}

/// What a failing output does to the others (`--output-error`), as `tee` has it.
///
/// Whatever the mode, an output's failure is told with the bytes it got and missed, and a
/// failed output never holds the others back: it leaves the backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputErrors {
    /// No `--output-error`: `tee`'s default, which keeps `cat`'s behaviour for one output. A
    /// reader that goes away (EPIPE) ends the run by SIGPIPE; another error is told, and the
    /// other outputs go on (status 3 at the end).
    Default,
    /// Every error is told, EPIPE too, and the other outputs go on (status 3 at the end).
    Warn,
    /// As `warn`, but a reader that goes away is only noted, not a failure: that output
    /// stops, the others go on, and the status does not change for it.
    WarnNoPipe,
    /// Every error ends the run at once, EPIPE too (status 3).
    Exit,
    /// As `exit`, but a reader that goes away is only noted: the others go on.
    ExitNoPipe,
}

/// What the run does when an output fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    /// The other outputs go on.
    GoOn,
    /// The whole run ends now.
    EndTheRun,
}

impl OutputErrors {
    /// What the run does when an output fails with `error`.
    pub fn react(self, error: &io::Error) -> Reaction {
        match self {
            OutputErrors::Default if is_broken_pipe(error) => Reaction::EndTheRun,
            OutputErrors::Exit => Reaction::EndTheRun,
            OutputErrors::ExitNoPipe if !is_broken_pipe(error) => Reaction::EndTheRun,
            _ => Reaction::GoOn,
        }
    }

    /// Whether an output's failure with `error` makes the run a failure: all do but a reader
    /// going away in the `-nopipe` modes.
    pub fn is_failure(self, error: &io::Error) -> bool {
        !(is_broken_pipe(error)
            && matches!(self, OutputErrors::WarnNoPipe | OutputErrors::ExitNoPipe))
    }
}

/// Whether `error` is a reader that went away (EPIPE).
pub fn is_broken_pipe(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::BrokenPipe
}

/// What the data path tells the thread that runs it.
#[derive(Debug)]
pub enum Event {
    /// The input thread ended.
    Input(io::Result<()>),
    /// Output `index`'s thread ended.
    Output(usize, Result<(), Failure>),
    /// A hash's thread ended: it hashed all there was, or was stopped (`Ok`), or it failed,
    /// a bug in accel (it panicked, saying this).
    Hash(usize, Result<(), String>),
    /// The stall watchdog gave up, saying this.
    Stalled(String),
}

/// Which way bytes go at each side, as decided at the start and revised when the kernel
/// refuses a splice. Shared by the threads; shown by `--debug`.
#[derive(Debug)]
pub struct Route {
    /// The engine in use.
    pub engine: EngineKind,
    /// The input is spliced (otherwise read).
    pub input_splice: AtomicBool,
    /// The output is spliced (otherwise written); only with the splice engine's one output.
    pub output_splice: AtomicBool,
    /// Where each change of route is noted (with `--debug`).
    pub log: Arc<Log>,
}

impl Route {
    /// The route for the plan's endpoints: splicing where it is safe, with the splice engine.
    pub fn plan(preference: Preference, plan: &Plan, log: Arc<Log>) -> Route {
        let engine = choose(preference, plan);
        let (input, output) = (&plan.input, &plan.outputs[0]);
        let splice = engine == EngineKind::Splice;
        let route = Route {
            engine,
            input_splice: AtomicBool::new(splice && input.can_splice_from()),
            output_splice: AtomicBool::new(splice && output.can_splice_to()),
            log,
        };
        if preference == Preference::Splice && !splice {
            route.note(format_args!(
                "copying: several readers (outputs, hashes) share the bytes through memory, \
                 since a pipe's bytes can be read only once, and output blocks are cut from \
                 memory"
            ));
        }
        route.note(format_args!("{route}"));
        route
    }

    /// Reports a change of route (with `--debug`).
    pub fn note(&self, what: fmt::Arguments<'_>) {
        self.log.debug(what);
    }

    /// Stops splicing at one side, saying why (with `--debug`).
    pub fn stop_splicing(&self, side: &AtomicBool, name: &str, why: fmt::Arguments<'_>) {
        if side.swap(false, Relaxed) {
            self.note(format_args!("{name}: no longer spliced: {why}"));
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let way = |splice: &AtomicBool, other: &'static str| {
            if splice.load(Relaxed) { "splice" } else { other }
        };
        write!(
            f,
            "engine {}: input by {}, output by {}",
            self.engine,
            way(&self.input_splice, "read"),
            way(&self.output_splice, "write")
        )
    }
}

/// Chooses the engine for the preference and the plan: splice only where it exists, with a
/// single reader (one output, no hash), and for `auto` only where both ends can be spliced.
fn choose(preference: Preference, plan: &Plan) -> EngineKind {
    // Output blocks are cut from memory; a splice moves what the pipe holds.
    let single_reader =
        plan.outputs.len() == 1 && plan.hashes.is_empty() && plan.flow.block.is_none();
    let splices = plan.input.can_splice_from() && plan.outputs[0].can_splice_to();
    // A secure peer is read and written through memory; and a pipe's bytes, read once,
    // could not be sent again after a dropped connection.
    let memory_only =
        plan.input.through_memory_only() || plan.outputs.iter().any(Endpoint::through_memory_only);
    match preference {
        Preference::Copy => EngineKind::Copy,
        _ if !sys::CAN_SPLICE || !single_reader || memory_only => EngineKind::Copy,
        Preference::Splice => EngineKind::Splice,
        Preference::Auto if splices => EngineKind::Splice,
        Preference::Auto => EngineKind::Copy,
    }
}

/// How the input ended, for the outputs that must say it (a network output ends its stream
/// with an End frame only after a clean end of input). Told by the input thread once it
/// ends; its readers may see the end of the backlog a moment before.
#[derive(Debug, Default)]
pub struct InputEnd {
    complete: Mutex<Option<bool>>,
    told: Condvar,
}

impl InputEnd {
    fn tell(&self, complete: bool) {
        *self.complete.lock().unwrap_or_else(PoisonError::into_inner) = Some(complete);
        self.told.notify_all();
    }

    /// Waits until the input thread has told whether the input ended cleanly; `None` once
    /// the run is over.
    pub fn wait(&self, stop: &Stop) -> Option<bool> {
        let mut complete = self.complete.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(complete) = *complete {
                return Some(complete);
            }
            if stop.requested() {
                return None;
            }
            let step = Duration::from_millis(10);
            complete =
                self.told.wait_timeout(complete, step).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }
}

/// A thread of the run, and which side it serves.
struct Running {
    handle: JoinHandle<Option<Digest>>,
    side: Side,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Input,
    Output(usize),
    Hash(usize),
}

/// Moves everything from the plan's input to its outputs and hashes along `route`,
/// publishing progress to `meter`, until the input has ended and every output has it all, or
/// the run is stopped. `events` is the channel the watchdog also reports to; `inbox` its end.
///
/// Fails only when a thread cannot be started, before anything is read.
pub fn run(
    plan: Plan,
    route: Arc<Route>,
    meter: Arc<Meter>,
    stop: Arc<Stop>,
    events: mpsc::Sender<Event>,
    inbox: mpsc::Receiver<Event>,
) -> io::Result<Outcomes> {
    let readers = plan.outputs.len() + plan.hashes.len();
    let (producer, mut backlog_readers) = backlog::backlog(
        plan.capacity,
        readers,
        plan.flow.gates,
        plan.spill.clone(),
        Arc::clone(&meter),
        Arc::clone(&route.log),
    )?;
    let closer = producer.closer();
    let input_end = Arc::new(InputEnd::default());
    let mut threads = Vec::new();
    let hashes = backlog_readers.split_off(plan.outputs.len());
    // Readers first: they wait for data, so that if a thread cannot be had, nothing was read.
    for (index, (output, reader)) in plan.outputs.iter().zip(backlog_readers).enumerate() {
        let (output, route, events) = (output.clone(), Arc::clone(&route), events.clone());
        let (sync, flow, input_end) = (plan.sync, plan.flow.clone(), Arc::clone(&input_end));
        let meter = Arc::clone(&meter);
        let handle = spawn("accel-output", move || {
            // However the thread ends, it says so: a panic is this output's failure.
            let end = catch_unwind(AssertUnwindSafe(|| {
                output::write_all(&output, reader, &route, &flow, sync, &input_end)
            }))
            .unwrap_or_else(|panic| {
                Err(Failure::Panic(io::Error::other(format!(
                    "its thread failed, a bug in accel ({})",
                    panic_message(panic.as_ref())
                ))))
            });
            if end.is_ok() {
                // It has everything: its reader need not wait for the others to finish.
                output.retire();
            }
            tell_sleeps(|sleeps| meter.reader_slept(index, sleeps));
            let _ = events.send(Event::Output(index, end));
            None
        })?;
        threads.push(Running { handle, side: Side::Output(index) });
    }
    for (index, (algorithm, reader)) in plan.hashes.iter().zip(hashes).enumerate() {
        let (algorithm, events) = (*algorithm, events.clone());
        let (stop, meter) = (Arc::clone(&stop), Arc::clone(&meter));
        let reader_index = plan.outputs.len() + index;
        let handle = spawn("accel-hash", move || {
            let digest = catch_unwind(AssertUnwindSafe(|| {
                crate::engine::digest::hash(algorithm, reader, &stop)
            }));
            tell_sleeps(|sleeps| meter.reader_slept(reader_index, sleeps));
            let (digest, end) = match digest {
                Ok(digest) => (digest, Ok(())),
                Err(panic) => (None, Err(panic_message(panic.as_ref()))),
            };
            let _ = events.send(Event::Hash(index, end));
            digest
        })?;
        threads.push(Running { handle, side: Side::Hash(index) });
    }
    let input = plan.input.clone();
    let outputs = plan.outputs.clone();
    let input_route = Arc::clone(&route);
    let input_events = events.clone();
    let flow = plan.flow.clone();
    let input_meter = Arc::clone(&meter);
    let handle = spawn("accel-input", move || {
        let end = read_input(input, outputs, producer, &input_route, &flow);
        tell_sleeps(|sleeps| input_meter.input_slept(sleeps));
        input_end.tell(end.is_ok());
        let _ = input_events.send(Event::Input(end));
        None
    })?;
    threads.push(Running { handle, side: Side::Input });
    drop(events);
    Ok(follow(&plan, &route.log, threads, &stop, &closer, inbox))
}

/// Runs the input side along the route until the input ends, fails, or no reader is left.
fn read_input(
    input: Endpoint,
    mut outputs: Vec<Endpoint>,
    producer: Producer,
    route: &Route,
    flow: &Flow,
) -> io::Result<()> {
    let result = catch_unwind(AssertUnwindSafe(|| match route.engine {
        EngineKind::Copy => copy::read_input(&input, &outputs, producer, route, flow),
        EngineKind::Splice => {
            splice::Input::new(input, outputs.swap_remove(0), producer, route, flow).run()
        }
    }));
    result.unwrap_or_else(|_| Err(io::Error::other("the input thread panicked")))
}

/// Hears how each thread ends, applying the output policy, until all have ended or the run
/// is over; then ends what still runs, and says how each side ended.
fn follow(
    plan: &Plan,
    log: &Log,
    threads: Vec<Running>,
    stop: &Stop,
    closer: &backlog::Closer,
    inbox: mpsc::Receiver<Event>,
) -> Outcomes {
    let mut outcomes = Outcomes {
        input: Outcome::CutShort,
        outputs: plan.outputs.iter().map(|_| Outcome::CutShort).collect(),
        digests: plan.hashes.iter().map(|_| None).collect(),
        hashes_failed: Vec::new(),
        stalled: None,
    };
    let mut running = threads.len();
    let mut outputs_left = plan.outputs.len();
    let end_the_run = || {
        stop.request();
        closer.close();
    };
    while running > 0 && !stop.requested() {
        let Ok(event) = inbox.recv() else { break };
        match event {
            Event::Input(result) => {
                running -= 1;
                outcomes.input = ended(result.map_err(Failure::Io));
            }
            Event::Output(index, result) => {
                running -= 1;
                outcomes.outputs[index] = ended(result);
                let Outcome::Failed(failure) = &outcomes.outputs[index] else { continue };
                outputs_left -= 1;
                match plan.output_errors.react(failure.error()) {
                    Reaction::EndTheRun => end_the_run(),
                    Reaction::GoOn if outputs_left == 0 => end_the_run(),
                    // The final word, with the counts, comes at the end.
                    Reaction::GoOn => log.warn(format_args!(
                        "{}: {}; it gets no more bytes, the other outputs go on",
                        plan.outputs[index].name,
                        describe(failure.error())
                    )),
                }
            }
            Event::Hash(index, result) => {
                running -= 1;
                if let Err(why) = result {
                    // The outputs need no hash: they go on, and the run ends with status 8.
                    let hash = plan.hashes[index];
                    log.warn(format_args!(
                        "--hash {hash}: its thread failed, a bug in accel ({why}); no digest, \
                         the outputs go on"
                    ));
                    outcomes.hashes_failed.push((hash, why));
                }
            }
            Event::Stalled(why) => {
                outcomes.stalled = Some(why);
                end_the_run();
            }
        }
    }
    let input_complete = matches!(outcomes.input, Outcome::Complete);
    let (handles, sides): (Vec<_>, Vec<_>) =
        threads.into_iter().map(|thread| (thread.handle, thread.side)).unzip();
    for (digest, side) in stop.join_all(handles, PATIENCE).into_iter().zip(sides) {
        if let (Side::Hash(index), true) = (side, input_complete) {
            outcomes.digests[index] = digest.flatten();
        }
    }
    outcomes
}

/// How a side ended, from what its thread returned: an interruption is the run's end, not a
/// failure of its own.
fn ended(result: Result<(), Failure>) -> Outcome {
    match result {
        Ok(()) => Outcome::Complete,
        Err(failure) if failure.error().kind() == io::ErrorKind::Interrupted => Outcome::CutShort,
        Err(failure) => Outcome::Failed(failure),
    }
}

/// Tells `to` how many times the calling thread slept in the kernel (waited and was woken),
/// where the platform counts it: the wakeups `--debug` shows per MiB.
fn tell_sleeps(to: impl FnOnce(u64)) {
    if let Some(sleeps) = sys::thread_sleeps() {
        to(sleeps);
    }
}

/// Starts a thread named `name`.
fn spawn<T: Send + 'static>(
    name: &str,
    body: impl FnOnce() -> T + Send + 'static,
) -> io::Result<JoinHandle<T>> {
    thread::Builder::new().name(name.into()).spawn(body)
}
