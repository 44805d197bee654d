//! The data path: moves bytes from the input endpoint through the backlog to the output.
//!
//! Every engine runs two threads, one per side, so that a blocked write never stops reading and
//! an empty input never stops writing: the input thread blocks only on stdin or on a full
//! backlog, the output thread only on stdout or on an empty one. The engines differ in how the
//! input side moves bytes:
//!
//! - [`copy`]: `read` into the backlog's memory. Portable POSIX; every kind of descriptor.
//! - `splice` (Linux): zero-copy tiers, cheapest first: straight from stdin to stdout while
//!   nothing is queued, then into a small pool of accel's own pipes, then into memory.
//!
//! The output side is the same for both: `write_output` writes whatever the front of the
//! backlog holds, by `write` from memory or by `splice` from a pool pipe.

pub mod copy;
#[cfg(target_os = "linux")]
pub mod splice;

use std::fmt;
use std::io;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::thread;

use crate::backlog::{Backlog, Front};
use crate::cli::EngineArg;
use crate::endpoint::Endpoint;
use crate::log::Log;
use crate::meter::Meter;

/// How a transfer ended.
#[derive(Debug)]
pub enum Ending {
    /// Input reached its end and everything was written.
    Complete,
    /// Reading failed; everything read before was written.
    InputFailed(io::Error),
    /// Writing failed (EPIPE included); `buffered` bytes read were not delivered.
    OutputFailed {
        /// What went wrong.
        error: io::Error,
        /// Bytes read but not written when output stopped.
        buffered: u64,
    },
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

/// Which way bytes go at each side, as decided at the start and revised when the kernel
/// refuses a splice. Shared by both threads; shown by `-v` and `--debug`.
#[derive(Debug)]
pub struct Route {
    /// The engine in use.
    pub engine: EngineKind,
    /// stdin is spliced (otherwise read).
    pub input_splice: AtomicBool,
    /// stdout is spliced (otherwise written).
    pub output_splice: AtomicBool,
    /// Where each change of route is noted (with `--debug`).
    pub log: Arc<Log>,
}

impl Route {
    /// The route for `engine` between `input` and `output`: splicing where it is safe.
    pub fn plan(engine: EngineKind, input: &Endpoint, output: &Endpoint, log: Arc<Log>) -> Route {
        let splice = engine == EngineKind::Splice;
        let route = Route {
            engine,
            input_splice: AtomicBool::new(splice && input.can_splice_from()),
            output_splice: AtomicBool::new(splice && output.can_splice_to()),
            log,
        };
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
            "engine {}: stdin by {}, stdout by {}",
            self.engine,
            way(&self.input_splice, "read"),
            way(&self.output_splice, "write")
        )
    }
}

/// Chooses the engine for `--engine` and the descriptors at hand.
#[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
pub fn choose(engine: EngineArg, input: &Endpoint, output: &Endpoint) -> EngineKind {
    match engine {
        EngineArg::Copy => EngineKind::Copy,
        #[cfg(target_os = "linux")]
        EngineArg::Splice => EngineKind::Splice,
        #[cfg(target_os = "linux")]
        EngineArg::Auto if input.can_splice_from() && output.can_splice_to() => EngineKind::Splice,
        EngineArg::Auto => EngineKind::Copy,
        #[cfg(not(target_os = "linux"))]
        EngineArg::Splice => unreachable!("config.rs refuses splice off Linux"),
    }
}

/// Moves everything from `input` to `output` through a backlog of `size` bytes along `route`,
/// publishing progress to `meter`. Returns once input has ended and been written, or output
/// has failed.
///
/// On an output failure the input thread may still be blocked in `read`; it stops at its next
/// step, or when the process exits.
pub fn run(
    input: Endpoint,
    output: Endpoint,
    route: Arc<Route>,
    size: usize,
    meter: Arc<Meter>,
) -> io::Result<Ending> {
    let backlog = Arc::new(Backlog::new(size, meter, Arc::clone(&route.log))?);
    match route.engine {
        EngineKind::Copy => drive(backlog, &output, &route, move |b| copy::read_input(&input, b)),
        #[cfg(target_os = "linux")]
        EngineKind::Splice => {
            let input_route = Arc::clone(&route);
            drive(backlog, &output, &route, move |b| {
                splice::Input::new(input, output, b, &input_route).run()
            })
        }
        #[cfg(not(target_os = "linux"))]
        EngineKind::Splice => unreachable!("splice is chosen only on Linux"),
    }
}

/// Runs `read_input` on a new thread and the output on this one, until the transfer ends.
fn drive(
    backlog: Arc<Backlog>,
    output: &Endpoint,
    route: &Route,
    read_input: impl FnOnce(&Backlog) -> io::Result<()> + Send + 'static,
) -> io::Result<Ending> {
    let input_backlog = Arc::clone(&backlog);
    thread::Builder::new().name("accel-input".into()).spawn(move || {
        let end = catch_unwind(AssertUnwindSafe(|| read_input(&input_backlog)))
            .unwrap_or_else(|_| Err(io::Error::other("input thread panicked")));
        input_backlog.finish_input(end);
    })?;
    if let Err(error) = write_output(output, &backlog, route) {
        backlog.close_output();
        return Ok(Ending::OutputFailed { error, buffered: backlog.len() as u64 });
    }
    Ok(match backlog.take_input_end() {
        Some(Err(error)) => Ending::InputFailed(error),
        _ => Ending::Complete,
    })
}

/// Writes until the backlog is drained after input ended, or an error.
fn write_output(output: &Endpoint, backlog: &Backlog, route: &Route) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    let mut pipes = splice::PipeWriter::new(output, route);
    #[cfg(not(target_os = "linux"))]
    let _ = route;
    while let Some(front) = backlog.next() {
        let n = match front {
            Front::Memory(filled) => output.write(filled.as_slice())?,
            #[cfg(target_os = "linux")]
            Front::Pipe(pipe, len) => pipes.write(&pipe, len)?,
        };
        backlog.consume(n);
    }
    Ok(())
}
