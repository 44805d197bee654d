//! Linux: splice and accel's own pipes, pipe sizes, huge pages, packet-mode pipes, cgroups.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::OnceLock;

use rustix::io::Errno;
use rustix::pipe::{PipeFlags, SpliceFlags};

use super::{PIPE_TARGET_SIZE, PoolError};

/// splice(2) exists here.
pub const CAN_SPLICE: bool = true;

/// Writes what of `buf` goes into `to` without waiting (`pwritev2(RWF_NOWAIT)`, which pipes
/// take since Linux 5.8 or so, leaving the descriptor's flags alone): `Ok(0)` when nothing
/// fits, `None` when the kernel cannot write this way without waiting.
pub fn write_nowait(to: BorrowedFd<'_>, buf: &[u8]) -> Option<io::Result<usize>> {
    let bufs = [std::io::IoSlice::new(buf)];
    match rustix::io::pwritev2(to, &bufs, u64::MAX, rustix::io::ReadWriteFlags::NOWAIT) {
        Ok(n) => Some(Ok(n)),
        Err(Errno::AGAIN) => Some(Ok(0)),
        Err(Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL | Errno::SPIPE) => None,
        Err(error) => Some(Err(error.into())),
    }
}

/// A description of the pipe or FIFO `fd` all this process's own, opened anew through
/// `/proc/self/fd` with `O_NONBLOCK`: a plain `write` to it never waits, and the flag stays off
/// the description `fd` shares with other processes. `None` where there is no `/proc`, `fd`
/// is not a pipe or FIFO, or it is a FIFO with no reader left. While it is open the pipe has
/// one more writer: its reader sees the end only once this is closed too.
pub fn private_writer(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    private_pipe_end(fd, rustix::fs::OFlags::WRONLY)
}

/// The same for reading: a description of the pipe or FIFO `fd` of this process's own,
/// `O_NONBLOCK`, on which a `read` never waits (one more reader of the pipe while it is open).
pub fn private_reader(fd: BorrowedFd<'_>) -> Option<OwnedFd> {
    private_pipe_end(fd, rustix::fs::OFlags::RDONLY)
}

/// [`private_writer`] or [`private_reader`], as `access` says.
fn private_pipe_end(fd: BorrowedFd<'_>, access: rustix::fs::OFlags) -> Option<OwnedFd> {
    use rustix::fs::{FileType, Mode, OFlags};
    let shared = rustix::fs::fstat(fd).ok()?;
    if FileType::from_raw_mode(shared.st_mode) != FileType::Fifo {
        return None;
    }
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let flags = access | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let own = rustix::fs::open(path, flags, Mode::empty()).ok()?;
    let reopened = rustix::fs::fstat(&own).ok()?;
    (reopened.st_dev == shared.st_dev && reopened.st_ino == shared.st_ino).then_some(own)
}

/// Moves up to `len` bytes from `from` to `to` without copying; one side must be a pipe.
/// `nonblock` makes the pipe side(s) not wait (`SPLICE_F_NONBLOCK`).
pub fn splice(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    len: usize,
    nonblock: bool,
) -> Result<usize, Errno> {
    let flags = if nonblock { SpliceFlags::NONBLOCK } else { SpliceFlags::empty() };
    rustix::pipe::splice(from, None, to, None, len, flags)
}

/// One of accel's own pipes, which hold part of the backlog without copying it.
///
/// Bytes spliced from stdin into a pool pipe are page references, not copies, and are spliced
/// on to stdout the same way: about 0.05 CPU seconds per GiB against 0.2-0.3 for the memory
/// path. But pipe pages are unswappable, counted against a per-user quota (64 MiB by default)
/// shared with every pipe the user owns, and a pipe's capacity counts pages, not bytes.
#[derive(Debug)]
pub struct PoolPipe {
    read: OwnedFd,
    write: OwnedFd,
    size: usize,
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

    /// The end bytes are spliced out of.
    pub fn read_end(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// The end bytes are spliced into.
    pub fn write_end(&self) -> BorrowedFd<'_> {
        self.write.as_fd()
    }

