//! Messages that are not errors: warnings a user should see once, and `--debug` notes.
//!
//! Errors that end a run are printed where the run's end is decided (`run/mod.rs`, `exit.rs`);
//! this is for what happens along the way: memory refused, a route changed. `-q` silences the
//! warnings; the notes appear only with `--debug`.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::{SystemTime, UNIX_EPOCH};

/// Whether this process's `--debug` notes carry the time of day (see [`stamp_notes`]).
static STAMPED: AtomicBool = AtomicBool::new(false);

/// From now on, this process's `--debug` notes start with the time of day to the millisecond
/// (`[11:02:03.456] `, UTC): a run started through ssh has two processes on two hosts, and
/// where its start-up time goes is read by setting the notes of both ends side by side.
pub fn stamp_notes() {
    STAMPED.store(true, Relaxed);
}

/// `[11:02:03.456] `: the time of day (UTC), for a stamped note.
fn time_of_day() -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = now.as_secs() % 86_400;
    let (hours, minutes, seconds) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    format!("[{hours:02}:{minutes:02}:{seconds:02}.{:03}] ", now.subsec_millis())
}

/// Writes a message's lines where they do not garble a progress line (the watcher's `say`).
pub type Printer = Box<dyn Fn(&str) + Send + Sync>;

/// Where the data threads say things along the way.
#[derive(Default)]
pub struct Log {
    quiet: bool,
    debug: bool,
    /// Once the progress line may be on stderr, what prints the messages instead of
    /// `eprintln!`.
    printer: OnceLock<Printer>,
}

impl fmt::Debug for Log {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Log").field("quiet", &self.quiet).field("debug", &self.debug).finish()
    }
}

/// A warning that is said at most once per run, however often its cause recurs.
#[derive(Debug, Default)]
pub struct Once(AtomicBool);

impl Once {
    /// Whether this is the first time; every later call says `false`.
    pub fn first(&self) -> bool {
        !self.0.swap(true, Relaxed)
    }
}

impl Log {
    /// Warnings unless `quiet`; notes only with `debug`.
    pub fn new(quiet: bool, debug: bool) -> Log {
        Log { quiet, debug, printer: OnceLock::new() }
    }

    /// From now on, messages go through `printer` (once; later calls change nothing).
    pub fn print_through(&self, printer: Printer) {
        let _ = self.printer.set(printer);
    }

    /// `accel: <what>` on stderr, unless `-q`.
    pub fn warn(&self, what: fmt::Arguments<'_>) {
        if !self.quiet {
            self.print(what);
        }
    }

    /// `accel: <what>` on stderr with `--debug`.
    pub fn debug(&self, what: fmt::Arguments<'_>) {
        if self.debug {
            match STAMPED.load(Relaxed) {
                true => self.print(format_args!("{}{what}", time_of_day())),
                false => self.print(what),
            }
        }
    }

    /// Whether `--debug` notes are said.
    pub fn debugging(&self) -> bool {
        self.debug
    }

    /// `line` as it is (no `accel: `), even under `-q`: another program's own words that
    /// accel passes on, as the remote command's stderr through ssh.
    pub fn pass_on(&self, line: &str) {
        match self.printer.get() {
            Some(printer) => printer(&format!("{line}\n")),
            None => eprintln!("{line}"),
        }
    }

    fn print(&self, what: fmt::Arguments<'_>) {
        self.pass_on(&format!("accel: {what}"));
    }
}
