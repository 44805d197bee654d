//! How a run ends, decided in one place.
//!
//! The rule behind every choice here: inserting accel must not change a pipeline's verdict.
//!
//! - The consumer went away (EPIPE): `cat` would die of SIGPIPE, and so does accel, so that
//!   `set -o pipefail` reports the same status with or without accel (141 in bash). Data still
//!   buffered has nowhere to go; nothing is printed, as with `cat`.
//! - SIGINT, SIGTERM, SIGHUP: accel ends by the same signal, so the shell sees what it sent
//!   (130, 143, 129) and a script's `trap` logic works unchanged.
//! - Other failures get their own status, so that a script can tell whether everything read was
//!   delivered (1: input failed, but what was read got out) or bytes were lost (3: output
//!   failed with data still buffered), and whether accel ever started (2: the command line,
//!   5: the machine refused a thread or memory; in both, nothing was read).

use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGPIPE, SIGTERM};

/// The ways accel ends, each with its documented status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: input ended and every byte read was written.
    Success,
    /// 1: reading the input failed; every byte read before the error was written.
    InputFailed,
    /// 2: the command line was wrong; nothing was read.
    Usage,
    /// 3: writing the output failed (or it was closed); buffered bytes were not delivered.
    OutputFailed,
    /// 4: no byte moved for `--stall-timeout` while work was pending.
    Stalled,
    /// 5: accel could not start (a thread, the signal handlers, the buffer's first memory);
    /// nothing was read.
    Setup,
    /// Ended by this signal, as the default action would (SIGPIPE, SIGINT, SIGTERM, SIGHUP).
    Signal(i32),
}

impl Exit {
    /// The exit status a process ending this way reports; 128 + n for a signal, as shells show.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::InputFailed => 1,
            Exit::Usage => 2,
            Exit::OutputFailed => 3,
            Exit::Stalled => 4,
            Exit::Setup => 5,
            Exit::Signal(signal) => 128u8.saturating_add(signal as u8),
        }
    }

    /// Ends the way described: by the signal itself for [`Exit::Signal`] (never returning),
    /// otherwise by returning the status for `main` to return.
    pub fn terminate(self) -> i32 {
        if let Exit::Signal(signal) = self {
            die_by(signal);
        }
        i32::from(self.code())
    }
}

/// The signals that end accel the way they would end `cat`.
pub const TERMINATING_SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// The status for a consumer that went away.
pub const BROKEN_PIPE: Exit = Exit::Signal(SIGPIPE);

/// Restores the default action of `signal` and raises it; exits 128 + n should that not kill.
pub fn die_by(signal: i32) -> ! {
    let _ = signal_hook::low_level::emulate_default_handler(signal);
    // Only reached if the signal is blocked in a way we cannot undo; the status says the same.
    std::process::exit(128 + signal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_statuses() {
        let codes: Vec<u8> = [
            Exit::Success,
            Exit::InputFailed,
            Exit::Usage,
            Exit::OutputFailed,
            Exit::Stalled,
            Exit::Setup,
            BROKEN_PIPE,
            Exit::Signal(SIGINT),
            Exit::Signal(SIGTERM),
            Exit::Signal(SIGHUP),
        ]
        .into_iter()
        .map(Exit::code)
        .collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 141, 130, 143, 129]);
    }
}