    /// Capacity in bytes, if every page were full.
    pub fn size(&self) -> usize {
        self.size
    }
}

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

/// How many bytes the pipe `fd` holds when full of whole pages (`F_GETPIPE_SZ`); `None` for
/// anything but a pipe.
pub fn pipe_size(fd: BorrowedFd<'_>) -> Option<usize> {
    rustix::pipe::fcntl_getpipe_size(fd).ok()
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

/// Gives up the TCP connection `fd` when data it sent stays unacknowledged for `limit`
/// (`TCP_USER_TIMEOUT`); best effort. Keepalive does not probe while data is in flight, so
/// without this a sender to a vanished host would retransmit for a quarter of an hour.
pub fn limit_unacknowledged(fd: BorrowedFd<'_>, limit: std::time::Duration) {
    let millis = u32::try_from(limit.as_millis()).unwrap_or(u32::MAX);
    let _ = rustix::net::sockopt::set_tcp_user_timeout(fd, millis);
}

/// Holds connections to the listening socket `fd` in the kernel until their first data
/// arrives, for `patience` at most (`TCP_DEFER_ACCEPT`); best effort. A connection that says
/// nothing is then never accepted, so a flood of them cannot crowd out a sender whose first
/// message is already there when it is.
pub fn accept_only_with_data(fd: BorrowedFd<'_>, patience: std::time::Duration) {
    let seconds = libc::c_int::try_from(patience.as_secs()).unwrap_or(libc::c_int::MAX);
    set_tcp_int(fd, libc::TCP_DEFER_ACCEPT, seconds);
}

/// Sets the TCP option `option`, an int, on the socket `fd`; whether the kernel took it.
fn set_tcp_int(fd: BorrowedFd<'_>, option: libc::c_int, value: libc::c_int) -> bool {
    set_int_option(fd, libc::IPPROTO_TCP, option, value)
}

/// Sets the option `option` of `level`, an int, on the socket `fd`; whether the kernel took it.
fn set_int_option(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    option: libc::c_int,
    value: libc::c_int,
) -> bool {
    // SAFETY: setsockopt on a valid descriptor with an int option of the right size.
    let done = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            option,
            (&raw const value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    done == 0
}

/// Lets the TCP socket `fd` hold at most `bytes` not yet sent (`TCP_NOTSENT_LOWAT`); best
/// effort. Its writes then take bytes as the link carries them (the bytes in flight, which
/// congestion control bounds, and `bytes` more) rather than as fast as its send buffer
/// (autotuned to megabytes, seconds of a slow link) has room: a write that waits says the
/// link is full, which `--compress auto` needs to know while the stream goes. Whether the
/// kernel took it.
pub fn hold_unsent(fd: BorrowedFd<'_>, bytes: usize) -> bool {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_tcp_int(fd, libc::TCP_NOTSENT_LOWAT, bytes)
}

/// The bytes the TCP socket `fd` holds that the far end has not acknowledged: those not yet
/// sent and those in flight (Linux's `SIOCOUTQ`, which has `TIOCOUTQ`'s number); `None` if the
/// kernel does not say. Beside what was written, it says what the link took.
pub fn unacknowledged(fd: BorrowedFd<'_>) -> Option<usize> {
    let mut bytes: libc::c_int = 0;
    // SAFETY: SIOCOUTQ writes one int at the pointer given; `fd` is a valid descriptor.
    let done = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCOUTQ, &raw mut bytes) };
    if done == 0 { usize::try_from(bytes).ok() } else { None }
}

/// The bytes the TCP socket `fd` holds that it has not sent yet (Linux's `SIOCOUTQNSD`);
/// `None` if the kernel does not say.
pub fn unsent(fd: BorrowedFd<'_>) -> Option<usize> {
    let mut bytes: libc::c_int = 0;
    // SAFETY: SIOCOUTQNSD writes one int at the pointer given; `fd` is a valid descriptor.
    let done =
        unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCOUTQNSD as libc::Ioctl, &raw mut bytes) };
    if done == 0 { usize::try_from(bytes).ok() } else { None }
}

