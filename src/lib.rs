//! accel: a pipeline buffer.
//!
//! `producer | accel | consumer`: accel reads its input as fast as the producer writes and
//! writes each output as fast as its consumer reads, holding the difference in memory, so that
//! bursty stages overlap their work instead of taking turns.
//!
//! The rooms, from the top down (a room only uses those below it):
//! - [`cli`]: the command line, read into a [`Config`](cli::config::Config) (accel's own, and
//!   mbuffer's when accel is run as `mbuffer`);
//! - [`run`]: a run from start to exit status: opens everything, starts the engine, and turns
//!   how it ended into a status ([`run::exit`]); signals and the standard descriptors;
//! - [`watch`]: what the user sees while it runs and after: the progress line, the report,
//!   JSON, and the control socket (`-R`);
//! - [`engine`]: the threads that move the bytes, and the hashes computed on the way;
//! - [`endpoint`] (descriptors: pipes, files, sockets; opening them) and [`net`] (a peer on
//!   another host, an endpoint too); [`backlog`], the buffer between input and outputs;
//! - [`sys`] for what differs between platforms, and a few small pieces everything uses:
//!   [`meter`] (counters), [`log`], [`size`], [`stop`] (and waiting in a blocking call until the run ends),
//!   [`words`].

#![deny(missing_docs)]

mod buffer;

pub use buffer::{
    Bottleneck, Buffer, DEFAULT_SIZE, Error, Incomplete, Input, OnOutputError, Outcome, Output,
    OutputReport, Progress, ReadAhead, Report, Transfer, WriteBehind,
};

// The binary's and the tests' way in: not the library's API, which is above.
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod log;
#[doc(hidden)]
pub mod net;
#[doc(hidden)]
pub mod run;
#[doc(hidden)]
pub mod stop;

pub(crate) mod backlog;
pub(crate) mod endpoint;
pub(crate) mod engine;
pub(crate) mod meter;
pub(crate) mod size;
pub(crate) mod watch;
pub(crate) mod words;

mod sys;
