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