/// Lets the receiving TCP socket `fd` advertise up to `bytes` of window from now on, its
/// receive buffer raised to hold them, without fixing its size: `SO_RCVLOWAT` at `bytes`
/// raises the buffer and the window's clamp (Linux's `tcp_set_rcvlowat`, since 4.18, up to
/// half of `tcp_rmem`'s ceiling; a buffer set by `SO_RCVBUF` it leaves alone), then back at
/// 1 so that reads wake on every byte as before. `SO_RCVBUF` would fix the buffer, and end
/// autotuning's growth past it. Best effort; whether the kernel took both.
pub fn open_receive_window(fd: BorrowedFd<'_>, bytes: usize) -> bool {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    let set = |value| set_int_option(fd, libc::SOL_SOCKET, libc::SO_RCVLOWAT, value);
    set(bytes) & set(1)
}

/// Lets the TCP socket `fd` hold as many bytes not yet sent as its send buffer takes again,
/// after [`hold_unsent`]: `TCP_NOTSENT_LOWAT` at 0, the system's (`net.ipv4.tcp_notsent_lowat`,
/// by default no limit); best effort. Writers waiting on it are woken. Whether the kernel
/// took it.
pub fn release_unsent(fd: BorrowedFd<'_>) -> bool {
    set_tcp_int(fd, libc::TCP_NOTSENT_LOWAT, 0)
}

/// Gives a sending TCP socket the largest send buffer an unprivileged process may set
/// (`net.core.wmem_max`), when that is more than autotuning would reach (`tcp_wmem`'s maximum;
/// the kernel doubles what is set, for its overhead). The send buffer bounds the bytes in
/// flight: on a 1 Gbit/s path with 40 ms round trips (5 MB in flight), autotuning's 4 MiB
/// carried 550 Mbit/s and an 8 MiB buffer the full 966 (measured between namespaces, a
/// packet-level delay line). Where `wmem_max` is lower (the kernel's default is 208 KiB),
/// setting it would cap the buffer below autotuning's, so it is left alone. The receive
/// buffer is always left to autotuning, which goes to `tcp_rmem`'s maximum (32 MiB here).
pub fn widen_send_buffer(fd: BorrowedFd<'_>) {
    let read = |path: &str, field: usize| -> Option<usize> {
        let text = std::fs::read_to_string(path).ok()?;
        text.split_whitespace().nth(field)?.parse().ok()
    };
    let (Some(settable), Some(autotuned)) =
        (read("/proc/sys/net/core/wmem_max", 0), read("/proc/sys/net/ipv4/tcp_wmem", 2))
    else {
        return;
    };
    if settable.saturating_mul(2) > autotuned {
        let _ = rustix::net::sockopt::set_socket_send_buffer_size(fd, settable);
    }
}

/// Asks for the TCP congestion control `name` on the socket `fd` (`TCP_CONGESTION`). The
/// kernel refuses with `ENOENT` an algorithm it does not have (not built in, its module not
/// loaded: a process with `CAP_NET_ADMIN` has the module loaded by the asking), and with
/// `EPERM` one that `net.ipv4.tcp_allowed_congestion_control` does not list, to a process
/// without `CAP_NET_ADMIN`.
pub fn set_congestion_control(fd: BorrowedFd<'_>, name: &str) -> std::io::Result<()> {
    Ok(rustix::net::sockopt::set_tcp_congestion(fd, name)?)
}

/// The TCP congestion control the socket `fd` has.
pub fn congestion_control(fd: BorrowedFd<'_>) -> Option<String> {
    rustix::net::sockopt::tcp_congestion(fd).ok()
}

