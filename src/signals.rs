//! Signals: accel stops promptly and ends by the signal it was sent; a few others talk to the
//! watcher.
//!
//! A dedicated thread receives them through signal-hook's self-pipe, so no work happens in a
//! handler:
//! - SIGINT, SIGTERM, SIGHUP: the watcher reports the end (when a report or JSON was asked for),
//!   then the signal is re-raised with its default action, so the shell sees what it sent.
//! - SIGUSR1: the report so far, as `dd` does.
//! - SIGWINCH: the progress line is re-fitted to the new width.
//! - SIGTSTP, SIGCONT: the line is cleared before the job stops (with the default action) and
//!   the time stopped is taken out of the clock.
//!
//! SIGPIPE gets a do-nothing handler: a write to a vanished consumer then fails with EPIPE,
//! which the output side turns into death by SIGPIPE once it has stopped cleanly.

use std::io;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use signal_hook::consts::signal::{SIGCONT, SIGPIPE, SIGTSTP, SIGUSR1, SIGWINCH};
use signal_hook::iterator::Signals;

use crate::exit::{Exit, TERMINATING_SIGNALS, die_by};
use crate::watch::Watch;

/// How long a terminating signal waits for the report before ending accel regardless.
const REPORT_GRACE: Duration = Duration::from_secs(1);

/// Installs the handlers and starts the signal thread.
pub fn install(watch: Arc<Watch>) -> io::Result<()> {
    signal_hook::flag::register(SIGPIPE, Arc::new(AtomicBool::new(false)))?;
    let mut signals = Signals::new(TERMINATING_SIGNALS)?;
    signals.add_signal(SIGUSR1)?;
    signals.add_signal(SIGWINCH)?;
    signals.add_signal(SIGTSTP)?;
    signals.add_signal(SIGCONT)?;
    thread::Builder::new().name("accel-signals".into()).spawn(move || {
        for signal in signals.forever() {
            match signal {
                SIGUSR1 => watch.report_now(),
                SIGWINCH => watch.redraw(),
                SIGTSTP => {
                    watch.stop();
                    // Stops the process here (SIGSTOP); returns once it is continued.
                    let _ = signal_hook::low_level::emulate_default_handler(SIGTSTP);
                }
                SIGCONT => watch.resume(),
                terminating => {
                    // The report is worth a moment, not a hang: on a terminal stopped with
                    // Ctrl-S, writing it would block, and stopping promptly comes first.
                    let (done, reported) = mpsc::channel();
                    let watch = Arc::clone(&watch);
                    thread::spawn(move || {
                        watch.finish(Exit::Signal(terminating));
                        let _ = done.send(());
                    });
                    let _ = reported.recv_timeout(REPORT_GRACE);
                    die_by(terminating);
                }
            }
        }
    })?;
    Ok(())
}
