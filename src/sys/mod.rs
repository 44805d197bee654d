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
//! - [`check_open`]: whether a descriptor number accel was handed is open.
//! - [`retire`]: close a finished output early, keeping its descriptor's number taken;
//!   [`replace`]: put another file at a descriptor's number (the next FILE operand).
//! - [`limit_unacknowledged`]: give up a TCP connection whose sent data stays unacknowledged
//!   (Linux's `TCP_USER_TIMEOUT`), so that a peer that vanished mid-transfer is noticed.
//! - [`widen_send_buffer`]: a sending socket's buffer as large as may be set, where that
//!   is more than autotuning reaches (Linux), for paths with a large bandwidth-delay product.
//! - [`hold_unsent`]: a sending socket holds few bytes beyond those in flight (Linux's
//!   `TCP_NOTSENT_LOWAT`), so that its writes wait when the link is full;
//!   [`release_unsent`]: as many as its buffer takes again; [`unacknowledged`]: the bytes
//!   it holds that the far end has not acknowledged (Linux's `SIOCOUTQ`); [`unsent`]: those
//!   it has not sent yet (`SIOCOUTQNSD`).
//! - [`set_congestion_control`], [`congestion_control`], [`congestion_controls`]: a TCP
//!   socket's congestion control asked for and read back, and what the system offers
//!   (Linux's `TCP_CONGESTION`; elsewhere the system's own is kept).
//! - [`accept_only_with_data`]: a listening socket's connections are accepted only once
//!   they have sent something (Linux's `TCP_DEFER_ACCEPT`), so silent ones never crowd out
//!   the network receiver's sender.
//! - [`thread_sleeps`]: how often the calling thread has slept in the kernel (Linux), which
//!   `--debug` shows per MiB moved.
//! - [`has_aes_instructions`]: whether the CPU has AES instructions (which cipher is faster).
//! - [`disposition`], [`handle_by_interrupting`], [`send_to_thread`]: a signal's action read
//!   without changing it, a do-nothing handler that interrupts blocked calls, a signal sent to
//!   one thread (`signal.rs`, POSIX: the same everywhere).

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
mod signal;

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

pub use imp::{
    CAN_SPLICE, PoolPipe, accept_only_with_data, advise_huge_pages, congestion_control,
    congestion_controls, drop_written, enlarge_pipe, hold_unsent, is_packet_mode,
    limit_unacknowledged, open_receive_window, peer, pipe_size, pipe_target_size, private_reader,
    private_writer, punch_hole, release_unsent, reserve_space, set_congestion_control, spill_file,
    splice, splice_from_file, splice_to_file, start_writeback, thread_sleeps, unacknowledged,
    unsent, widen_send_buffer, write_nowait, writeback_error,
};
pub use memory::{fit_allocator_to_limits, memory_limit, physical_memory};
pub use signal::{
    Disposition, disposition, exit_of, handle_by_interrupting, ignore_signal, send_to_thread,
    stop_group,
};

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

/// The most the buffer may take, and the limit that sets it ([`memory_limit`]): the one the
/// facade's both sides say (the machine's and the rlimits in `memory.rs`, a cgroup's in
/// `linux.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryLimit {
    /// Bytes the buffer may hold.
    pub bytes: u64,
    /// What sets it, for the message: `this machine's memory (23.4 GiB)`.
    pub what: String,
}

impl fmt::Display for MemoryLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)
    }
}

/// What the system offers of TCP congestion control ([`congestion_controls`], Linux).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CongestionControls {
    /// The algorithms the kernel has now (built in, or their module loaded).
    pub available: Vec<String>,
    /// Those a process without `CAP_NET_ADMIN` may ask for.
    pub allowed: Vec<String>,
    /// The one a socket gets when nobody asks: the system's default.
    pub default: String,
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

/// A pipe's description of this process's own, on which a plain `write` never waits
/// ([`private_writer`](imp::private_writer)): the output's, for the input thread's writes
/// that must not wait, where `pwritev2(RWF_NOWAIT)` costs more per write and stops working
/// once the pipe has been spliced into. One more writer of the pipe while it is open.
#[derive(Debug)]
pub struct PrivateWriter(OwnedFd);

impl PrivateWriter {
    /// The private description of the pipe or FIFO `fd`, where the system can make one.
    pub fn open(fd: BorrowedFd<'_>) -> Option<PrivateWriter> {
        imp::private_writer(fd).map(PrivateWriter)
    }

    /// Writes what of `buf` fits now: `Ok(0)` when nothing does.
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        match rustix::io::write(&self.0, buf) {
            Ok(n) => Ok(n),
            Err(rustix::io::Errno::AGAIN) => Ok(0),
            Err(error) => Err(error.into()),
        }
    }
}

