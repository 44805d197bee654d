//! accel: a pipeline buffer, as a program (`producer | accel | consumer`) and as a library.
//!
//! accel reads its input as fast as the producer writes and writes each output as fast as its
//! consumer reads, holding the difference in memory (and, past that, on disk), so that bursty
//! stages overlap their work instead of taking turns. A program that copies from a bursty
//! source into a slow sink with `std::io::copy` takes turns exactly like a 64 KiB pipe; this
//! library is the same buffer inside the program.
//!
//! - [`Buffer`]: a configured buffer (size, spill directory, rate limits, block sizes, stall
//!   timeout) that runs between one [`Input`] and one or more [`Output`]s: a program's
//!   `Read`/`Write`, or descriptors (files, pipes, child processes' stdio), which get the
//!   zero-copy tiers (splice) where those are safe. It returns a [`Report`] (bytes in, what
//!   each output got, what was lost and why, which side was the bottleneck), or an [`Error`]
//!   that carries one; it never exits and prints nothing unless asked.
//! - [`WriteBehind`]: a `Write` whose writes return once the bytes are buffered, while a
//!   thread writes them to the inner writer; [`ReadAhead`]: a `Read` that a thread keeps
//!   reading ahead of.
//! - [`Progress`]: the counters a caller's own display is drawn from, on demand
//!   ([`Transfer::progress`]) or at an interval ([`Buffer::progress_every`]).
//!
//! ```
//! use std::io::Write;
//! use accel_buffer::{Buffer, Input, Output, WriteBehind};
//!
//! // Between a reader and two writers.
//! let report = Buffer::new()
//!     .size(8 << 20)
//!     .run(Input::reader(&b"every byte, in order"[..]), vec![
//!         Output::writer(Vec::new()),
//!         Output::writer(std::io::sink()),
//!     ])?;
//! assert_eq!(report.outputs[1].delivered, 20);
//!
//! // In front of a slow writer.
//! let mut out = WriteBehind::new(Vec::new())?;
//! out.write_all(b"returns at once")?;
//! let (written, delivered) = out.finish()?;
//! assert_eq!((written.len(), delivered), (15, 15));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Without its default features, the package builds this library alone: the buffer, its
//! adapters and the engine under them, with none of the program's weight (its command line,
//! the network and its crypto, the BLAKE3 hash) and nothing compiled from C:
//!
//! ```toml
//! accel-buffer = { version = "0.1", default-features = false }
//! ```
//!
//! The features, all on by default: `cli` (the `accel` program, which needs the other two),
//! `net` (`--to`/`--from`), `blake3` (`--hash blake3`).
//!
//! The same engine runs the `accel` program, whose command line plans its runs through the
//! library. Inside, from the top down (a room only uses those below it; DEVELOPERS.md lists
//! them, and `tools/imports.py --check` holds the code to that list): `cli` (the command
//! line, accel's and mbuffer's and pv's), `run` (a run of the program: opens everything,
//! signals, the exit status), the library's face (`buffer`), `watch` (progress line, report,
//! JSON, control socket), `exit` (the exit policy: statuses, and what is said of how a run
//! ended), `engine` (the threads that move the bytes, hashes, rate limits), `endpoint` and
//! `net` (descriptors, a program's streams, a network peer), `backlog` (the buffer itself),
//! small pieces everything uses (`meter`, `stop`, `log`, `words`), `sys` (the platform), and
//! `size` at the floor. Only the library's API is public; `cli`, `run`, `exit`, `net`, `stop`
//! and `log` are reachable, hidden, for the program and its tests (the first four with the
//! features that hold them), and are not part of the API.

#![deny(missing_docs)]
// The rooms under the library serve the program too, and some of what they have only the
// program calls (stdin and stdout as endpoints, FILE operands, the cgroup's memory...):
// without it (the `cli` feature off), that is unused. Built with it, nothing may be (CI's
// clippy, -D warnings), so dead code is still found, and no #[cfg] runs through functions.
#![cfg_attr(not(feature = "cli"), allow(dead_code, unused_imports))]

mod buffer;

pub use buffer::{
    Bottleneck, Buffer, DEFAULT_SIZE, Error, Incomplete, Input, OnOutputError, Outcome, Output,
    OutputReport, Progress, ReadAhead, Report, Transfer, WriteBehind,
};

// The binary's and the tests' way in: not the library's API, which is above. Their docs are
// for the crate's developers, and may link to what is private. The program's rooms are behind
// the `cli` feature and the network behind `net` (both default; Cargo.toml), so that the
// library alone builds without them.
#[cfg(feature = "cli")]
#[doc(hidden)]
#[allow(rustdoc::private_intra_doc_links)]
pub mod cli;
#[cfg(feature = "cli")]
#[doc(hidden)]
#[allow(rustdoc::private_intra_doc_links)]
pub mod exit;
#[doc(hidden)]
pub mod log;
#[cfg(feature = "net")]
#[doc(hidden)]
#[allow(rustdoc::private_intra_doc_links)]
pub mod net;
// Without the network, its place: a Link that cannot exist, for the endpoint's peer code.
#[cfg(not(feature = "net"))]
#[path = "net/absent.rs"]
mod net;
#[cfg(feature = "cli")]
#[doc(hidden)]
#[allow(rustdoc::private_intra_doc_links)]
pub mod run;
#[cfg(feature = "cli")]
#[doc(hidden)]
#[allow(rustdoc::private_intra_doc_links)]
pub mod ssh;
#[doc(hidden)]
pub mod stop;

pub(crate) mod backlog;
pub(crate) mod endpoint;
pub(crate) mod engine;
pub(crate) mod meter;
pub(crate) mod size;
#[cfg(feature = "cli")]
pub(crate) mod watch;
pub(crate) mod words;

mod sys;

// The guide's Rust examples are compiled as doc tests, so that they stay true to the API.
#[cfg(doctest)]
#[doc = include_str!("../GUIDE.md")]
mod guide {}
