//! Integration tests: the `accel` binary between real pipes, files and devices.
//!
//! Every behaviour test runs against every engine, as one test per engine (`per_engine!`).
//! Overlap and latency are proven by orderings with generous timeouts, never by tight
//! wall-clock bounds. Random tests print the seed that replays them when they fail. A test
//! that needs what the machine lacks fails unless `ACCEL_TESTS_MAY_SKIP=1` (`util::require`).
//! Helpers shared by modules live in `util/`, and a module imports them from there only,
//! never from another module of tests.

// The library is the package's (accel-buffer); the tests call it accel.
extern crate accel_buffer as accel;

#[macro_use]
mod util;

mod compress;
mod control;
mod docs;
mod edges;
mod faults;
mod flow;
mod library;
mod mbuffer;
mod memory;
mod messages;
mod net;
mod ordering;
mod outputs;
mod pv;
mod random;
mod resume;
mod signals;
mod soak;
mod spill;
mod ssh;
mod streams;
mod tiers;
mod watch;
