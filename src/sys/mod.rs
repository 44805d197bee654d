//! The platform facade: the few things accel does differently on Linux.
//!
//! Everything else in accel is portable POSIX (threads, `read`, `write`, `poll`, `mmap`). What is
//! Linux-only lives in `linux.rs`; `portable.rs` provides the same surface elsewhere, where
//! each call is a no-op or a refusal that says so, and where a [`PoolPipe`] cannot be made (its
//! type has no values), so the data path compiles the same everywhere without a `cfg`. Both
//! always compile on Linux, so the portable answers are tested too (`--engine copy` takes the
//! portable data path).
//!
//! The surface:
//! - [`CAN_SPLICE`], [`splice`], [`PoolPipe`]: zero-copy moves and accel's own pipes;
//!   [`write_nowait`]: a write that never waits, on a descriptor whose flags are not ours.
//! - [`enlarge_pipe`], [`pipe_target_size`]: grow a pipe we sit on (best effort), so that each
//!   wakeup moves more; [`pipe_size`]: how much a pipe holds (Linux), which sizes how long
//!   accel lets bytes gather in it.
//! - [`advise_huge_pages`]: ask for transparent huge pages on a buffer chunk, which makes the
//!   first touch of a fresh chunk several times cheaper.
//! - [`is_packet_mode`]: whether a pipe delivers packets (Linux `O_DIRECT` pipes).
//! - [`memory_limit`]: how much the buffer may take under the machine's memory, rlimits and
//!   (Linux) the memory cgroup.
//! - [`peer`]: who is at the other end of the control socket.
//! - [`spill_file`], [`reserve_space`], [`punch_hole`], [`start_writeback`],
//!   [`drop_written`], [`writeback_error`], [`splice_to_file`], [`splice_from_file`]: the
//!   spill file (`O_TMPFILE`, `fallocate`, `sync_file_range`, `posix_fadvise`).
//! - [`retire`]: close a finished output early, keeping its descriptor's number taken.
//! - [`limit_unacknowledged`]: give up a TCP connection whose sent data stays unacknowledged
//!   (Linux's `TCP_USER_TIMEOUT`), so that a peer that vanished mid-transfer is noticed.
//! - [`widen_send_buffer`]: a sending socket's buffer as large as may be set, where that
//!   is more than autotuning reaches (Linux), for paths with a large bandwidth-delay product.
//! - [`accept_only_with_data`]: a listening socket's connections are accepted only once
//!   they have sent something (Linux's `TCP_DEFER_ACCEPT`), so silent ones never crowd out
//!   the network receiver's sender.
//! - [`thread_sleeps`]: how often the calling thread has slept in the kernel (Linux), which
//!   `--debug` shows per MiB moved.
//! - [`has_aes_instructions`]: whether the CPU has AES instructions (which cipher is faster).

#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
use linux as imp;

// Compiled everywhere, so that a change to the surface breaks the build on Linux too.
#[cfg_attr(target_os = "linux", allow(dead_code))]
mod portable;
#[cfg(not(target_os = "linux"))]
use portable as imp;

mod memory;

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

pub use imp::{
    CAN_SPLICE, PoolPipe, accept_only_with_data, advise_huge_pages, drop_written, enlarge_pipe,
    is_packet_mode, limit_unacknowledged, peer, pipe_size, pipe_target_size, punch_hole,
    reserve_space, spill_file, splice, splice_from_file, splice_to_file, start_writeback,
    thread_sleeps, widen_send_buffer, write_nowait, writeback_error,
};
pub use memory::{MemoryLimit, fit_allocator_to_limits, memory_limit, physical_memory};

/// The size we try to give the pipes accel reads from and writes to.
///
/// 1 MiB is the default `pipe-max-size`, the largest an unprivileged process may ask for, and
/// measured to cut the per-GiB cost of a pipe roughly in half against the default 64 KiB; larger
/// pipes bring little more and are unswappable memory charged to the user who made them.
pub const PIPE_TARGET_SIZE: usize = 1 << 20;

/// Who is at the other end of a Unix socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Its user.
    pub uid: u32,
    /// Its process, where the system says (Linux).
    pub pid: Option<u32>,
}

/// Why a pool pipe could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The user's pipe quota is spent: new pipes get 2 pages and cannot grow. (Only Linux
    /// has pipe quotas.)
    #[error("the per-user pipe quota is exhausted")]
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Quota,
    /// No descriptors or memory for another pipe.
    #[error("cannot create a pipe: {0}")]
    Create(#[from] io::Error),
    /// This system has no splice, and so no use for pool pipes.
    #[error("no splice on this system")]
    Unsupported,
}

/// Closes what `fd` refers to (the reader at its far end sees end of file now) while keeping
/// its number taken by `/dev/null`, so that nothing opened later lands on it: a finished
/// output's descriptor may be stdout, and copies of it may still be held.
pub fn retire(fd: BorrowedFd<'_>) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let null = rustix::fs::open("/dev/null", OFlags::WRONLY | OFlags::CLOEXEC, Mode::empty())?;
    // SAFETY: both descriptors are open for the whole call; dup2 replaces what `fd` refers to
    // in one step, so no other thread can see its number free.
    if unsafe { libc::dup2(null.as_raw_fd(), fd.as_raw_fd()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the CPU has AES instructions (and carry-less multiplication, for GHASH), which make
/// AES-GCM faster than ChaCha20-Poly1305; without them it is the other way round.
pub fn has_aes_instructions() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}
