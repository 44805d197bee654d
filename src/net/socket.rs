//! accel's own TCP sockets: connecting, listening, accepting, and I/O with deadlines.
//!
//! Every socket accel makes is `O_NONBLOCK` and close-on-exec: it is nobody else's, so the flag
//! harms no one, a splice from it never holds a pipe's lock while waiting for the network
//! (linux-io.md §7, §10), and every wait is a `poll` that a deadline or the run's end can cut
//! short. Each connection gets `TCP_NODELAY` (accel writes whole frames, and a short line
//! must leave at once), and keepalive, so that a peer that vanishes without a word is noticed
//! even while nothing is being sent (see [`tune`]). The receive buffer is left to the kernel's
//! autotuning, which grows it to the path's bandwidth-delay product (up to 32 MiB here), but
//! from a window open from the start, set by the receiver ([`Socket::open_receive_window`]); a
//! sender's send buffer is set as large as may be where that beats autotuning's ceiling
//! ([`Socket::widen_send_buffer`], with the measurement behind it in `sys`), by the sender,
//! whichever side connected.
//!
//! What is TCP's alone is set where a socket is made ([`connect`], [`accept`]): the options
//! of [`tune`], and the peer's address; a [`Socket`]'s I/O asks nothing of TCP. The
//! congestion control the run settled on ([`Congestion`](super::congestion::Congestion)) is
//! asked for before [`connect`] connects and before [`listen`] listens: a connection then has
//! it from its first packet, and one accepted has its listener's.
//!
//! One other kind: a connection **carried by an ssh session**: locally an end of a Unix
//! socketpair of accel's own whose other end is ssh's stdin and stdout ([`carried`]); on the
//! remote, the two pipes sshd gave it, each opened anew through `/proc/self/fd` as a
//! description of accel's own ([`carried_by_pipes`]: it reads one and writes the other, and
//! may make them non-blocking, which the inherited descriptions never are). It has no TCP
//! options and no address of its own (its `peer` is the ssh host's, for messages), and only
//! it ever carries frames whose payloads are not sealed ([`Socket::is_carried`]): ssh's
//! cipher protects them there. No TCP socket can be one.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::PollFlags;
use rustix::io::Errno;
use rustix::net::{AddressFamily, SendFlags, SocketFlags, SocketType, ipproto, sockopt};

use crate::stop::{self, Stop, wait_for};

/// The window a receiving connection may advertise from its start
/// ([`Socket::open_receive_window`]): 8 MiB, a 1 Gbit/s path's 40 ms and more. Left to
/// autotuning, the receive buffer starts at `tcp_rmem`'s default (128 KiB, a window of 64 KB)
/// and grows once a round trip's reads exceed the last; at 1 Gbit/s behind the bench's 40 ms
/// delay line, those reads were one round trip's two packets, the second still queued when
/// the first was read, and in two runs of three the buffer stayed at 128 KiB for four round
/// trips: BBR, held by the window, left its startup at 110 Mbit/s and took a second more to
/// fill the link (256 MiB: 2.9–3.3 s, against 2.5 s when the buffer grew at once), whatever
/// `--compress` was. Opened, the window grows with the packets that come, and every run filled
/// the link by 0.35 s (2.44–2.48 s). Autotuning still grows the buffer beyond, to `tcp_rmem`'s
/// ceiling; the kernel holds memory only for bytes received and not yet read.
pub const RECEIVE_WINDOW: usize = 8 << 20;

/// How long a connection may stay idle before keepalive probes start.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);

/// Time between keepalive probes.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// Unanswered probes before the connection is given up: with the idle time, a peer that
/// vanished is noticed within about 90 s.
const KEEPALIVE_PROBES: u32 = 6;

/// How long sent data may stay unacknowledged before the connection is given up (Linux's
/// `TCP_USER_TIMEOUT`; keepalive does not probe while data waits for an acknowledgement).
const UNACKNOWLEDGED: Duration = Duration::from_secs(90);

