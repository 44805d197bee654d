//! The stream through the ssh session on the remote side (`--via ssh`, or the fallback when
//! the direct path is closed) where sshd gave no pipes (or there is no `/proc` to open them
//! anew): two threads between the session's stdin and stdout and one end of a socketpair of
//! accel's own, whose other end is the run's connection (`net::socket::carried`). With pipes,
//! as OpenSSH gives on Linux, there is no relay: the run's connection reads and writes them
//! through descriptions of its own (`net::socket::carried_by_pipes`), without the relay's
//! copy of every byte and its two threads waking each other.
//!
//! Why a relay at all: the run's socket must be non-blocking, and the session's descriptors
//! are inherited, never to be made so (someone else's open file description). Locally there
//! is none: ssh's stdin and stdout are the other end of the local accel's own socketpair. Each
//! direction is read and written through a buffer: `splice(2)` between the pipes and the
//! socketpair was tried, and now and then left the sender's first handshake message
//! undelivered (1 run in 3 with six at once on this 2-vCPU machine, kernel 6.18), where
//! read and write never did. A drop of the session is the end of the stream (the connection
//! is the session's alone), so such runs do not resume.

use std::io;
use std::net::Shutdown;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::thread::{self, JoinHandle};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;

/// The most one read moves: a default pipe's capacity.
const PIECE: usize = 64 << 10;

/// Bridges `end` (a socketpair end, blocking) with the session: what `from_session` gives
/// goes into `end`, what `end` gives goes to `to_session`. Each direction ends at its end of
/// stream, passing it on (the socket shut down for writing, or the pipe closed); the handle
/// ends when both have.
pub fn bridge(
    end: OwnedFd,
    from_session: OwnedFd,
    to_session: OwnedFd,
) -> io::Result<JoinHandle<()>> {
    let end = UnixStream::from(end);
    let outward_end = end.try_clone()?;
    thread::Builder::new().name("accel-ssh-relay".into()).spawn(move || {
        let outward = thread::Builder::new().name("accel-ssh-relay".into()).spawn(move || {
            let _ = pass(&outward_end, &to_session);
            drop(to_session);
        });
        let _ = pass(&from_session, &end);
        let _ = end.shutdown(Shutdown::Write);
        if let Ok(outward) = outward {
            let _ = outward.join();
        }
    })
}

/// Moves what `from` gives into `to` through a buffer of this thread's, until `from`'s end
/// of stream, or a failure either side.
fn pass(from: &impl AsFd, to: &impl AsFd) -> io::Result<()> {
    let mut buffer = vec![0u8; PIECE];
    loop {
        let n = match rustix::io::read(from, &mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => {
                wait(from, PollFlags::IN);
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut left = &buffer[..n];
        while !left.is_empty() {
            match rustix::io::write(to, left) {
                Ok(written) => left = &left[written..],
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => wait(to, PollFlags::OUT),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Waits until `fd` is ready for `flags` (or has failed, which the next call says).
fn wait(fd: &impl AsFd, flags: PollFlags) {
    let mut fds = [PollFd::new(fd, flags)];
    let _ = rustix::event::poll(&mut fds, None);
}
