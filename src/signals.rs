//! Signals: accel stops promptly and ends by the signal it was sent.
//!
//! A dedicated thread receives SIGINT, SIGTERM and SIGHUP (through signal-hook's self-pipe, so
//! no work happens in a handler) and ends the process by re-raising the signal with its default
//! action. SIGPIPE gets a do-nothing handler: a write to a vanished consumer then fails with
//! EPIPE, which the output side turns into death by SIGPIPE once it has stopped cleanly.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;

use signal_hook::consts::signal::SIGPIPE;
use signal_hook::iterator::Signals;

use crate::exit::{TERMINATING_SIGNALS, die_by};

/// Installs the handlers and starts the signal thread.
pub fn install() -> io::Result<()> {
    signal_hook::flag::register(SIGPIPE, Arc::new(AtomicBool::new(false)))?;
    let mut signals = Signals::new(TERMINATING_SIGNALS)?;
    thread::Builder::new().name("accel-signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            die_by(signal);
        }
    })?;
    Ok(())
}
