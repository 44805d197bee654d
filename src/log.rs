//! Messages that are not errors: warnings a user should see once, and `--debug` notes.
//!
//! Errors that end a run are printed where the run's end is decided (`lib.rs`, `exit.rs`);
//! this is for what happens along the way: memory refused, a route changed. `-q` silences the
//! warnings; the notes appear only with `--debug`.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Where the data threads say things along the way.
#[derive(Debug, Default)]
pub struct Log {
    quiet: bool,
    debug: bool,
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
        Log { quiet, debug }
    }

    /// `accel: <what>` on stderr, unless `-q`.
    pub fn warn(&self, what: fmt::Arguments<'_>) {
        if !self.quiet {
            eprintln!("accel: {what}");
        }
    }

    /// `accel: <what>` on stderr with `--debug`.
    pub fn debug(&self, what: fmt::Arguments<'_>) {
        if self.debug {
            eprintln!("accel: {what}");
        }
    }
}
