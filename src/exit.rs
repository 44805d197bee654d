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
//!   5: the machine refused a thread or memory, 6: the network peer could not be reached or
//!   did not authenticate; in all three, nothing was read). 6 is apart from 2 and 5 because a
//!   script may well retry it: the receiver was not listening yet, the link was down.
//! - A thread of accel's own that fails (a bug: it panicked) is heard like any other end: its
//!   output fails, or its hash gives no digest, and the run ends with 8, saying what was
//!   delivered; it never hangs the run.
//!
//! With several outputs, one failing is the question `tee` answers with `--output-error`,
//! and accel answers it the same way ([`OutputErrors`]); whatever the answer, every output
//! that lost bytes is named with the bytes it got and missed ([`decide`]).

use signal_hook::consts::signal::{SIGHUP, SIGINT, SIGPIPE, SIGTERM};

use crate::engine::{Failure, Outcome, Outcomes, OutputErrors, is_broken_pipe};
use crate::meter::{Delivery, ReaderSnapshot, Snapshot};
use crate::words::{byte_count, describe};

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
    /// 6: the network side could not be set up (name not found, connection refused,
    /// unreachable, no answer, wrong key, port in use, no sender within `--accept-timeout`);
    /// nothing was read.
    Network,
    /// 7: bytes spilled to disk (`--spill`) could not be read back; the message says how many
    /// were delivered and lost.
    SpillFailed,
    /// 8: a thread of accel's own failed (a bug: it panicked); the message names its output
    /// or hash and says what was delivered.
    Bug,
    /// Ended by this signal, as the default action would (SIGPIPE, SIGINT, SIGTERM, SIGHUP).
    Signal(i32),
    /// The status of a command run on another host through ssh, which failed on its own
    /// (`--to ssh://HOST -- CMD`): accel returns it, as ssh would.
    Command(u8),
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
            Exit::Network => 6,
            Exit::SpillFailed => 7,
            Exit::Bug => 8,
            Exit::Signal(signal) => 128u8.saturating_add(signal as u8),
            Exit::Command(status) => status,
        }
    }

    /// The graver of this end and `other`, for an output's failure among others: lost bytes
    /// (3) outweigh an input failure (1), the spill lost (7) outweighs both, and a bug (8)
    /// every one.
    pub fn at_least(self, other: Exit) -> Exit {
        let rank = |exit: Exit| match exit {
            Exit::Success => 0,
            Exit::InputFailed => 1,
            Exit::OutputFailed => 2,
            Exit::SpillFailed => 3,
            Exit::Bug => 4,
            _ => 5,
        };
        if rank(other) > rank(self) { other } else { self }
    }

    /// This end, unless it is success: then `other`.
    pub fn or(self, other: Exit) -> Exit {
        if self == Exit::Success { other } else { self }
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

/// Why a network output's receiver is told the stream stops (its Abort), after the run: the
/// input failed, or the run was stopped first. `None` when there is nothing to tell: the
/// stream ended (the output's End, confirmed by the receiver), or the output itself failed
/// (its connection is what failed).
pub fn why_stream_stops(input: &Outcome, output: &Outcome) -> Option<String> {
    match (input, output) {
        (_, Outcome::Failed(_)) | (Outcome::Complete, Outcome::Complete) => None,
        (Outcome::Failed(failure), _) => {
            Some(format!("its input failed: {}", describe(failure.error())))
        }
        _ => Some("the sending accel was stopped".to_owned()),
    }
}

/// What an output got of the `total` bytes read, in words: `D delivered, M read but not
/// delivered`, each count as [`byte_count`] says it (`406 MiB (425197568 bytes)`). A network
/// output's bytes written were only sent: delivered is what its receiver confirmed (`D
/// delivered (confirmed by the receiver), S sent but not confirmed, M read but not sent`), and
/// over plain TCP nothing is confirmed.
pub fn counts(reader: &ReaderSnapshot, total: u64) -> String {
    let sent = reader.bytes.min(total);
    let unsent = byte_count(total - sent);
    match reader.delivery {
        Delivery::Written => {
            format!("{} delivered, {unsent} read but not delivered", byte_count(sent))
        }
        Delivery::Confirmed => {
            let confirmed = reader.delivered().min(sent);
            format!(
                "{} delivered (confirmed by the receiver), {} sent but not confirmed, {unsent} \
                 read but not sent",
                byte_count(confirmed),
                byte_count(sent - confirmed)
            )
        }
        Delivery::Unconfirmed => format!(
            "{} sent (not confirmed: --insecure has no confirmations), {unsent} read but not \
             sent",
            byte_count(sent)
        ),
    }
}

/// How a run came out: the status accel ends with, and the lines that say why (each said as
/// `accel: <line>`, under the final progress line, by the caller).
#[derive(Debug)]
pub struct Decision {
    /// How accel ends.
    pub exit: Exit,
    /// What is said of how the run came out: what failed, and what each output got.
    pub lines: Vec<String>,
}

/// What the run's data path ended as, said in words, and how accel ends because of it: the
/// exit policy decides, and says nothing itself.
///
/// `names` are the outputs' names in the plan's order; `pipe_ignored` says SIGPIPE was
/// ignored when accel started, when a reader going away is an ordinary write error, as `cat`
/// reports it.
pub fn decide(
    outcomes: &Outcomes,
    snapshot: &Snapshot,
    input: &str,
    names: &[String],
    policy: OutputErrors,
    pipe_ignored: bool,
    quiet: bool,
) -> Decision {
    let mut lines = Vec::new();
    let total = snapshot.bytes_in;
    let reader = |index: usize| snapshot.readers.get(index).copied().unwrap_or_default();
    let got = |index: usize| reader(index).bytes;
    let said = |index: usize| counts(&reader(index), total);
    // Network outputs whose receiver did not confirm every byte read: not delivered, said.
    let unconfirmed: Vec<String> = (0..names.len())
        .filter(|&index| {
            let reader = reader(index);
            reader.delivery != Delivery::Written && !reader.delivered_all(total)
        })
        .map(|index| format!("{}: {}", names[index], said(index)))
        .collect();
    if let Some(why) = &outcomes.stalled {
        lines.push(why.clone());
        for line in &unconfirmed {
            lines.push(line.clone());
        }
        return Decision { exit: Exit::Stalled, lines };
    }
    let mut exit = Exit::Success;
    if let Outcome::Failed(failure) = &outcomes.input {
        let why = describe(failure.error());
        let read = byte_count(total);
        if unconfirmed.is_empty() {
            lines.push(format!(
                "read from {input}: {why}; the {read} read before it were delivered"
            ));
        } else {
            lines.push(format!(
                "read from {input}: {why}; of the {read} read before it, {}",
                unconfirmed.join("; ")
            ));
        }
        exit = Exit::InputFailed;
    }
    let mut died_of_pipe = false;
    for (index, (outcome, name)) in outcomes.outputs.iter().zip(names).enumerate() {
        let delivered = byte_count(got(index));
        let missed = byte_count(total - got(index).min(total));
        let counts = said(index);
        match outcome {
            Outcome::Complete => {}
            Outcome::Failed(Failure::Spill { dir, error }) => {
                lines.push(format!(
                    "read back from the spill in {}: {}; {delivered} delivered to \
                     {name}, {missed} read but lost",
                    dir.display(),
                    describe(error)
                ));
                exit = exit.at_least(Exit::SpillFailed);
            }
            Outcome::Failed(Failure::Panic(error)) => {
                lines.push(format!(
                    "{name}: {error}; {delivered} delivered, {missed} read but not \
                     delivered"
                ));
                exit = exit.at_least(Exit::Bug);
            }
            Outcome::Failed(Failure::Sync(error)) => {
                lines.push(format!(
                    "sync {name}: {}; all {delivered} were written, but may not be on \
                     stable storage",
                    describe(error)
                ));
                exit = exit.at_least(Exit::OutputFailed);
            }
            Outcome::Failed(Failure::Io(error))
                if is_broken_pipe(error) && policy == OutputErrors::Default && !pipe_ignored =>
            {
                // As `cat` ends: by SIGPIPE, and quietly when it was the only output.
                died_of_pipe = true;
                if names.len() > 1 {
                    lines.push(format!("{name}: the reader went away; {counts}"));
                }
            }
            Outcome::Failed(Failure::Io(error)) if !policy.is_failure(error) => {
                if !quiet {
                    lines.push(format!("{name}: the reader went away; {counts}"));
                }
            }
            Outcome::Failed(Failure::Io(error)) => {
                lines.push(format!("write to {name}: {}; {counts}", describe(error)));
                exit = exit.at_least(Exit::OutputFailed);
            }
            Outcome::CutShort => {
                lines.push(format!("{name}: cut short when the run ended; {counts}"));
                exit = exit.at_least(Exit::OutputFailed);
            }
        }
    }
    for (hash, _) in &outcomes.hashes_failed {
        let delivered = snapshot.bytes_out;
        let outputs = if delivered == total {
            format!("all {} read were delivered", byte_count(total))
        } else {
            format!("{} of the {} read were delivered", byte_count(delivered), byte_count(total))
        };
        lines.push(format!("--hash {hash}: no digest (its thread failed); {outputs}"));
        exit = exit.at_least(Exit::Bug);
    }
    let exit = if died_of_pipe { BROKEN_PIPE } else { exit };
    Decision { exit, lines }
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

    /// Issue 17, item 10: a network output's bytes written were sent; delivered is what its
    /// receiver confirmed, and over plain TCP nothing is.
    #[test]
    fn counts_say_delivered_only_of_what_was_confirmed() {
        let reader = |delivery, bytes, confirmed| ReaderSnapshot {
            delivery,
            bytes,
            confirmed,
            ..ReaderSnapshot::default()
        };
        assert_eq!(
            counts(&reader(Delivery::Written, 700, 0), 1000),
            "700 bytes delivered, 300 bytes read but not delivered"
        );
        assert_eq!(
            counts(&reader(Delivery::Written, 425_197_568, 0), 428_553_011),
            "406 MiB (425197568 bytes) delivered, 3.2 MiB (3355443 bytes) read but not delivered"
        );
        assert_eq!(
            counts(&reader(Delivery::Confirmed, 700, 400), 1000),
            "400 bytes delivered (confirmed by the receiver), 300 bytes sent but not confirmed, \
             300 bytes read but not sent"
        );
        assert_eq!(
            counts(&reader(Delivery::Confirmed, 3 << 20, 1 << 20), 4 << 20),
            "1 MiB (1048576 bytes) delivered (confirmed by the receiver), 2 MiB (2097152 bytes) \
             sent but not confirmed, 1 MiB (1048576 bytes) read but not sent"
        );
        assert_eq!(
            counts(&reader(Delivery::Unconfirmed, 700, 0), 1000),
            "700 bytes sent (not confirmed: --insecure has no confirmations), 300 bytes read but \
             not sent"
        );
    }

    /// Issue 32, item 11: the statuses rank as the man page orders them, whatever order the
    /// outputs failed in: a panicked output (8) outweighs one whose spill failed (7), which
    /// outweighs a failed write (3).
    #[test]
    fn the_gravest_output_failure_decides_the_status_in_any_order() {
        use std::io;
        let failure = |kind: &str| match kind {
            "panic" => Outcome::Failed(Failure::Panic(io::Error::other("a bug"))),
            "spill" => Outcome::Failed(Failure::Spill {
                dir: "/spill".into(),
                error: io::Error::from_raw_os_error(libc::EIO),
            }),
            _ => Outcome::Failed(Failure::Io(io::Error::from_raw_os_error(libc::ENOSPC))),
        };
        let status = |first: &str, second: &str| {
            let outcomes = Outcomes {
                input: Outcome::Complete,
                outputs: vec![failure(first), failure(second)],
                digests: Vec::new(),
                hashes_failed: Vec::new(),
                stalled: None,
            };
            let names = ["a".to_owned(), "b".to_owned()];
            let snapshot = Snapshot { bytes_in: 10, ..Snapshot::default() };
            decide(&outcomes, &snapshot, "stdin", &names, OutputErrors::Warn, false, true).exit
        };
        for (first, second, gravest) in [
            ("panic", "spill", Exit::Bug),
            ("spill", "panic", Exit::Bug),
            ("spill", "write", Exit::SpillFailed),
            ("write", "spill", Exit::SpillFailed),
        ] {
            assert_eq!(status(first, second), gravest, "{first} then {second}");
        }
    }

    #[test]
    fn documented_statuses() {
        let codes: Vec<u8> = [
            Exit::Success,
            Exit::InputFailed,
            Exit::Usage,
            Exit::OutputFailed,
            Exit::Stalled,
            Exit::Setup,
            Exit::Network,
            Exit::SpillFailed,
            Exit::Bug,
            BROKEN_PIPE,
            Exit::Signal(SIGINT),
            Exit::Signal(SIGTERM),
            Exit::Signal(SIGHUP),
        ]
        .into_iter()
        .map(Exit::code)
        .collect();
        assert_eq!(codes, [0, 1, 2, 3, 4, 5, 6, 7, 8, 141, 130, 143, 129]);
    }
}
