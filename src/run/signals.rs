//! Signals: accel stops promptly and ends by the signal it was sent; a few others talk to the
//! watcher.
//!
//! A dedicated thread receives them through signal-hook's self-pipe, so no work happens in a
//! handler:
//! - SIGINT, SIGTERM, SIGHUP: the watcher reports the end (when a report or JSON was asked for),
//!   the control socket is removed, then the signal is re-raised with its default action, so
//!   the shell sees what it sent.
//! - SIGUSR1: the report so far, as `dd` does.
//! - SIGWINCH: the progress line is re-fitted to the new width.
//! - SIGCONT: the time the job was stopped is taken out of the clock.
//!
//! SIGTSTP is not caught: the kernel's own stop is the only one that is always right. It is
//! dropped in an orphaned process group, where no shell is left to continue the job, and a
//! SIGCONT sent right after it cancels it; a handler that stops the process itself later
//! gets both wrong (accel would stay stopped for good), and so once did accel's.
//!
//! A signal ignored when accel starts stays ignored, as with every Unix filter: `nohup accel`
//! survives SIGHUP, and a script's background job survives SIGINT. With SIGPIPE ignored, a
//! vanished consumer is an ordinary write error (`Broken pipe`, status 3), as `cat` reports
//! it; otherwise SIGPIPE gets a do-nothing handler, so a write fails with EPIPE and the
//! output side ends accel by SIGPIPE once it has stopped cleanly.
//!
//! The thread is started before any handler is installed: a handler without its thread would
//! swallow SIGTERM for good.

use std::ffi::c_int;
use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock, mpsc};
use std::thread;
use std::time::Duration;

use signal_hook::consts::signal::{SIGCONT, SIGPIPE, SIGUSR1, SIGWINCH};
use signal_hook::iterator::Signals;

use crate::exit::{Exit, TERMINATING_SIGNALS, die_by};
use crate::sys::{self, Disposition};
use crate::watch::Watch;
use crate::watch::control;

/// How long a terminating signal waits for the report before ending accel regardless.
const REPORT_GRACE: Duration = Duration::from_secs(1);

/// What accel found about signals when it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dispositions {
    /// SIGPIPE was ignored: a vanished consumer is reported as a write error.
    pub pipe_ignored: bool,
}

/// Starts the signal thread, then installs the handlers of every signal not ignored on entry.
pub fn install(watch: Arc<Watch>) -> io::Result<Dispositions> {
    let (hand_over, handed) = mpsc::channel::<Signals>();
    thread::Builder::new().name("accel-signals".into()).spawn(move || {
        // No handlers if the installing side gave up (it drops the sender).
        if let Ok(mut signals) = handed.recv() {
            for signal in signals.forever() {
                handle(signal, &watch);
            }
        }
    })?;
    let pipe_ignored = ignored_on_entry(SIGPIPE);
    if !pipe_ignored {
        signal_hook::flag::register(SIGPIPE, Arc::new(AtomicBool::new(false)))?;
    }
    let wanted = TERMINATING_SIGNALS.iter().chain(&[SIGUSR1, SIGWINCH, SIGCONT]);
    let signals = Signals::new(wanted.copied().filter(|&s| !ignored_on_entry(s)))?;
    hand_over.send(signals).map_err(|_| io::Error::other("the signal thread has ended"))?;
    Ok(Dispositions { pipe_ignored })
}

fn handle(signal: c_int, watch: &Arc<Watch>) {
    match signal {
        SIGUSR1 => watch.report_now(),
        SIGWINCH => watch.redraw(),
        SIGCONT => watch.resume(),
        terminating => {
            // The report is worth a moment, not a hang: on a terminal stopped with Ctrl-S,
            // writing it would block, and stopping promptly comes first. Without a thread to
            // spare, there is no report.
            let (done, reported) = mpsc::channel();
            let watch = Arc::clone(watch);
            let reporter = thread::Builder::new().spawn(move || {
                watch.report(Exit::Signal(terminating), &[]);
                let _ = done.send(());
            });
            if reporter.is_ok() {
                let _ = reported.recv_timeout(REPORT_GRACE);
            }
            control::remove_socket();
            if let Some(last_word) = LAST_WORD.get() {
                last_word();
            }
            die_by(terminating);
        }
    }
}

/// What is said before a terminating signal ends accel: a run started through ssh tells the
/// remote accel to stop its command (ssh/), since a process that dies by its signal runs no
/// more of its own code.
static LAST_WORD: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

/// Sets what is said before a terminating signal ends accel (once per process).
pub fn before_dying(last_word: Box<dyn Fn() + Send + Sync>) {
    let _ = LAST_WORD.set(last_word);
}

/// Whether `signal` was set to be ignored by whoever started accel.
fn ignored_on_entry(signal: c_int) -> bool {
    sys::disposition(signal) == Some(Disposition::Ignored)
}
