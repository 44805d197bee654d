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
pub mod meter;
pub mod size;
pub mod stdio;
pub mod watch;

mod signals;
mod sys;

use std::sync::Arc;

use anyhow::Context;

use crate::config::{Config, JsonTarget};
use crate::endpoint::{Endpoint, FdKind, describe};
use crate::engine::{Ending, Route};
use crate::exit::{BROKEN_PIPE, Exit};
use crate::meter::{Meter, Snapshot};
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
        Err(error) => {
            eprintln!("accel: {error:#}");
            Exit::InputFailed
        }
    }
}

fn transfer(config: &Config) -> anyhow::Result<Exit> {
    let input = Endpoint::inspect(rustix::stdio::stdin()).context("inspect stdin")?;
    let output = Endpoint::inspect(rustix::stdio::stdout()).context("inspect stdout")?;
    for endpoint in [&input, &output] {
        if endpoint.kind == FdKind::Pipe {
            sys::enlarge_pipe(endpoint.fd);
        }
    }
    let meter = Arc::new(Meter::new(config.size as u64));
    let engine = engine::choose(config.engine, &input, &output);
    let route = Arc::new(Route::plan(engine, &input, &output, config.debug));
    let expected = config.expect.or_else(|| input.remaining());
    let watch = match Watch::new(config, Arc::clone(&meter), Arc::clone(&route), expected) {
        Ok(watch) => watch,
        Err(error) => {
            if let Some(JsonTarget::File(path)) = &config.json {
                eprintln!("accel: --json={}: {}", path.display(), describe(&error));
            }
            return Ok(Exit::Usage);
        }
    };
    signals::install(Arc::clone(&watch)).context("install signal handlers")?;
    watch.start().context("start the watcher")?;
    let ending = engine::run(input, output, Arc::clone(&route), config.size, Arc::clone(&meter))
        .context("start the transfer")?;
    let snapshot = meter.snapshot();
    route.note(format_args!(
        "{route}; bytes straight through {}, via pool pipes {}, via memory {}",
        snapshot.tiers[0], snapshot.tiers[1], snapshot.tiers[2]
    ));
    let exit = conclude(ending, &snapshot);
    watch.finish(exit);
    Ok(exit)
}

/// Says what went wrong, if anything, and how accel ends because of it.
fn conclude(ending: Ending, snapshot: &Snapshot) -> Exit {
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
        Ending::OutputFailed { error, .. } if error.kind() == std::io::ErrorKind::BrokenPipe => {
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
