//! Other Unix systems: pipe sizes are managed by the kernel, and there is no THP advice.

use std::os::fd::BorrowedFd;

/// Pipes cannot be resized here; reports that nothing was done.
pub fn enlarge_pipe(_fd: BorrowedFd<'_>) -> Option<usize> {
    None
}

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
