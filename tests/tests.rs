//! Integration tests: the `accel` binary between real pipes, files and devices.
//!
//! Every behaviour test runs against every engine (`util::ENGINES`). Overlap and latency are
//! proven by orderings with generous timeouts, never by tight wall-clock bounds.

mod util;

mod edges;
mod memory;
mod ordering;
mod random;
mod signals;
mod soak;
mod tiers;
mod watch;
