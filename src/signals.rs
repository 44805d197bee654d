//! Signals: accel stops promptly and ends by the signal it was sent; a few others talk to the
//! watcher.
//!
//! A dedicated thread receives them through signal-hook's self-pipe, so no work happens in a
//! handler:
//! - SIGINT, SIGTERM, SIGHUP: the watcher reports the end (when a report or JSON was asked for),
//!   then the signal is re-raised with its default action, so the shell sees what it sent.
//! - SIGUSR1: the report so far, as `dd` does.
//! - SIGWINCH: the progress line is re-fitted to the new width.
//! - SIGTSTP, SIGCONT: the line is cleared before the job stops and the time stopped is taken
//!   out of the clock. The stop itself is the kernel's default action, re-raised, so that it
//!   is dropped where the kernel drops it (in an orphaned process group, where nobody could
//!   ever continue the job).
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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::Duration;

use signal_hook::consts::signal::{SIGCONT, SIGPIPE, SIGTSTP, SIGUSR1, SIGWINCH};
use signal_hook::iterator::Signals;

use crate::exit::{Exit, TERMINATING_SIGNALS, die_by};
use crate::watch::Watch;

/// How long a terminating signal waits for the report before ending accel regardless.
const REPORT_GRACE: Duration = Duration::from_secs(1);

/// SIGCONTs received so far, counted in the handler itself, at delivery.
static CONTINUED: AtomicU64 = AtomicU64::new(0);

/// What [`CONTINUED`] was when the latest SIGTSTP was delivered.
static CONTINUED_AT_STOP: AtomicU64 = AtomicU64::new(0);

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
    // Counted at delivery, not when the thread gets to them: a SIGCONT that follows a SIGTSTP
    // closely must cancel the stop, as it would for a process without handlers.
    if !ignored_on_entry(SIGTSTP) && !ignored_on_entry(SIGCONT) {
        // SAFETY: the actions only load and store atomics, which is async-signal-safe.
        unsafe {
            signal_hook::low_level::register(SIGCONT, || {
                CONTINUED.fetch_add(1, SeqCst);
            })?;
            signal_hook::low_level::register(SIGTSTP, || {
                CONTINUED_AT_STOP.store(CONTINUED.load(SeqCst), SeqCst);
            })?;
        }
    }
    let wanted = TERMINATING_SIGNALS.iter().chain(&[SIGUSR1, SIGWINCH, SIGTSTP, SIGCONT]);
    let signals = Signals::new(wanted.copied().filter(|&s| !ignored_on_entry(s)))?;
    hand_over.send(signals).map_err(|_| io::Error::other("the signal thread has ended"))?;
    Ok(Dispositions { pipe_ignored })
}

fn handle(signal: c_int, watch: &Arc<Watch>) {
    match signal {
        SIGUSR1 => watch.report_now(),
        SIGWINCH => watch.redraw(),
        SIGTSTP => {
            watch.stop();
            stop_by_default();
            watch.resume();
        }
        SIGCONT => watch.resume(),
        terminating => {
            // The report is worth a moment, not a hang: on a terminal stopped with Ctrl-S,
            // writing it would block, and stopping promptly comes first. Without a thread to
            // spare, there is no report.
            let (done, reported) = mpsc::channel();
            let watch = Arc::clone(watch);
            let reporter = thread::Builder::new().spawn(move || {
                watch.finish(Exit::Signal(terminating));
                let _ = done.send(());
            });
            if reporter.is_ok() {
                let _ = reported.recv_timeout(REPORT_GRACE);
            }
            die_by(terminating);
        }
    }
}

/// Whether `signal` was set to be ignored by whoever started accel.
fn ignored_on_entry(signal: c_int) -> bool {
    // SAFETY: a null new action only reads the current one into `current`.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut current) == 0
            && current.sa_sigaction == libc::SIG_IGN
    }
}

/// Stops the process as SIGTSTP's default action would, returning once it is continued, or
/// at once if a SIGCONT came after the SIGTSTP being handled.
///
/// Raising SIGSTOP instead would stop accel even in an orphaned process group, where the
/// kernel drops SIGTSTP because no shell is left to continue the job: accel would stay
/// stopped forever. So the default action is put back for a moment and SIGTSTP raised at
/// this very thread, blocked there until the end, so that the kernel's own rules decide:
/// a SIGCONT sent meanwhile discards the pending SIGTSTP. A SIGCONT that came even earlier,
/// between the job's stop and now, is seen in the counts taken at delivery, and the raised
/// SIGTSTP is taken back before it can stop anything.
fn stop_by_default() {
    let continued_at_stop = CONTINUED_AT_STOP.load(SeqCst);
    // SAFETY: signal masks and actions of this thread and process, with valid arguments; the
    // mask and our handler are put back before returning.
    unsafe {
        let mut tstp: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut tstp);
        libc::sigaddset(&mut tstp, SIGTSTP);
        let mut mask: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &tstp, &mut mask);
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        let mut ours: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(SIGTSTP, &default, &mut ours) == 0 {
            libc::pthread_kill(libc::pthread_self(), SIGTSTP);
            if CONTINUED.load(SeqCst) != continued_at_stop {
                let mut pending: libc::sigset_t = std::mem::zeroed();
                libc::sigpending(&mut pending);
                if libc::sigismember(&pending, SIGTSTP) == 1 {
                    let mut taken = 0;
                    libc::sigwait(&tstp, &mut taken);
                }
            }
            // Unblocked, a SIGTSTP still pending stops the process right here.
            libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
            libc::sigaction(SIGTSTP, &ours, std::ptr::null_mut());
        } else {
            libc::pthread_sigmask(libc::SIG_SETMASK, &mask, std::ptr::null_mut());
        }
    }
}
