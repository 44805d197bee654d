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

/// Never: there is no portable way to write without waiting on a descriptor whose flags are
/// not ours.
pub fn write_nowait(_to: BorrowedFd<'_>, _buf: &[u8]) -> Option<std::io::Result<usize>> {
    None
}

/// Never: `/dev/fd/N` duplicates the descriptor here rather than opening the pipe anew, so
/// there is no description of one's own to make non-blocking.
pub fn private_writer(_fd: BorrowedFd<'_>) -> Option<std::os::fd::OwnedFd> {
    None
}

/// Never, as [`private_writer`].
pub fn private_reader(_fd: BorrowedFd<'_>) -> Option<std::os::fd::OwnedFd> {
    None
}

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

/// Not known here: a pipe's size is the kernel's business.
pub fn pipe_size(_fd: BorrowedFd<'_>) -> Option<usize> {
    None
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

/// Connections are accepted as they come here (the receiver's policy alone keeps a flood of
/// silent ones from crowding out the sender).
pub fn accept_only_with_data(_fd: BorrowedFd<'_>, _patience: std::time::Duration) {}

/// No `TCP_NOTSENT_LOWAT` here: the send buffer takes what it has room for.
pub fn hold_unsent(_fd: BorrowedFd<'_>, _bytes: usize) -> bool {
    false
}

/// Not said here.
pub fn unacknowledged(_fd: BorrowedFd<'_>) -> Option<usize> {
    None
}

/// Not said here.
pub fn unsent(_fd: BorrowedFd<'_>) -> Option<usize> {
    None
}

/// Left to the system here.
pub fn open_receive_window(_fd: BorrowedFd<'_>, _bytes: usize) -> bool {
    false
}

/// Nothing was held here (see [`hold_unsent`]).
pub fn release_unsent(_fd: BorrowedFd<'_>) -> bool {
    false
}

/// Send buffers are left to the system's autotuning here.
pub fn widen_send_buffer(_fd: BorrowedFd<'_>) {}

/// A program cannot choose its TCP congestion control here: the system's is kept.
pub fn set_congestion_control(_fd: BorrowedFd<'_>, _name: &str) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Not said here.
pub fn congestion_control(_fd: BorrowedFd<'_>) -> Option<String> {
    None
}

/// Not said here.
pub fn congestion_controls() -> Option<super::CongestionControls> {
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

/// Not known here (no per-thread usage everywhere).
pub fn thread_sleeps() -> Option<u64> {
    None
}

/// Who is at the other end of a Unix socket: its user (`getpeereid`, BSD and macOS); not its
/// process, which `getpeereid` does not say.
pub fn peer(socket: &impl std::os::fd::AsFd) -> std::io::Result<super::Peer> {
    // Compiled on Linux too (see sys/mod.rs), which has no getpeereid; never called there.
    #[cfg(not(target_os = "linux"))]
    {
        use std::os::fd::AsRawFd;
        let (mut uid, mut gid) = (0, 0);
        // SAFETY: getpeereid writes two ids for a valid descriptor.
        if unsafe { libc::getpeereid(socket.as_fd().as_raw_fd(), &mut uid, &mut gid) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(super::Peer { uid, pid: None })
    }
    #[cfg(target_os = "linux")]
    {
        let _ = socket;
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

/// Always fails: there is no splice(2) here.
pub fn splice_from_file(
    _from: BorrowedFd<'_>,
    _from_at: &mut u64,
    _to: BorrowedFd<'_>,
    _len: usize,
) -> Result<usize, Errno> {
    Err(Errno::NOSYS)
}

/// Always fails: there is no splice(2) here.
pub fn splice_to_file(
    _from: BorrowedFd<'_>,
    _to: BorrowedFd<'_>,
    _to_at: &mut u64,
    _len: usize,
) -> Result<usize, Errno> {
    Err(Errno::NOSYS)
}

/// A file in `dir` that no name leads to: made under a fresh name and unlinked at once
/// (without `O_TMPFILE`, a crash between the two leaves it behind).
pub fn spill_file(dir: &std::path::Path) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::unix::fs::OpenOptionsExt;
    for attempt in 0..100u32 {
        let path = dir.join(format!(".accel-spill-{}-{attempt}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path);
        match file {
            Ok(file) => {
                std::fs::remove_file(&path)?;
                return Ok(file.into());
            }
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(std::io::ErrorKind::AlreadyExists.into())
}

/// Not known to be possible here: spilling needs it to be safe when the disk fills.
pub fn reserve_space(_fd: BorrowedFd<'_>, _offset: u64, _len: u64) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Not known to be possible here: spilling needs it to give the disk back.
pub fn punch_hole(_fd: BorrowedFd<'_>, _offset: u64, _len: u64) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

/// Nothing here; the kernel writes back in its own time.
pub fn start_writeback(_fd: BorrowedFd<'_>, _offset: u64, _len: u64) -> std::io::Result<()> {
    Ok(())
}

/// Nothing here; the page cache keeps what it keeps.
pub fn drop_written(_fd: BorrowedFd<'_>, _offset: u64, _len: u64) -> std::io::Result<()> {
    Ok(())
}

/// Not known here (no spilling: see [`punch_hole`]).
pub fn writeback_error(_fd: BorrowedFd<'_>) -> std::io::Result<()> {
    Ok(())
}

/// Nothing to do here: see the Linux version.
pub fn one_allocator_arena() {}
