//! Ending a run: every thread stops when the run ends, even one blocked in a system call.
//!
//! A thread blocked in `read` on a producer that sends nothing, or in `write` to a consumer
//! that reads nothing, cannot see a flag. So a stop is a flag plus a signal: the flag says the
//! run is over, and a do-nothing handler for [`INTERRUPT`], installed without `SA_RESTART`,
//! makes the blocked call return `EINTR`, after which the I/O loops look at the flag
//! ([`Stop::check`]). The signal can land just before a thread enters its call, so the one
//! stopping the run sends it again until the thread has ended ([`Stop::end`]).

use std::ffi::c_int;
use std::io;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The signal that interrupts a blocked thread: SIGURG, whose default action is to do nothing
/// and which only sockets with out-of-band data send, so no one else relies on it here.
pub const INTERRUPT: c_int = libc::SIGURG;

/// How often a thread that has not ended yet is interrupted again.
const AGAIN: Duration = Duration::from_millis(5);

/// The run is over: whoever sees this stops.
#[derive(Debug, Default)]
pub struct Stop {
    requested: AtomicBool,
}

impl Stop {
    /// Installs [`INTERRUPT`]'s do-nothing handler (without `SA_RESTART`, so that blocked calls
    /// return `EINTR`).
    pub fn install() -> io::Result<()> {
        extern "C" fn nothing(_: c_int) {}
        // SAFETY: a handler that does nothing is async-signal-safe; the action is well formed.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = nothing as extern "C" fn(c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(INTERRUPT, &action, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Whether the run is over.
    pub fn requested(&self) -> bool {
        self.requested.load(SeqCst)
    }

    /// Says the run is over; threads see it at their next step or interrupted call.
    pub fn request(&self) {
        self.requested.store(true, SeqCst);
    }

    /// For a call that returned `EINTR`: an `Interrupted` error once the run is over, so that
    /// the caller stops, else `Ok` to retry.
    pub fn check(&self) -> io::Result<()> {
        if self.requested() { Err(io::ErrorKind::Interrupted.into()) } else { Ok(()) }
    }

    /// Waits for `thread` to end, interrupting whatever call it blocks in while the run is
    /// over; gives up after `patience` (a thread stuck where signals cannot reach, such as
    /// a write to a hung NFS server, is left to the process's exit).
    pub fn end<T>(&self, thread: JoinHandle<T>, patience: Duration) -> Option<T> {
        let deadline = Instant::now() + patience;
        while !thread.is_finished() {
            if Instant::now() > deadline {
                return None;
            }
            if self.requested() {
                // SAFETY: the thread has not been joined, so its pthread_t is valid.
                unsafe { libc::pthread_kill(thread.as_pthread_t() as libc::pthread_t, INTERRUPT) };
            }
            thread::sleep(AGAIN);
        }
        thread.join().ok()
    }
}
