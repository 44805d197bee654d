//! Stopping a run: every thread stops when the run ends, even one blocked in a system call.
//!
//! A thread blocked in `read` on a producer that sends nothing, or in `write` to a consumer
//! that reads nothing, cannot see a flag. So a stop is a flag plus a signal: the flag says the
//! run is over, and a do-nothing handler for [`INTERRUPT`], installed without `SA_RESTART`,
//! makes the blocked call return `EINTR`, after which the I/O loops look at the flag
//! ([`Stop::check`]). The signal can land just before a thread enters its call, so the one
//! stopping the run sends it again until the thread has ended ([`Stop::join`]).
//!
//! The same loops cope with a descriptor someone else made `O_NONBLOCK` (or accel's own
//! sockets): [`blocking`] makes a call behave as on a blocking descriptor, retrying on `EINTR`
//! unless the run is over and waiting in `poll` ([`wait_for`]) on `EAGAIN`.

use std::ffi::c_int;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::thread::JoinHandleExt;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;

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

    /// Sleeps for `pause`, unless the run is over first: then an `Interrupted` error.
    pub fn sleep(&self, pause: Duration) -> io::Result<()> {
        let until = Instant::now() + pause;
        loop {
            self.check()?;
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            let timeout = rustix::event::Timespec::try_from(left).unwrap_or_default();
            match rustix::event::poll(&mut [], Some(&timeout)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Waits for `thread` to end, interrupting whatever call it blocks in while the run is
    /// over; gives up after `patience` (a thread stuck where signals cannot reach, such as
    /// a write to a hung NFS server, is left to the process's exit).
    pub fn join<T>(&self, thread: JoinHandle<T>, patience: Duration) -> Option<T> {
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

/// Waits until `fd` is ready for `events`, or has hung up or failed (the next I/O call then
/// says how). An interrupted wait goes on unless the run is over (an `Interrupted` error);
/// past `deadline`, a `TimedOut` error.
pub fn wait_for(
    fd: BorrowedFd<'_>,
    events: PollFlags,
    stop: &Stop,
    deadline: Option<Instant>,
) -> io::Result<()> {
    let mut fds = [PollFd::new(&fd, events)];
    loop {
        let left = match deadline {
            None => None,
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Err(io::ErrorKind::TimedOut.into()),
            },
        };
        let timeout = left.map(|left| rustix::event::Timespec::try_from(left).unwrap_or_default());
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(0) => continue,
            Ok(_) => return Ok(()),
            Err(Errno::INTR) => stop.check()?,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Runs `call` until it answers, as it would on a blocking descriptor whatever `fd`'s flags:
/// `EINTR` retries unless the run is over (an `Interrupted` error), `EAGAIN` waits until `fd`
/// is ready for `events` (past `deadline`, a `TimedOut` error). Any other error is returned.
pub fn blocking<T>(
    fd: BorrowedFd<'_>,
    events: PollFlags,
    stop: &Stop,
    deadline: Option<Instant>,
    mut call: impl FnMut() -> rustix::io::Result<T>,
) -> io::Result<T> {
    loop {
        match call() {
            Ok(answer) => return Ok(answer),
            Err(Errno::INTR) => stop.check()?,
            Err(Errno::AGAIN) => wait_for(fd, events, stop, deadline)?,
            Err(error) => return Err(error.into()),
        }
    }
}