/// Whether descriptor number `fd` is open: `Ok`, or the error saying it is not (`EBADF`). For
/// numbers accel was handed (a standard descriptor, `--progress-fd`), not ones it opened.
pub fn check_open(fd: RawFd) -> rustix::io::Result<()> {
    // SAFETY: only asks whether the descriptor number is open; nothing is kept.
    let number = unsafe { BorrowedFd::borrow_raw(fd) };
    rustix::io::fcntl_getfd(number).map(drop)
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

/// Makes the descriptor `onto` refer to what `from` refers to, in one step (`dup2`), closing
/// what it referred to before; `onto` stays closed on exec. Its number stays open throughout,
/// so a thread about to use it uses one or the other, and nothing opened meanwhile can land
/// on it: the next of several input files, read at the same number (FILE operands).
pub fn replace(from: BorrowedFd<'_>, onto: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: both descriptors are open for the whole call, and `onto` is owned by the caller.
    if unsafe { libc::dup2(from.as_raw_fd(), onto.as_raw_fd()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // dup2 clears close-on-exec on `onto`; accel runs no other program, but the flag is set
    // anyway, as on every descriptor of its own.
    rustix::io::fcntl_setfd(onto, rustix::io::FdFlags::CLOEXEC)?;
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::io::Read;
    use std::os::fd::AsFd;

    use rustix::event::{PollFd, PollFlags, poll};
    use rustix::fs::OFlags;

    use super::PrivateWriter;

    #[test]
    fn a_private_writer_never_waits_and_leaves_the_shared_description_alone() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let own = PrivateWriter::open(write.as_fd()).expect("a pipe reopens through /proc");
        // Filled: the last write takes what fits, the next none (a blocking one would hang).
        let mut total = 0;
        loop {
            match own.write(&[7; 4096]).unwrap() {
                0 => break,
                n => total += n,
            }
        }
        assert!(total >= 4096);
        let flags = rustix::fs::fcntl_getfl(&write).unwrap();
        assert!(!flags.contains(OFlags::NONBLOCK), "the shared description is not touched");
        // One more writer of the pipe: its reader sees the end once both are closed.
        drop(write);
        let mut read = std::fs::File::from(read);
        let mut all = vec![0; total];
        read.read_exact(&mut all).unwrap();
        let hung_up = |read: &std::fs::File| {
            let mut fds = [PollFd::new(read, PollFlags::IN)];
            poll(&mut fds, Some(&rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 })).unwrap();
            fds[0].revents().contains(PollFlags::HUP)
        };
        assert!(!hung_up(&read), "the private writer is still open");
        drop(own);
        assert!(hung_up(&read));
        assert_eq!(read.read(&mut all).unwrap(), 0);
    }

    #[test]
    fn a_sending_socket_holds_the_unsent_bytes_it_is_told_until_released() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let lowat = || {
            let (mut value, mut len) = (0 as libc::c_int, size_of::<libc::c_int>() as u32);
            // SAFETY: getsockopt on a valid descriptor into an int of the size given.
            let done = unsafe {
                libc::getsockopt(
                    std::os::fd::AsRawFd::as_raw_fd(&socket),
                    libc::IPPROTO_TCP,
                    libc::TCP_NOTSENT_LOWAT,
                    (&raw mut value).cast(),
                    &raw mut len,
                )
            };
            assert_eq!(done, 0);
            value
        };
        let before = lowat();
        assert_ne!(before, 256 << 10);
        assert!(super::hold_unsent(socket.as_fd(), 256 << 10));
        assert_eq!(lowat(), 256 << 10);
        // Released: the system's value again (the option at 0), whatever it was before.
        assert!(super::release_unsent(socket.as_fd()));
        assert_eq!(lowat(), 0);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_sending_socket_says_what_the_far_end_has_not_acknowledged_and_what_is_unsent() {
        use std::io::Write;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut socket = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut far, _) = listener.accept().unwrap();
        assert_eq!(super::unacknowledged(socket.as_fd()), Some(0));
        assert_eq!(super::unsent(socket.as_fd()), Some(0));
        // The far end reads nothing: once its window is full, what is written stays unsent.
        // The socket is this test's own, made non-blocking to write until it is full.
        socket.set_nonblocking(true).unwrap();
        let block = vec![7u8; 64 << 10];
        let mut written = 0;
        loop {
            match socket.write(&block) {
                Ok(n) => written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let held = super::unacknowledged(socket.as_fd()).unwrap();
        assert!(held > 0 && held <= written, "{held} of {written}");
        // Its window full, the far end takes no more: some of those are not sent yet.
        let unsent = super::unsent(socket.as_fd()).unwrap();
        assert!(unsent > 0 && unsent <= held, "{unsent} of {held}");
        // Read whole, every byte is acknowledged: loopback's acknowledgements are the
        // kernel's own, within a few milliseconds.
        let mut buffer = vec![0u8; written];
        far.read_exact(&mut buffer).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while super::unacknowledged(socket.as_fd()) != Some(0) {
            assert!(std::time::Instant::now() < deadline, "still unacknowledged");
            // A look each millisecond: spinning would take the CPU the tests beside need.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(super::unsent(socket.as_fd()), Some(0));
    }

    #[test]
    fn only_a_pipe_has_a_private_writer() {
        let null = std::fs::File::options().write(true).open("/dev/null").unwrap();
        assert!(PrivateWriter::open(null.as_fd()).is_none());
        let (socket, _other) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(PrivateWriter::open(socket.as_fd()).is_none());
    }
}