/// What the kernel says of TCP congestion control (`/proc/sys/net/ipv4/`): the algorithms it
/// has now, those any process may ask for, and the one a socket gets when nobody asks (the
/// network namespace's).
pub fn congestion_controls() -> Option<super::CongestionControls> {
    let read = |name: &str| std::fs::read_to_string(format!("/proc/sys/net/ipv4/{name}")).ok();
    let names = |text: String| text.split_whitespace().map(str::to_owned).collect();
    Some(super::CongestionControls {
        available: names(read("tcp_available_congestion_control")?),
        allowed: names(read("tcp_allowed_congestion_control")?),
        default: read("tcp_congestion_control")?.trim().to_owned(),
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

/// Whether a pipe's descriptor flags make it a packet-mode pipe (`O_DIRECT`, pipe(7)); only
/// the writing end shows it.
pub fn is_packet_mode(flags: rustix::fs::OFlags) -> bool {
    flags.contains(rustix::fs::OFlags::DIRECT)
}

/// Room left under a memory cgroup's limit for the kernel's own use on accel's behalf: pipe
/// pages (unswappable, charged to the cgroup), the page cache of files written.
const CGROUP_HEADROOM: u64 = 32 << 20;

/// The memory the buffer may take under this process's memory cgroup and its ancestors:
/// the smallest limit less what that cgroup uses already. Reads cgroup v2 (`memory.max`) and
/// the v1 memory controller (`memory.limit_in_bytes`), whichever the process is in.
pub fn cgroup_memory_limit() -> Option<super::MemoryLimit> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // Lines are `id:controllers:path`; v2 is `0::path`, v1's memory controller `N:memory:path`.
    let hierarchies = own.lines().filter_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let path = path.trim().trim_start_matches('/');
        match controllers {
            "" => Some((Path::new("/sys/fs/cgroup").join(path), "memory.max", "memory.current")),
            c if c.split(',').any(|c| c == "memory") => Some((
                Path::new("/sys/fs/cgroup/memory").join(path),
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
            )),
            _ => None,
        }
    });
    let read = |dir: &Path, file: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
    };
    let mut tightest: Option<(u64, u64)> = None;
    for (leaf, limit_file, usage_file) in hierarchies {
        for dir in leaf.ancestors().take_while(|d| d.starts_with("/sys/fs/cgroup")) {
            // v2 says "max" for no limit, which does not parse; v1 says a number near 2^63.
            if let (Some(max), Some(used)) = (read(dir, limit_file), read(dir, usage_file)) {
                let room = max.saturating_sub(used).saturating_sub(CGROUP_HEADROOM);
                if tightest.is_none_or(|(best, _)| room < best) {
                    tightest = Some((room, max));
                }
            }
        }
    }
    let (bytes, max) = tightest?;
    Some(super::MemoryLimit {
        bytes,
        what: format!("the memory cgroup's limit of {}", crate::size::Bytes(max)),
    })
}

/// Bytes of address space the process uses now (`VmSize`).
pub fn address_space_used() -> Option<u64> {
    status_kib("VmSize:").map(|kib| kib << 10)
}

/// Bytes of private writable memory the process uses now (`VmData`), which `RLIMIT_DATA`
/// counts.
pub fn data_used() -> Option<u64> {
    status_kib("VmData:").map(|kib| kib << 10)
}

