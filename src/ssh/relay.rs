//! The stream through the ssh session (`--via ssh`, or the fallback when the direct path is
//! closed): on each side, a loopback TCP connection of accel's own, bridged to the session's
//! stdin and stdout by two threads.
//!
//! So the link (net/) sees a TCP connection as on the direct path, and its frames, the
//! handshake and the Ack are the same bytes; only the path differs. A loopback copy costs
//! nothing next to ssh's own cipher and 2 MiB window, which bound this path anyway, and net/
//! needs no second kind of socket. A drop of the session is the end of the stream (the
//! loopback listener takes one connection), so such runs do not resume.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::thread::{self, JoinHandle};

use rustix::event::{PollFd, PollFlags};

/// Bridges `tcp` with the session: what `from_session` gives goes into `tcp`, what `tcp` gives
/// goes to `to_session`. Each direction ends at its end of stream, passing it on (a TCP
/// half-close, or the pipe closed); the handle ends when both have.
pub fn bridge(
    tcp: TcpStream,
    from_session: OwnedFd,
    to_session: OwnedFd,
) -> io::Result<JoinHandle<()>> {
    let inward = tcp.try_clone()?;
    thread::Builder::new().name("accel-ssh-relay".into()).spawn(move || {
        let outward = thread::Builder::new().name("accel-ssh-relay".into()).spawn(move || {
            let mut tcp = tcp;
            let _ = copy(&mut tcp, &to_session);
            drop(to_session);
        });
        let mut from = std::fs::File::from(from_session);
        let mut buffer = vec![0u8; 64 << 10];
        let mut inward = inward;
        loop {
            match read_blocking(&mut from, &mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if inward.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = inward.shutdown(Shutdown::Write);
        if let Ok(outward) = outward {
            let _ = outward.join();
        }
    })
}

/// Copies `tcp` into `to` until the end of `tcp`'s stream, or a failure either side.
fn copy(tcp: &mut TcpStream, to: &OwnedFd) -> io::Result<()> {
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let n = match tcp.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let mut left = &buffer[..n];
        while !left.is_empty() {
            match rustix::io::write(to, left) {
                Ok(written) => left = &left[written..],
                Err(rustix::io::Errno::INTR) => {}
                // A descriptor someone else made non-blocking: wait until it takes more.
                Err(rustix::io::Errno::AGAIN) => wait(to, PollFlags::OUT),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// One read from an inherited descriptor, as if it were blocking (it may not be: never set
/// here, but someone else may have).
fn read_blocking(from: &mut std::fs::File, buffer: &mut [u8]) -> io::Result<usize> {
    loop {
        match from.read(buffer) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait(&*from, PollFlags::IN),
            result => return result,
        }
    }
}

/// Waits until `fd` is ready for `flags` (or has failed, which the next call says).
fn wait(fd: impl AsFd, flags: PollFlags) {
    let mut fds = [PollFd::new(&fd, flags)];
    let _ = rustix::event::poll(&mut fds, None);
}
