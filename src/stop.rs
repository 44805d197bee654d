//! Stopping a run: every thread stops when the run ends, even one blocked in a system call.
//!
//! A thread blocked in `read` on a producer that sends nothing, or in `write` to a consumer
//! that reads nothing, cannot see a flag. So a stop is a flag plus a signal: the flag says the
//! run is over, and a do-nothing handler for [`INTERRUPT`], installed without `SA_RESTART`,
//! makes the blocked call return `EINTR`, after which the I/O loops look at the flag
//! ([`Stop::check`]). The signal can land just before a thread enters its call (between its
//! last look at the flag and the call), where it interrupts nothing; so the one stopping the
//! run ([`Stop::join_all`]) gives the threads a moment to end on their own, interrupts each
//! one still running once, and once more a little later should it still run; then it only
//! waits. Never more: a thread still running then is in a call the signal does not end (a
//! program's own code that retries it, a handler installed with `SA_RESTART`, a disk that
//! does not answer), and a program that handles the signal itself sees every one of them.
//!
//! The same loops cope with a descriptor someone else made `O_NONBLOCK` (or accel's own
//! sockets): [`blocking`] makes a call behave as on a blocking descriptor, retrying on `EINTR`
//! unless the run is over and waiting in `poll` ([`wait_for`]) on `EAGAIN`.

use std::ffi::c_int;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;

use crate::sys::{self, Disposition};

/// The signal that interrupts a blocked thread: SIGURG, whose default action is to do nothing
/// and which only sockets with out-of-band data send, so no one else relies on it here.
pub const INTERRUPT: c_int = libc::SIGURG;

/// How often the one stopping a run looks whether its threads have ended; also how long a
/// thread is given to end on its own (it saw the flag, or a closed backlog woke it) before it
/// is interrupted.
const LOOK: Duration = Duration::from_millis(5);

/// How long after the first interrupt a thread still running is interrupted the second, and
/// last, time: the first may have landed just before it entered its call. Long enough for a
/// thread the first reached to have ended on a loaded machine; short against the patience.
const REMINDER: Duration = Duration::from_millis(100);

/// The most times a thread is interrupted when its run is stopped.
pub const INTERRUPTS: u32 = 2;

/// The run is over: whoever sees this stops.
#[derive(Debug, Default)]
pub struct Stop {
    requested: AtomicBool,
}

impl Stop {
    /// Installs [`INTERRUPT`]'s do-nothing handler (without `SA_RESTART`, so that blocked calls
    /// return `EINTR`).
    pub fn install() -> io::Result<()> {
        sys::handle_by_interrupting(INTERRUPT)
    }

    /// Installs [`INTERRUPT`]'s do-nothing handler once in the process, unless the signal's
    /// action was set already: a program that uses the library and handles it itself keeps
    /// its own handler (see the library's `Buffer` for what that handler sees).
    pub fn install_unless_set() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            if sys::disposition(INTERRUPT) == Some(Disposition::Default) {
                let _ = Stop::install();
            }
        });
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

    /// Waits for `thread` to end, as [`join_all`](Stop::join_all) does.
    pub fn join<T>(&self, thread: JoinHandle<T>, patience: Duration) -> Option<T> {
        self.join_all(vec![thread], patience).pop().flatten()
    }

    /// Waits for `threads` to end, all within one `patience`, and says what each returned
    /// (`None` for one that panicked or was given up on). While the run is over, a thread
    /// still running after a moment ([`LOOK`]) is interrupted, and once more after
    /// [`REMINDER`] should it still run: [`INTERRUPTS`] at most. A thread still running at
    /// the end of the patience is stuck where the signal does not reach (a program's code
    /// that retries an interrupted call, a write to a hung NFS server), and is left to end
    /// on its own, or with the process.
    pub fn join_all<T>(&self, threads: Vec<JoinHandle<T>>, patience: Duration) -> Vec<Option<T>> {
        let start = Instant::now();
        let mut waiting: Vec<(JoinHandle<T>, u32)> =
            threads.into_iter().map(|thread| (thread, 0)).collect();
        loop {
            let elapsed = start.elapsed();
            let mut running = false;
            for (thread, interrupts) in &mut waiting {
                if thread.is_finished() {
                    continue;
                }
                running = true;
                let due = match *interrupts {
                    0 => LOOK,
                    1 => LOOK + REMINDER,
                    _ => continue,
                };
                if self.requested() && elapsed >= due {
                    sys::send_to_thread(thread, INTERRUPT);
                    *interrupts += 1;
                }
            }
            if !running || elapsed > patience {
                break;
            }
            thread::sleep(LOOK);
        }
        waiting
            .into_iter()
            .map(|(thread, _)| thread.is_finished().then(|| thread.join().ok()).flatten())
            .collect()
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
    poll_until(&mut [PollFd::new(&fd, events)], stop, deadline)
}

/// As [`wait_for`], until either of two descriptors is ready for its own `events`: a
/// connection that reads one pipe and writes another.
pub fn wait_for_either(
    (one, its): (BorrowedFd<'_>, PollFlags),
    (other, others): (BorrowedFd<'_>, PollFlags),
    stop: &Stop,
    deadline: Option<Instant>,
) -> io::Result<()> {
    poll_until(&mut [PollFd::new(&one, its), PollFd::new(&other, others)], stop, deadline)
}

/// Polls `fds` until one is ready, as [`wait_for`] says.
fn poll_until(fds: &mut [PollFd<'_>], stop: &Stop, deadline: Option<Instant>) -> io::Result<()> {
    loop {
        let left = match deadline {
            None => None,
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return Err(io::ErrorKind::TimedOut.into()),
            },
        };
        let timeout = left.map(|left| rustix::event::Timespec::try_from(left).unwrap_or_default());
        match rustix::event::poll(fds, timeout.as_ref()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;
    use std::sync::{Arc, mpsc};

    /// Every thread of a stopped run is interrupted at once, not once the ones before it have
    /// ended or been given up on: here the first waits (where no signal reaches) for the
    /// second, which a signal ends, so the first ends only if the second is interrupted
    /// while the first is still waited for.
    #[test]
    fn join_all_interrupts_every_thread_without_waiting_for_the_others() {
        // Not `install`: the library's tests put a handler of their own in its place.
        Stop::install_unless_set();
        let stop = Arc::new(Stop::default());
        let (freed, waits) = mpsc::channel();
        let first = thread::spawn(move || waits.recv_timeout(Duration::from_secs(60)).is_ok());
        let (silent, _producer) = rustix::pipe::pipe().unwrap();
        let (reading, read) = mpsc::channel();
        let own = Arc::clone(&stop);
        let second = thread::spawn(move || {
            reading.send(()).unwrap();
            let mut buf = [0; 1];
            let read = blocking(silent.as_fd(), PollFlags::IN, &own, None, || {
                rustix::io::read(&silent, &mut buf)
            });
            freed.send(()).unwrap();
            read.is_err_and(|error| error.kind() == io::ErrorKind::Interrupted)
        });
        read.recv().unwrap();
        stop.request();
        let ended = stop.join_all(vec![first, second], Duration::from_secs(2));
        assert_eq!(ended, [Some(true), Some(true)], "[freed by the second, interrupted]");
    }
}
