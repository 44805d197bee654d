//! The data path: moves bytes from the input endpoint through the backlog to the output.
//!
//! Every engine runs two threads, one per side, so that a blocked write never stops reading and
//! an empty input never stops writing: the input thread blocks only on stdin or on a full
//! backlog, the output thread only on stdout or on an empty one. The engines differ in how the
//! bytes move:
//!
//! - [`copy`]: `read` into the backlog's memory, `write` out of it. Portable POSIX; works for
//!   every kind of descriptor.

pub mod copy;

use std::io;
use std::sync::Arc;

use crate::backlog::Backlog;
use crate::cli::EngineArg;
use crate::endpoint::Endpoint;
use crate::meter::Meter;

/// How a transfer ended.
#[derive(Debug)]
pub enum Ending {
    /// Input reached its end and everything was written.
    Complete,
    /// Reading failed; everything read before was written.
    InputFailed(io::Error),
    /// Writing failed (EPIPE included); `buffered` bytes read were not delivered.
    OutputFailed {
        /// What went wrong.
        error: io::Error,
        /// Bytes read but not written when output stopped.
        buffered: u64,
    },
}

/// Moves everything from `input` to `output` through a backlog of `size` bytes, publishing
/// progress to `meter`. Returns once input has ended and been written, or output has failed.
///
/// On an output failure the input thread may still be blocked in `read`; it stops at its next
/// step, or when the process exits.
pub fn run(
    input: Endpoint,
    output: Endpoint,
    engine: EngineArg,
    size: usize,
    meter: Arc<Meter>,
) -> io::Result<Ending> {
    let backlog = Arc::new(Backlog::new(size, meter));
    match engine {
        EngineArg::Auto | EngineArg::Copy => copy::run(input, output, backlog),
    }
}
