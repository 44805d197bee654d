//! Other Unix systems: no splice, pipe sizes managed by the kernel, no THP advice.
//!
//! The types exist so that the data path reads the same everywhere, but a [`PoolPipe`] cannot
//! be made: the splice engine is never chosen here, and code matching on a pool pipe compiles
//! without ever running.

use std::os::fd::BorrowedFd;

use rustix::io::Errno;

use super::PoolError;

/// No splice(2) here.
pub const CAN_SPLICE: bool = false;

/// Always fails: there is no splice(2) here.
pub fn splice(
    _from: BorrowedFd<'_>,
    _to: BorrowedFd<'_>,
    _len: usize,
    _nonblock: bool,
) -> Result<usize, Errno> {
    Err(Errno::NOSYS)
}

/// A pool pipe, which cannot exist here (the type has no values).
#[derive(Debug)]
pub enum PoolPipe {}

impl PoolPipe {
    /// Always fails: without splice a pool pipe has no use.
    pub fn new() -> Result<PoolPipe, PoolError> {
        Err(PoolError::Unsupported)
    }

    /// Never called: no pool pipe exists.
    pub fn read_end(&self) -> BorrowedFd<'_> {
        match *self {}
    }

    /// Never called: no pool pipe exists.
    pub fn write_end(&self) -> BorrowedFd<'_> {
        match *self {}
    }

    /// Never called: no pool pipe exists.
    pub fn size(&self) -> usize {
        match *self {}
    }
}

/// The size we would ask for; pipes cannot be resized here.
pub fn pipe_target_size() -> usize {
    super::PIPE_TARGET_SIZE
}

/// Pipes cannot be resized here; reports that nothing was done.
pub fn enlarge_pipe(_fd: BorrowedFd<'_>) -> Option<usize> {
    None
}

/// No `TCP_USER_TIMEOUT` here: keepalive alone notices a vanished peer.
pub fn limit_unacknowledged(_fd: BorrowedFd<'_>, _limit: std::time::Duration) {}

/// Send buffers are left to the system's autotuning here.
pub fn widen_send_buffer(_fd: BorrowedFd<'_>) {}

/// No huge-page advice here; ordinary pages work the same.
///
/// # Safety
/// Nothing is done; the signature matches the Linux one.
pub unsafe fn advise_huge_pages(_addr: *mut std::ffi::c_void, _len: usize) {}

/// Packet-mode pipes are Linux's; elsewhere a pipe is a byte stream.
pub fn is_packet_mode(_flags: rustix::fs::OFlags) -> bool {
    false
}

/// No memory cgroups here.
pub fn cgroup_memory_limit() -> Option<super::MemoryLimit> {
    None
}

/// Not known here; the headroom stands in for it.
pub fn address_space_used() -> Option<u64> {
    None
}

/// Not known here; the headroom stands in for it.
pub fn data_used() -> Option<u64> {
    None
}
