//! Accel's own pipes, which hold part of the backlog without copying it (Linux).
//!
//! Bytes spliced from stdin into a pool pipe are page references, not copies, and are spliced on
//! to stdout the same way: about 0.05 CPU seconds per GiB against 0.2-0.3 for the memory path.
//! But pipe pages are unswappable, counted against a per-user quota (64 MiB by default) shared
//! with every pipe the user owns, and a pipe's capacity counts pages, not bytes. So the pool is
//! small (16 MiB), made on demand, and given back once the backlog has drained.

use std::io;
use std::os::fd::OwnedFd;

use rustix::io::Errno;
use rustix::pipe::PipeFlags;

use crate::sys::pipe_target_size;

/// One pipe of the pool: accel writes to `write` and reads from `read`, both blocking.
#[derive(Debug)]
pub struct PoolPipe {
    /// The end bytes are spliced out of.
    pub read: OwnedFd,
    /// The end bytes are spliced into.
    pub write: OwnedFd,
    /// Capacity in bytes, if every page were full.
    pub size: usize,
}

/// Why a pool pipe could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The user's pipe quota is spent: new pipes get 2 pages and cannot grow.
    #[error("the per-user pipe quota is exhausted")]
    Quota,
    /// No descriptors or memory for another pipe.
    #[error("cannot create a pipe: {0}")]
    Create(#[from] io::Error),
}

impl PoolPipe {
    /// Creates a pipe of 1 MiB, or what `pipe-max-size` allows.
    pub fn new() -> Result<PoolPipe, PoolError> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC).map_err(io::Error::from)?;
        let size = match rustix::pipe::fcntl_setpipe_size(&write, pipe_target_size()) {
            Ok(size) => size,
            // Over the soft quota the kernel refuses to grow any pipe of this user.
            Err(Errno::PERM) => return Err(PoolError::Quota),
            Err(e) => return Err(PoolError::Create(e.into())),
        };
        Ok(PoolPipe { read, write, size })
    }
}
