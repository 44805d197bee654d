//! Signals, where accel handles them by hand: what a signal does now (its disposition), a
//! handler that does nothing and does not restart calls, a signal sent to one thread, a
//! signal ignored, and a process group stopped (the command accel ran for the other end of
//! an ssh run).
//!
//! POSIX everywhere (no `cfg`): `sigaction` and `pthread_kill` are the same calls on every
//! Unix. signal-hook covers what accel's signal thread receives; these are what it does not
//! offer: reading a disposition without changing it, and interrupting one thread.

use std::ffi::c_int;
use std::io;
use std::os::unix::thread::JoinHandleExt;
use std::thread::JoinHandle;

/// What a signal does now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Its default action (`SIG_DFL`).
    Default,
    /// Nothing: it is ignored (`SIG_IGN`), as whoever started the process may have set it.
    Ignored,
    /// A handler runs.
    Handled,
}

/// What `signal` does now, where the system says.
pub fn disposition(signal: c_int) -> Option<Disposition> {
    // SAFETY: a null new action only reads the current one into a zeroed, well-formed struct.
    let current = unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, std::ptr::null(), &mut current) != 0 {
            return None;
        }
        current.sa_sigaction
    };
    Some(match current {
        libc::SIG_DFL => Disposition::Default,
        libc::SIG_IGN => Disposition::Ignored,
        _ => Disposition::Handled,
    })
}

/// Installs a handler for `signal` that does nothing, without `SA_RESTART`: a call blocked
/// in the thread it lands on returns `EINTR`.
pub fn handle_by_interrupting(signal: c_int) -> io::Result<()> {
    extern "C" fn nothing(_: c_int) {}
    // SAFETY: a handler that does nothing is async-signal-safe; the action is well formed.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as extern "C" fn(c_int) as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(signal, &action, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sends `signal` to `thread`, which has not been joined.
pub fn send_to_thread<T>(thread: &JoinHandle<T>, signal: c_int) {
    // SAFETY: the thread has not been joined (the handle is borrowed), so its pthread_t is
    // valid.
    unsafe { libc::pthread_kill(thread.as_pthread_t() as libc::pthread_t, signal) };
}

/// Ignores `signal` from now on (`SIG_IGN`), for this process and what it starts.
pub fn ignore_signal(signal: c_int) {
    // SAFETY: SIG_IGN runs no code; called before the threads that could race it start.
    unsafe {
        libc::signal(signal, libc::SIG_IGN);
    }
}

/// Waits for the child `pid` to exit, and says how: its exit status, or the signal that
/// killed it. It is left for its owner to reap (`WNOWAIT`). A signal that interrupts the wait
/// asks `interrupted` whether to go on (its error ends the wait).
pub fn exit_of(
    pid: u32,
    interrupted: &dyn Fn() -> std::io::Result<()>,
) -> std::io::Result<(Option<i32>, Option<i32>)> {
    use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw);
    let pid = pid.ok_or_else(|| std::io::Error::other("no such process"))?;
    loop {
        match waitid(WaitId::Pid(pid), WaitIdOptions::EXITED | WaitIdOptions::NOWAIT) {
            Ok(Some(status)) => return Ok((status.exit_status(), status.terminating_signal())),
            Ok(None) => {}
            Err(rustix::io::Errno::INTR) => interrupted()?,
            Err(error) => return Err(error.into()),
        }
    }
}

/// Stops the process group that `leader` leads: SIGTERM, then SIGKILL once the leader has
/// ended (what else of its group is left goes too) or after `grace`. The leader is left for
/// its owner to reap (`WNOWAIT`).
pub fn stop_group(leader: u32, grace: std::time::Duration) {
    use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};
    let Some(pid) = i32::try_from(leader).ok().and_then(Pid::from_raw) else { return };
    let _ = kill_process_group(pid, Signal::TERM);
    let deadline = std::time::Instant::now() + grace;
    let options = WaitIdOptions::EXITED | WaitIdOptions::NOWAIT | WaitIdOptions::NOHANG;
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = waitid(WaitId::Pid(pid), options) {
            break;
        }
        // Polled: a child's end has no descriptor to wait on without reaping it.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = kill_process_group(pid, Signal::KILL);
}