/// How many times the calling thread has slept in the kernel so far: its voluntary context
/// switches (`getrusage(RUSAGE_THREAD)`), each a blocking call that waited and was woken.
pub fn thread_sleeps() -> Option<u64> {
    // SAFETY: `getrusage` fills the struct it is given, which is plain data.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid `who` and a pointer to a live `rusage`.
    let done = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    (done == 0).then_some(usage.ru_nvcsw as u64)
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix(field))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Who is at the other end of a Unix socket (`SO_PEERCRED`: the user and the process that
/// connected, or that listens).
pub fn peer(socket: &impl AsFd) -> io::Result<super::Peer> {
    let credentials = rustix::net::sockopt::socket_peercred(socket)?;
    let pid = credentials.pid.as_raw_nonzero().get() as u32;
    Ok(super::Peer { uid: credentials.uid.as_raw(), pid: Some(pid) })
}

/// Moves up to `len` bytes like [`splice`], reading from `from` at `*from_at` (a file; the
/// offset advances) instead of its own position.
pub fn splice_from_file(
    from: BorrowedFd<'_>,
    from_at: &mut u64,
    to: BorrowedFd<'_>,
    len: usize,
) -> Result<usize, Errno> {
    rustix::pipe::splice(from, Some(from_at), to, None, len, SpliceFlags::empty())
}

/// Moves up to `len` bytes like [`splice`], writing to `to` at `*to_at` (a file; the offset
/// advances) instead of its own position.
pub fn splice_to_file(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    to_at: &mut u64,
    len: usize,
) -> Result<usize, Errno> {
    rustix::pipe::splice(from, None, to, Some(to_at), len, SpliceFlags::NONBLOCK)
}

/// An unnamed file in `dir` (`O_TMPFILE`): nothing is left behind, even after a crash.
pub fn spill_file(dir: &Path) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    Ok(rustix::fs::open(dir, flags, Mode::from_raw_mode(0o600))?)
}

/// Allocates `len` bytes of `fd` at `offset`, so that writing them cannot fail for want of
/// space.
pub fn reserve_space(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    Ok(rustix::fs::fallocate(fd, rustix::fs::FallocateFlags::empty(), offset, len)?)
}

/// Gives `len` bytes of `fd` at `offset` back to the file system (a hole); the file keeps its
/// size, and pages of the range still in a pipe stay valid there.
pub fn punch_hole(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    use rustix::fs::FallocateFlags;
    let mode = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
    Ok(rustix::fs::fallocate(fd, mode, offset, len)?)
}

/// Starts writing `len` bytes of `fd` at `offset` back to disk, without waiting; fails only
/// where writing back could not be started.
pub fn start_writeback(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    sync_range(fd, offset, len, libc::SYNC_FILE_RANGE_WRITE)
}

/// Waits until `len` bytes of `fd` at `offset` are on disk, then drops them from the page
/// cache, so that spilled data does not crowd out everyone else's cache. A write-back that
/// failed (anywhere in the file since the last look: the kernel tells it once per open file)
/// is returned, and then nothing is dropped: a page whose write failed would read back as
/// what the disk holds there.
pub fn drop_written(fd: BorrowedFd<'_>, offset: u64, len: u64) -> io::Result<()> {
    let all = libc::SYNC_FILE_RANGE_WAIT_BEFORE
        | libc::SYNC_FILE_RANGE_WRITE
        | libc::SYNC_FILE_RANGE_WAIT_AFTER;
    sync_range(fd, offset, len, all)?;
    let _ = rustix::fs::fadvise(
        fd,
        offset,
        std::num::NonZeroU64::new(len),
        rustix::fs::Advice::DontNeed,
    );
    Ok(())
}

/// A write-back of `fd` that failed since the last look (by this or [`drop_written`]), found
/// without writing or waiting for anything: waiting "before" on a range past any data waits
/// for no page, and reports the file's write-back error as every wait does.
pub fn writeback_error(fd: BorrowedFd<'_>) -> io::Result<()> {
    sync_range(fd, i64::MAX as u64 - 1, 1, libc::SYNC_FILE_RANGE_WAIT_BEFORE)
}

/// `sync_file_range`, again when a signal interrupts it (an interrupted wait is no failure).
fn sync_range(fd: BorrowedFd<'_>, offset: u64, len: u64, flags: libc::c_uint) -> io::Result<()> {
    loop {
        // SAFETY: sync_file_range on a valid descriptor.
        let done =
            unsafe { libc::sync_file_range(fd.as_raw_fd(), offset as i64, len as i64, flags) };
        match done {
            0 => return Ok(()),
            _ => match io::Error::last_os_error() {
                error if error.kind() == io::ErrorKind::Interrupted => {}
                error => return Err(error),
            },
        }
    }
}

/// One allocator arena for every thread (glibc's `M_ARENA_MAX`); other C libraries have no
/// per-thread reservations to speak of.
pub fn one_allocator_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; it is called before other threads.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}