/// One connected socket of accel's own: TCP, or a socketpair end carried by ssh, or a pair of
/// pipes carried by ssh.
#[derive(Debug)]
pub struct Socket {
    /// What it reads from, and writes to unless `out` says.
    fd: OwnedFd,
    /// Where it writes, when that is not `fd`: a pipe ([`carried_by_pipes`]).
    out: Option<OwnedFd>,
    peer: SocketAddr,
    /// An end of a socketpair of accel's own, carried by an ssh session ([`carried`]).
    carried: bool,
}

impl Socket {
    /// The descriptor it reads from: what a wait for something to read watches. It writes to
    /// it too, unless it is a pair of pipes: [`Socket::wait`] waits for either.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The descriptor it writes to.
    fn out(&self) -> BorrowedFd<'_> {
        self.out.as_ref().unwrap_or(&self.fd).as_fd()
    }

    /// Waits until `deadline` at most for what `events` asks (`IN`, `OUT`, or either), each on
    /// the descriptor it concerns.
    pub fn wait(
        &self,
        events: PollFlags,
        stop: &Stop,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        let (reading, writing) = (events & PollFlags::IN, events & PollFlags::OUT);
        match &self.out {
            // Each descriptor only for what it is asked: a pipe polled for nothing would
            // still say its hang-up, at once and again.
            Some(out) if reading.is_empty() => wait_for(out.as_fd(), writing, stop, deadline),
            Some(out) if !writing.is_empty() => {
                stop::wait_for_either((self.fd(), reading), (out.as_fd(), writing), stop, deadline)
            }
            _ => wait_for(self.fd(), events, stop, deadline),
        }
    }

    /// The address of the other end (the ssh host's, for a connection [`carried`] by ssh).
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Whether this is a connection carried by an ssh session ([`carried`]): never a TCP
    /// socket, whatever a peer says.
    pub fn is_carried(&self) -> bool {
        self.carried
    }

    /// Reads what has arrived, up to `buf.len()` (at least a byte; 0 at the end of the
    /// stream), waiting until `deadline` at most.
    pub fn read(
        &self,
        buf: &mut [u8],
        stop: &Stop,
        deadline: Option<Instant>,
    ) -> io::Result<usize> {
        stop::blocking(self.fd(), PollFlags::IN, stop, deadline, || {
            rustix::io::read(&self.fd, &mut *buf)
        })
    }

    /// Reads what has arrived now, up to `buf.len()`, without waiting: `None` when nothing
    /// has (0 at the end of the stream).
    pub fn read_now(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match rustix::io::read(&self.fd, &mut *buf) {
                Ok(n) => return Ok(Some(n)),
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Whether something can be read (or the end seen) by `deadline`.
    pub fn readable_by(&self, stop: &Stop, deadline: Instant) -> io::Result<bool> {
        match wait_for(self.fd(), PollFlags::IN, stop, Some(deadline)) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == io::ErrorKind::TimedOut => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Writes some of `buf` (at least a byte), waiting for space as long as it takes, until the
    /// run's `stop`. `MSG_NOSIGNAL`: a peer that has gone is an error here, never a SIGPIPE.
    pub fn write(&self, buf: &[u8], stop: &Stop) -> io::Result<usize> {
        match self.send(buf, stop, None)? {
            0 if !buf.is_empty() => Err(io::ErrorKind::WriteZero.into()),
            n => Ok(n),
        }
    }

    /// Writes all of `buf`, waiting until `deadline` at most. `MSG_NOSIGNAL`, as
    /// [`write`](Socket::write).
    pub fn write_all(
        &self,
        mut buf: &[u8],
        stop: &Stop,
        deadline: Option<Instant>,
    ) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.send(buf, stop, deadline)?;
            buf = &buf[n..];
        }
        Ok(())
    }

    /// One `send`, as on a blocking socket, waiting for space until `deadline` at most.
    fn send(&self, buf: &[u8], stop: &Stop, deadline: Option<Instant>) -> io::Result<usize> {
        stop::blocking(self.out(), PollFlags::OUT, stop, deadline, || self.send_once(buf))
    }

    /// One `send` (`MSG_NOSIGNAL`), or a `write` to a pipe (the remote end through ssh,
    /// which ignores SIGPIPE: a reader gone is `EPIPE`).
    fn send_once(&self, buf: &[u8]) -> rustix::io::Result<usize> {
        match &self.out {
            None => rustix::net::send(&self.fd, buf, SendFlags::NOSIGNAL),
            Some(out) => rustix::io::write(out, buf),
        }
    }

    /// Writes what fits now of `buf`, without waiting: `None` when nothing does.
    /// `MSG_NOSIGNAL`, as [`write_all`](Socket::write_all).
    pub fn write_now(&self, buf: &[u8]) -> io::Result<Option<usize>> {
        loop {
            match self.send_once(buf) {
                Ok(n) => return Ok(Some(n)),
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// As [`write_now`](Socket::write_now), for the bytes of `pieces` one after the other, in
    /// one call (`sendmsg`, or `writev` to a pipe).
    pub fn write_vectored_now(&self, pieces: &[io::IoSlice<'_>]) -> io::Result<Option<usize>> {
        loop {
            let sent = match &self.out {
                None => rustix::net::sendmsg(
                    &self.fd,
                    pieces,
                    &mut rustix::net::SendAncillaryBuffer::default(),
                    SendFlags::NOSIGNAL,
                ),
                Some(out) => rustix::io::writev(out, pieces),
            };
            match sent {
                Ok(n) => return Ok(Some(n)),
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Whether a short write would go at once (there is space to send).
    pub fn writable_now(&self) -> bool {
        let mut fds = [rustix::event::PollFd::from_borrowed_fd(self.out(), PollFlags::OUT)];
        let now = rustix::event::Timespec { tv_sec: 0, tv_nsec: 0 };
        matches!(rustix::event::poll(&mut fds, Some(&now)), Ok(1))
            && fds[0].revents().contains(PollFlags::OUT)
    }

    /// The bytes its send buffer holds at most now (`SO_SNDBUF`, as autotuning has grown it
    /// so far); 0 if the kernel does not say.
    pub fn send_buffer(&self) -> usize {
        match &self.out {
            None => rustix::net::sockopt::socket_send_buffer_size(&self.fd).unwrap_or(0),
            // A pipe's capacity.
            Some(out) => crate::sys::pipe_size(out.as_fd()).unwrap_or(0),
        }
    }

    /// Makes its send buffer as large as may be set, where that beats autotuning's ceiling
    /// (`sys::widen_send_buffer`): for the side that sends the stream, whichever side
    /// connected.
    pub fn widen_send_buffer(&self) {
        if self.out.is_none() {
            crate::sys::widen_send_buffer(self.fd());
        }
    }

    /// Lets it advertise up to [`RECEIVE_WINDOW`] from now on (`sys::open_receive_window`):
    /// for the side that receives the stream, whichever side connected. Not through ssh.
    pub fn open_receive_window(&self) {
        if self.out.is_none() && !self.carried {
            crate::sys::open_receive_window(self.fd(), RECEIVE_WINDOW);
        }
    }

    /// Has it hold at most `bytes` not yet sent beyond those in flight
    /// (`sys::hold_unsent`): a write then waits while the link is full. Whether it does: not
    /// through ssh (a pipe), nor where the system cannot.
    pub fn hold_unsent(&self, bytes: usize) -> bool {
        self.out.is_none() && crate::sys::hold_unsent(self.fd(), bytes)
    }

    /// Lets it hold as many bytes not yet sent as its buffer takes again, after
    /// [`hold_unsent`](Socket::hold_unsent) (`sys::release_unsent`).
    pub fn release_unsent(&self) {
        if self.out.is_none() {
            crate::sys::release_unsent(self.fd());
        }
    }

    /// The bytes it holds that the far end has not acknowledged, unsent or in flight
    /// (`sys::unacknowledged`): `None` through ssh (a pipe), or where the system does not say.
    pub fn unacknowledged(&self) -> Option<usize> {
        self.out.is_none().then(|| crate::sys::unacknowledged(self.fd())).flatten()
    }

    /// The bytes it holds not yet sent (`sys::unsent`): `None` through ssh (a pipe), or where
    /// the system does not say.
    pub fn unsent(&self) -> Option<usize> {
        self.out.is_none().then(|| crate::sys::unsent(self.fd())).flatten()
    }

    /// Its TCP congestion control, as the kernel reads it back, for `--debug`.
    pub fn congestion_control(&self) -> String {
        crate::sys::congestion_control(self.fd())
            .unwrap_or_else(|| "not said by this system".to_owned())
    }

    /// Ends the connection both ways, waking whoever waits on it; best effort. A pair of pipes
    /// cannot be shut down: each descriptor is replaced by an end of a socketpair that is (the
    /// pipes' descriptions of accel's own closed, reads then at their end, writes failing),
    /// which wakes a wait that starts later, not one under way (the run's stop does).
    pub fn shut_down(&self) {
        let _ = rustix::net::shutdown(&self.fd, rustix::net::Shutdown::Both);
        if let Some(out) = &self.out
            && let Ok((dead, _other)) = socketpair()
        {
            let _ = rustix::net::shutdown(&dead, rustix::net::Shutdown::Both);
            let _ = crate::sys::replace(dead.as_fd(), self.fd.as_fd());
            let _ = crate::sys::replace(dead.as_fd(), out.as_fd());
        }
    }
}

/// A new socket of `address`'s family, not blocking, closed on exec, asking for the
/// congestion control `congestion` (best effort: settled at the start, on a socket like it).
fn socket_for(address: &SocketAddr, congestion: Option<&str>) -> io::Result<OwnedFd> {
    let family = if address.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let fd = rustix::net::socket_with(family, SocketType::STREAM, flags, Some(ipproto::TCP))?;
    ask_congestion(fd.as_fd(), congestion);
    Ok(fd)
}

/// Asks for the congestion control `congestion` (`None`: the system's) on `fd`, best effort:
/// it was settled at the start, and a socket that does not get it keeps the system's. On a
/// listener, the connections it accepts inherit it.
pub fn ask_congestion(fd: BorrowedFd<'_>, congestion: Option<&str>) {
    if let Some(name) = congestion {
        let _ = crate::sys::set_congestion_control(fd, name);
    }
}

/// Connects to `address` with the congestion control `congestion` (`None`: the system's),
/// giving up at `deadline`.
pub fn connect(
    address: SocketAddr,
    congestion: Option<&str>,
    stop: &Stop,
    deadline: Instant,
) -> io::Result<Socket> {
    let fd = socket_for(&address, congestion)?;
    match rustix::net::connect(&fd, &address) {
        Ok(()) => {}
        Err(Errno::INPROGRESS | Errno::INTR | Errno::AGAIN) => {
            wait_for(fd.as_fd(), PollFlags::OUT, stop, Some(deadline))?;
            sockopt::socket_error(&fd)??;
        }
        Err(e) => return Err(e.into()),
    }
    tune(&fd);
    Ok(Socket { fd, out: None, peer: address, carried: false })
}

/// A TCP connection made before the run, and handed over (non-blocking): given the
/// congestion control `congestion` and tuned as [`connect`]'s are.
pub fn adopt(fd: OwnedFd, congestion: Option<&str>) -> io::Result<Socket> {
    let peer = rustix::net::getpeername(&fd)?.ok_or_else(|| io::Error::other("no peer"))?;
    let peer = SocketAddr::try_from(peer).map_err(|_| io::Error::other("not an IP socket"))?;
    ask_congestion(fd.as_fd(), congestion);
    tune(&fd);
    Ok(Socket { fd, out: None, peer, carried: false })
}

/// A Unix socketpair of accel's own (stream, close-on-exec, blocking until [`carried`] takes
/// one end): one end for ssh's stdin and stdout, or for a relay thread bridged to them.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let flags = SocketFlags::CLOEXEC;
    Ok(rustix::net::socketpair(AddressFamily::UNIX, SocketType::STREAM, flags, None)?)
}

/// A connection carried by an ssh session: `fd`, an end of a [`socketpair`] of this accel's
/// own, made non-blocking here (it is nobody else's: the other end is ssh's, or a relay's);
/// `peer` names the ssh host in messages. Refused for anything but a Unix stream socket, so
/// that a TCP connection can never become one.
pub fn carried(fd: OwnedFd, peer: SocketAddr) -> io::Result<Socket> {
    let family = rustix::net::getsockname(&fd)?.address_family();
    if family != AddressFamily::UNIX || sockopt::socket_type(&fd)? != SocketType::STREAM {
        return Err(io::Error::other("not a Unix stream socket: not carried by ssh"));
    }
    rustix::io::ioctl_fionbio(&fd, true)?;
    Ok(Socket { fd, out: None, peer, carried: true })
}

/// A connection carried by an ssh session through two pipes (the remote end: sshd's stdin and
/// stdout): `from` and `to`, each a description of this accel's own, opened anew through
/// `/proc/self/fd` non-blocking (`sys::private_reader`, `sys::private_writer`), so that the
/// flag never touches the descriptions sshd shares with it. Refused for anything but two
/// pipes already non-blocking: this never sets the flag, so a description handed over by
/// mistake (an inherited one) is refused rather than changed, and a TCP connection can never
/// become one. Each pipe is grown as accel's others are (`sys::enlarge_pipe`).
pub fn carried_by_pipes(from: OwnedFd, to: OwnedFd, peer: SocketAddr) -> io::Result<Socket> {
    for fd in [&from, &to] {
        let mode = rustix::fs::fstat(fd)?.st_mode;
        if rustix::fs::FileType::from_raw_mode(mode) != rustix::fs::FileType::Fifo {
            return Err(io::Error::other("not a pipe: not carried by ssh"));
        }
        if !rustix::fs::fcntl_getfl(fd)?.contains(rustix::fs::OFlags::NONBLOCK) {
            return Err(io::Error::other("a pipe's shared description: not accel's own"));
        }
    }
    // Grown as accel's other pipes are: a wakeup moves more (the size is the pipe's, not the
    // description's).
    crate::sys::enlarge_pipe(from.as_fd());
    crate::sys::enlarge_pipe(to.as_fd());
    Ok(Socket { fd: from, out: Some(to), peer, carried: true })
}

/// A listening socket on exactly `address`, whose connections get the congestion control
/// `congestion` (`None`: the system's). An IPv6 socket listens for IPv6 only, unless
/// `both_families` (every interface given as a bare port).
pub fn listen(
    address: SocketAddr,
    both_families: bool,
    congestion: Option<&str>,
) -> io::Result<OwnedFd> {
    let fd = socket_for(&address, congestion)?;
    // A receiver restarted at once must be able to listen again while the last connection's
    // TIME_WAIT lingers; this never lets two listen on the same port.
    sockopt::set_socket_reuseaddr(&fd, true)?;
    if address.is_ipv6() {
        sockopt::set_ipv6_v6only(&fd, !both_families)?;
    }
    rustix::net::bind(&fd, &address)?;
    // A deep queue (the system caps it at `net.core.somaxconn`): under a flood of
    // connections, the sender's must find a place (see `handshake::Lobby`).
    rustix::net::listen(&fd, 4096)?;
    Ok(fd)
}

/// The address a listening socket is bound to (its port, when 0 was asked for).
pub fn local_address(listener: &OwnedFd) -> io::Result<SocketAddr> {
    let address = rustix::net::getsockname(listener)?;
    SocketAddr::try_from(address).map_err(|_| io::Error::other("not an IP socket"))
}

/// A connection waiting on `listener`, if there is one.
pub fn accept(listener: &OwnedFd) -> io::Result<Option<Socket>> {
    loop {
        match rustix::net::acceptfrom_with(listener, SocketFlags::NONBLOCK | SocketFlags::CLOEXEC) {
            Ok((fd, peer)) => {
                let peer = peer.and_then(|p| SocketAddr::try_from(p).ok());
                let peer = peer.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
                tune(&fd);
                return Ok(Some(Socket { fd, out: None, peer, carried: false }));
            }
            Err(Errno::AGAIN) => return Ok(None),
            // Gone before it was accepted: nothing to do.
            Err(Errno::INTR | Errno::CONNABORTED) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Sets a connection's options: no Nagle delay, keepalive, a limit on unacknowledged data.
/// Best effort: a system without one of them still moves the bytes.
fn tune(fd: &OwnedFd) {
    let _ = sockopt::set_tcp_nodelay(fd, true);
    let _ = sockopt::set_socket_keepalive(fd, true);
    let _ = sockopt::set_tcp_keepidle(fd, KEEPALIVE_IDLE);
    let _ = sockopt::set_tcp_keepintvl(fd, KEEPALIVE_INTERVAL);
    let _ = sockopt::set_tcp_keepcnt(fd, KEEPALIVE_PROBES);
    crate::sys::limit_unacknowledged(fd.as_fd(), UNACKNOWLEDGED);
}

/// A connected pair of accel's sockets on loopback, for tests.
#[cfg(test)]
pub fn pair() -> (Socket, Socket) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let near = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (far, _) = listener.accept().unwrap();
    let socket = |stream: std::net::TcpStream| {
        stream.set_nonblocking(true).unwrap();
        let peer = stream.peer_addr().unwrap();
        Socket { fd: stream.into(), out: None, peer, carried: false }
    };
    (socket(near), socket(far))
}

/// Two connections carried by ssh through pipes ([`carried_by_pipes`]), each reading what
/// the other writes, for tests.
#[cfg(test)]
pub fn carried_pipe_pair() -> (Socket, Socket) {
    use crate::sys::{private_reader, private_writer};
    let (one_reads, other_writes) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let (other_reads, one_writes) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let peer = SocketAddr::from(([192, 0, 2, 1], 22));
    let carried = |reads: OwnedFd, writes: OwnedFd| {
        let (reads, writes) = (private_reader(reads.as_fd()), private_writer(writes.as_fd()));
        carried_by_pipes(reads.unwrap(), writes.unwrap(), peer).unwrap()
    };
    (carried(one_reads, one_writes), carried(other_reads, other_writes))
}

/// A connected pair of accel's sockets carried by ssh ([`carried`]), for tests.
#[cfg(test)]
pub fn carried_pair() -> (Socket, Socket) {
    let (near, far) = socketpair().unwrap();
    let peer = SocketAddr::from(([192, 0, 2, 1], 22));
    (carried(near, peer).unwrap(), carried(far, peer).unwrap())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn int_option(socket: &Socket, option: libc::c_int) -> usize {
        let mut value: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt of an int option into an int, on a valid descriptor.
        let done = unsafe {
            use std::os::fd::AsRawFd;
            libc::getsockopt(
                socket.fd().as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&raw mut value).cast(),
                &raw mut len,
            )
        };
        assert_eq!(done, 0, "getsockopt {option}");
        usize::try_from(value).unwrap()
    }

    #[test]
    fn a_receiver_may_advertise_its_window_from_the_start_and_still_wakes_on_a_byte() {
        let (_near, far) = pair();
        let before = int_option(&far, libc::SO_RCVBUF);
        far.open_receive_window();
        // The kernel takes at most half of `tcp_rmem`'s ceiling as the window asked for, and
        // sizes the buffer to hold it (its overhead beside).
        let ceiling = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_rmem")
            .ok()
            .and_then(|text| text.split_whitespace().nth(2)?.parse::<usize>().ok())
            .unwrap();
        let asked = RECEIVE_WINDOW.min(ceiling / 2);
        let after = int_option(&far, libc::SO_RCVBUF);
        assert!(after >= asked && after > before, "{before} -> {after} bytes, {asked} asked");
        assert_eq!(int_option(&far, libc::SO_RCVLOWAT), 1, "reads wake on a byte, as before");
    }
}
