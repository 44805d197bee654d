//! Messages that are not errors: warnings a user should see once, and `--debug` notes.
//!
//! Errors that end a run are printed where the run's end is decided (`run/mod.rs`, `exit.rs`);
//! this is for what happens along the way: memory refused, a route changed. `-q` silences the
//! warnings; the notes appear only with `--debug`.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

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
            self.print(what);
        }
    }

    fn print(&self, what: fmt::Arguments<'_>) {
        match self.printer.get() {
            Some(printer) => printer(&format!("accel: {what}\n")),
            None => eprintln!("accel: {what}"),
        }
    }
}
