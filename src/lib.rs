//! accel: a pipeline buffer.
//!
//! `producer | accel | consumer`: accel reads stdin as fast as the producer writes and writes
//! stdout as fast as the consumer reads, holding the difference in memory, so that two bursty
//! stages overlap their work instead of taking turns.
//!
//! The data path, in reading order: [`endpoint`] (the descriptors and safe blocking I/O on
//! them) → [`engine`] (threads moving bytes) → [`backlog`] (the buffer between them); [`meter`]
//! publishes counters from the side. [`run`] ties them together for the binary, whose exit
//! policy lives in [`exit`].

#![deny(missing_docs)]

pub mod backlog;
pub mod cli;
pub mod config;
pub mod endpoint;
pub mod engine;
pub mod exit;
pub mod log;
pub mod meter;
pub mod size;
pub mod stdio;
pub mod watch;

mod signals;
mod sys;

use std::sync::Arc;

use crate::backlog::Backlog;
use crate::config::{Config, JsonTarget};
use crate::endpoint::{Endpoint, FdKind, describe};
use crate::engine::{Ending, Route};
use crate::exit::{BROKEN_PIPE, Exit};
use crate::log::Log;
use crate::meter::{Meter, Snapshot};
use crate::signals::Dispositions;
use crate::size::Bytes;
use crate::watch::Watch;

/// Runs accel between stdin and stdout as configured, printing any error, and says how to end.
pub fn run(config: &Config, closed: stdio::Closed) -> Exit {
    // Checked before anything is read, so that no byte is taken from the producer in vain.
    if closed.stdout {
        eprintln!("accel: stdout is closed: there is nowhere to write");
        return Exit::OutputFailed;
    }
    if closed.stdin {
        eprintln!("accel: stdin is closed: there is nothing to read");
        return Exit::InputFailed;
    }
    match transfer(config) {
        Ok(exit) => exit,
        Err(Refusal::Usage(why)) => {
            eprintln!("accel: {why}");
            Exit::Usage
        }
        Err(Refusal::Setup { what, error }) => {
            eprintln!("accel: cannot start: {what}: {}; nothing was read", describe(&error));
            Exit::Setup
        }
    }
}

/// Why a run did not start; nothing was read.
enum Refusal {
    /// What was asked makes no sense for these descriptors.
    Usage(String),
    /// The machine refused something accel needs (a thread, memory, a descriptor).
    Setup {
        /// What accel was doing: `start the signal thread`.
        what: &'static str,
        /// Why it could not.
        error: std::io::Error,
    },
}

/// Turns an error of starting up into a [`Refusal::Setup`] saying what was being done.
fn setup(what: &'static str) -> impl FnOnce(std::io::Error) -> Refusal {
    move |error| Refusal::Setup { what, error }
}

fn transfer(config: &Config) -> Result<Exit, Refusal> {
    let input = Endpoint::inspect(rustix::stdio::stdin()).map_err(setup("inspect stdin"))?;
    let output = Endpoint::inspect(rustix::stdio::stdout()).map_err(setup("inspect stdout"))?;
    if input.feeds(&output) {
        return Err(Refusal::Usage(
            "stdin and stdout are the same file: input file is output file".into(),
        ));
    }
    for endpoint in [&input, &output] {
        if endpoint.kind == FdKind::Pipe {
            sys::enlarge_pipe(endpoint.fd);
        }
    }
    let log = Arc::new(Log::new(config.quiet, config.debug));
    let capacity = Backlog::capacity_for(within_memory(config.size, &log));
    let meter = Arc::new(Meter::new(capacity as u64));
    let engine = engine::choose(config.engine, &input, &output);
    let route = Arc::new(Route::plan(engine, &input, &output, log));
    let expected = config.expect.or_else(|| input.remaining());
    let watch = match Watch::new(config, Arc::clone(&meter), Arc::clone(&route), expected) {
        Ok(watch) => watch,
        Err(error) => {
            let Some(JsonTarget::File(path)) = &config.json else { unreachable!("only a file") };
            return Err(Refusal::Usage(format!("--json={}: {}", path.display(), describe(&error))));
        }
    };
    let signals = signals::install(Arc::clone(&watch)).map_err(setup("install signal handlers"))?;
    watch.start().map_err(setup("start the watcher"))?;
    let ending = engine::run(input, output, Arc::clone(&route), capacity, Arc::clone(&meter))
        .map_err(setup("start the transfer"))?;
    let snapshot = meter.snapshot();
    route.note(format_args!(
        "{route}; bytes straight through {}, via pool pipes {}, via memory {}",
        snapshot.tiers[0], snapshot.tiers[1], snapshot.tiers[2]
    ));
    let exit = conclude(ending, &snapshot, signals);
    watch.finish(exit);
    Ok(exit)
}

/// The buffer size to use for `-m size`: under the memory this process may really have,
/// saying so when that is less.
fn within_memory(size: usize, log: &Log) -> usize {
    match sys::memory_limit() {
        Some(limit) if size as u64 > limit.bytes => {
            log.warn(format_args!(
                "-m {} is more than {limit} allows; at most {} will be held",
                Bytes(size as u64),
                Bytes(limit.bytes)
            ));
            limit.bytes as usize
        }
        _ => size,
    }
}

/// Says what went wrong, if anything, and how accel ends because of it.
fn conclude(ending: Ending, snapshot: &Snapshot, signals: Dispositions) -> Exit {
    match ending {
        Ending::Complete => Exit::Success,
        Ending::InputFailed(error) => {
            eprintln!(
                "accel: read from stdin: {}; the {} bytes read before it were delivered",
                describe(&error),
                snapshot.bytes_in
            );
            Exit::InputFailed
        }
        // As `cat` ends, quietly; unless SIGPIPE was ignored, when `cat` reports the error too.
        Ending::OutputFailed { error, .. }
            if error.kind() == std::io::ErrorKind::BrokenPipe && !signals.pipe_ignored =>
        {
            BROKEN_PIPE
        }
        Ending::OutputFailed { error, buffered } => {
            eprintln!(
                "accel: write to stdout: {}; {} bytes delivered, {} bytes read but not delivered",
                describe(&error),
                snapshot.bytes_out,
                buffered
            );
            Exit::OutputFailed
        }
    }
}
