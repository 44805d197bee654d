//! accel: a pipeline buffer.
//!
//! `producer | accel | consumer`: accel reads its input as fast as the producer writes and
//! writes each output as fast as its consumer reads, holding the difference in memory, so that
//! bursty stages overlap their work instead of taking turns.
//!
//! The rooms, from the top down (a room only uses those below it):
//! - [`cli`]: the command line, read into a [`Config`](run::config::Config) (accel's own, and
//!   mbuffer's when accel is run as `mbuffer`);
//! - [`run`]: a run from start to exit status: opens everything, starts the engine, and has
//!   how it ended turned into a status; signals and the standard descriptors;
//! - [`watch`]: what the user sees while it runs and after: the progress line, the report,
//!   JSON, and the control socket (`-R`);
//! - [`exit`]: the exit policy, in one place: the statuses, and what is said of how the run
//!   ended;
//! - [`engine`]: the threads that move the bytes, and the hashes computed on the way;
//! - [`endpoint`] (descriptors: pipes, files, sockets; opening them) and [`net`] (a peer on
//!   another host, an endpoint too); [`backlog`], the buffer between input and outputs;
//! - [`sys`] for what differs between platforms, and a few small pieces everything uses:
//!   [`meter`] (counters), [`log`], [`size`], [`stop`] (and waiting in a blocking call until
//!   the run ends), [`words`].

#![deny(missing_docs)]

pub mod backlog;
pub mod cli;
pub mod endpoint;
pub mod engine;
pub mod exit;
pub mod log;
pub mod meter;
pub mod net;
pub mod run;
pub mod size;
pub mod stop;
pub mod watch;
pub mod words;

mod sys;
