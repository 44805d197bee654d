//! Linux: pipe sizes and huge pages.

use std::os::fd::BorrowedFd;

use rustix::io::Errno;

use std::sync::OnceLock;

use super::PIPE_TARGET_SIZE;

/// Grows the pipe behind `fd` towards [`pipe_target_size`].
///
/// Best effort: over the per-user pipe quota the kernel says EPERM, and shrinking below the
/// current contents says EBUSY; both only mean "keep the size it has". Never shrinks a pipe that
/// is already larger. Returns the size the pipe has afterwards, or `None` when `fd` is not a pipe.
pub fn enlarge_pipe(fd: BorrowedFd<'_>) -> Option<usize> {
    let current = rustix::pipe::fcntl_getpipe_size(fd).ok()?;
    let mut wanted = pipe_target_size();
    while wanted > current {
        match rustix::pipe::fcntl_setpipe_size(fd, wanted) {
            Ok(size) => return Some(size),
            // Over the quota or above pipe-max-size: a smaller step may still fit.
            Err(Errno::PERM) => wanted /= 2,
            Err(_) => break,
        }
    }
    Some(current)
}

/// `min(PIPE_TARGET_SIZE, pipe-max-size)`: the largest pipe an unprivileged process may have,
/// up to the size we want.
pub fn pipe_target_size() -> usize {
    static SIZE: OnceLock<usize> = OnceLock::new();
    *SIZE.get_or_init(|| {
        let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(PIPE_TARGET_SIZE);
        PIPE_TARGET_SIZE.min(max)
    })
}

/// Asks for transparent huge pages on `len` bytes at `addr` (best effort).
///
/// # Safety
/// `addr..addr+len` must be a mapping owned by the caller.
pub unsafe fn advise_huge_pages(addr: *mut std::ffi::c_void, len: usize) {
    // THP in "madvise" mode (the common default) gives huge pages only where asked. A failure
    // (THP compiled out, "never") leaves ordinary pages, which work the same, only dearer.
    let _ = unsafe { rustix::mm::madvise(addr, len, rustix::mm::Advice::LinuxHugepage) };
}
