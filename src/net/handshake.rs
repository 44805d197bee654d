//! Establishing a session: the sender's side of the handshake, and the receiver's, which
//! listens, handshakes with every connection that comes, and takes the first that proves it
//! holds the key.
//!
//! The receiver never blocks on one connection: a port scan, a client that sends garbage,
//! says nothing, or replays a recorded handshake, is dropped (and said so) while the receiver
//! goes on waiting for the real sender. Noise NNpsk0 authenticates the sender's first message
//! against the key, but a recorded first message can be replayed; so the sender counts as
//! authenticated only once its Start frame, sealed with the keys of this very session, has
//! been opened. Only then does the run begin, so no byte from an unauthenticated peer is
//! ever written.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;

use super::channel::{Channel, Frame};
use super::key::Key;
use super::socket::{self, Socket};
use super::wire::{self, Cipher, Hello, Kind, PREAMBLE_LEN, Preamble};
use crate::log::Log;
use crate::stop::Stop;

/// How long a connection may take to complete its handshake before the receiver drops it.
const HANDSHAKE_PATIENCE: Duration = Duration::from_secs(10);

/// Connections in the middle of their handshake at once; beyond, the oldest is dropped.
const MOST_PENDING: usize = 32;

/// The largest first handshake message accel sends is 80 bytes; anything much longer is not
/// accel's.
const LONGEST_HELLO: usize = 1024;

/// The wrong key, in the words both ends use.
pub const WRONG_KEY: &str = "authentication failed: the peers do not share a key";

/// The sender's handshake on a connected `socket`: on success, the session, whose Start frame
/// has been sent. The error says why, for `accel: HOST:PORT: <why>`.
pub fn initiate(
    socket: Socket,
    key: &Key,
    stop: &Stop,
    deadline: Instant,
) -> Result<Channel, String> {
    let io_error = |error: io::Error| match error.kind() {
        io::ErrorKind::TimedOut => {
            "no answer to the handshake in time (a receiver with --insecure does not answer)"
                .to_owned()
        }
        io::ErrorKind::UnexpectedEof => {
            "the receiver closed the connection during the handshake (is it accel, with the same \
             --insecure choice?)"
                .to_owned()
        }
        _ => format!("handshake: {}", crate::endpoint::describe(&error)),
    };
    let cipher = Cipher::fastest_here();
    let mut noise = wire::handshake(cipher, key, true);
    let mut stream = [0u8; 16];
    super::cipher::fill_random(&mut stream).map_err(|error| error.to_string())?;
    let hello = Hello { stream, offset: 0 };
    let mut message = vec![0u8; wire::MAX_MESSAGE];
    let len = noise.write_message(&hello.encode(), &mut message).expect("a short message");
    let mut first = wire::preamble(cipher).to_vec();
    first.extend_from_slice(&(len as u16).to_be_bytes());
    first.extend_from_slice(&message[..len]);
    socket.write_all(&first, stop, Some(deadline)).map_err(io_error)?;

    let mut head = [0u8; PREAMBLE_LEN + 2];
    read_exact(&socket, &mut head, stop, deadline).map_err(io_error)?;
    match wire::read_preamble(&head[..PREAMBLE_LEN]) {
        Preamble::Accel(answered) if answered == cipher => {}
        Preamble::Accel(_) | Preamble::OtherVersion => {
            return Err("the receiver speaks another version of accel's protocol".into());
        }
        Preamble::Foreign => {
            return Err("not an accel receiver (it answered something else)".into());
        }
    }
    let len = usize::from(u16::from_be_bytes([head[PREAMBLE_LEN], head[PREAMBLE_LEN + 1]]));
    if len == 0 {
        // The receiver's word that our first message failed; unauthenticated, but whoever
        // could forge it could as well cut the connection.
        return Err(WRONG_KEY.into());
    }
    let mut answer = vec![0u8; len];
    read_exact(&socket, &mut answer, stop, deadline).map_err(io_error)?;
    let mut welcome = [0u8; 64];
    let got = noise.read_message(&answer, &mut welcome).map_err(|_| WRONG_KEY.to_owned())?;
    match welcome[..got].try_into().map(u64::from_be_bytes) {
        Ok(0) => {}
        Ok(offset) => return Err(format!("the receiver asks to resume at byte {offset}")),
        Err(_) => return Err("a malformed handshake from the receiver".into()),
    }
    let noise = noise.into_transport_mode().map_err(|e| format!("handshake: {e}"))?;
    let mut channel = Channel::new(Arc::new(socket), noise, &[]);
    channel.send_frame(Kind::Start, &[], stop, Some(deadline)).map_err(io_error)?;
    Ok(channel)
}

/// Reads exactly `buf.len()` bytes.
fn read_exact(socket: &Socket, buf: &mut [u8], stop: &Stop, deadline: Instant) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        match socket.read(&mut buf[got..], stop, Some(deadline))? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => got += n,
        }
    }
    Ok(())
}

/// A connection the receiver has accepted and not yet decided about.
struct Pending {
    socket: Arc<Socket>,
    since: Instant,
    stage: Stage,
}

enum Stage {
    /// Waiting for the preamble and first message, of which `got` has arrived.
    Hello(Vec<u8>),
    /// The answer was sent; waiting for the Start frame.
    Confirm(Box<Channel>),
}

/// What became of a pending connection after it had something to say.
enum Verdict {
    /// Not yet decided.
    Waiting,
    /// It proved it holds the key: the session.
    Sender(Box<Channel>),
    /// Dropped, for this reason.
    Dropped(String),
}

/// The first connection on `listeners` that proves it holds `key` (any connection at all when
/// `key` is `None`: `--insecure`), and the socket's peer. Drops the others, saying why to
/// `log`. Gives up at `deadline` with the reason; `dropped` counts the connections dropped.
pub fn accept_sender(
    listeners: &[OwnedFd],
    key: Option<&Key>,
    deadline: Option<Instant>,
    log: &Log,
    stop: &Stop,
) -> Result<(Arc<Socket>, Option<Channel>), String> {
    let mut pending: Vec<Pending> = Vec::new();
    let mut dropped = 0usize;
    loop {
        let now = Instant::now();
        let next = pending.iter().map(|p| p.since + HANDSHAKE_PATIENCE).chain(deadline).min();
        if deadline.is_some_and(|deadline| now >= deadline) {
            let also = match dropped {
                0 => String::new(),
                1 => " (1 connection was dropped)".into(),
                n => format!(" ({n} connections were dropped)"),
            };
            return Err(format!("no sender came in time{also}"));
        }
        let timeout = next.map(|at| {
            rustix::event::Timespec::try_from(at.saturating_duration_since(now)).unwrap_or_default()
        });
        let mut fds: Vec<PollFd<'_>> = listeners
            .iter()
            .map(|fd| PollFd::new(fd, PollFlags::IN))
            .chain(pending.iter().map(|p| PollFd::from_borrowed_fd(p.socket.fd(), PollFlags::IN)))
            .collect();
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(Errno::INTR) => {
                stop.check().map_err(|e| e.to_string())?;
                continue;
            }
            Err(e) => return Err(format!("waiting for a sender: {e}")),
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        let (listening, talking) = ready.split_at(listeners.len());
        // From the last: swap_remove moves only connections already looked at.
        for index in (0..pending.len()).rev() {
            let verdict = if talking[index] {
                hear(&mut pending[index], key.expect("pending only with a key"))
            } else if pending[index].since.elapsed() >= HANDSHAKE_PATIENCE {
                Verdict::Dropped(format!("no handshake within {}s", HANDSHAKE_PATIENCE.as_secs()))
            } else {
                Verdict::Waiting
            };
            match verdict {
                Verdict::Waiting => {}
                Verdict::Sender(channel) => {
                    let socket = pending.swap_remove(index).socket;
                    return Ok((socket, Some(*channel)));
                }
                Verdict::Dropped(why) => {
                    let gone = pending.swap_remove(index);
                    dropped += 1;
                    log.warn(format_args!(
                        "{}: {why}; dropped it, still waiting for the sender",
                        gone.socket.peer()
                    ));
                }
            }
        }
        for (listener, _) in listeners.iter().zip(listening).filter(|(_, ready)| **ready) {
            while let Some(socket) = socket::accept(listener).map_err(|e| format!("accept: {e}"))? {
                if key.is_none() {
                    return Ok((Arc::new(socket), None));
                }
                if pending.len() >= MOST_PENDING {
                    let oldest = pending.remove(0);
                    dropped += 1;
                    log.warn(format_args!(
                        "{}: too many connections at once; dropped it, still waiting for the \
                         sender",
                        oldest.socket.peer()
                    ));
                }
                pending.push(Pending {
                    socket: Arc::new(socket),
                    since: Instant::now(),
                    stage: Stage::Hello(Vec::new()),
                });
            }
        }
    }
}

/// Reads what a pending connection sent, and goes as far with it as that allows.
fn hear(pending: &mut Pending, key: &Key) -> Verdict {
    match &mut pending.stage {
        Stage::Hello(got) => {
            let mut buf = [0u8; 2048];
            match pending.socket.read(&mut buf, &Stop::default(), Some(Instant::now())) {
                Ok(0) => {
                    return Verdict::Dropped("closed the connection before the handshake".into());
                }
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return Verdict::Waiting,
                Err(e) => return Verdict::Dropped(crate::endpoint::describe(&e)),
            }
            match answer_hello(&pending.socket, got, key) {
                Ok(Some(channel)) => {
                    pending.stage = Stage::Confirm(channel);
                    confirm(&mut pending.stage)
                }
                Ok(None) => Verdict::Waiting,
                Err(why) => Verdict::Dropped(why),
            }
        }
        Stage::Confirm(channel) => match channel.fill_now() {
            Ok(Some(0)) => Verdict::Dropped("closed the connection during the handshake".into()),
            Ok(_) => confirm(&mut pending.stage),
            Err(e) => Verdict::Dropped(crate::endpoint::describe(&e)),
        },
    }
}

/// With the answer sent: whether the Start frame has come, sealed with this session's keys.
fn confirm(stage: &mut Stage) -> Verdict {
    let Stage::Confirm(channel) = stage else { unreachable!("confirming") };
    match channel.open_next(&mut []) {
        Ok(None) => Verdict::Waiting,
        Ok(Some(Frame::Start)) => {
            let Stage::Confirm(channel) = std::mem::replace(stage, Stage::Hello(Vec::new())) else {
                unreachable!("confirming")
            };
            Verdict::Sender(channel)
        }
        Ok(Some(_)) => Verdict::Dropped("a malformed handshake".into()),
        // A replayed first message passes the key check; only the session's keys open this.
        Err(_) => Verdict::Dropped(WRONG_KEY.into()),
    }
}

/// Once the preamble and first message are in: checks them and answers; `None` until then.
fn answer_hello(
    socket: &Arc<Socket>,
    got: &[u8],
    key: &Key,
) -> Result<Option<Box<Channel>>, String> {
    let cipher = match wire::read_preamble(&got[..got.len().min(PREAMBLE_LEN)]) {
        Preamble::Foreign => {
            return Err("not an accel sender (it sent something else; an accel --insecure?)".into());
        }
        _ if got.len() < PREAMBLE_LEN + 2 => return Ok(None),
        Preamble::OtherVersion => {
            return Err("speaks another version of accel's protocol".into());
        }
        Preamble::Accel(cipher) => cipher,
    };
    let len = usize::from(u16::from_be_bytes([got[PREAMBLE_LEN], got[PREAMBLE_LEN + 1]]));
    if len > LONGEST_HELLO {
        return Err("not an accel sender (a handshake far too long)".into());
    }
    let Some(message) = got.get(PREAMBLE_LEN + 2..PREAMBLE_LEN + 2 + len) else {
        return Ok(None);
    };
    let mut noise = wire::handshake(cipher, key, false);
    let mut payload = [0u8; LONGEST_HELLO];
    let Ok(n) = noise.read_message(message, &mut payload) else {
        // Say so, so that the sender can tell the user; then drop it.
        let mut refusal = wire::preamble(cipher).to_vec();
        refusal.extend_from_slice(&[0, 0]);
        let _ = socket.write_all(
            &refusal,
            &Stop::default(),
            Some(Instant::now() + Duration::from_secs(1)),
        );
        return Err(WRONG_KEY.into());
    };
    match Hello::decode(&payload[..n]) {
        Some(Hello { offset: 0, .. }) => {}
        Some(Hello { offset, .. }) => return Err(format!("asks to resume at byte {offset}")),
        None => return Err("a malformed handshake".into()),
    }
    let mut message = vec![0u8; wire::MAX_MESSAGE];
    let len2 = noise.write_message(&0u64.to_be_bytes(), &mut message).expect("a short message");
    let mut answer = wire::preamble(cipher).to_vec();
    answer.extend_from_slice(&(len2 as u16).to_be_bytes());
    answer.extend_from_slice(&message[..len2]);
    let deadline = Instant::now() + HANDSHAKE_PATIENCE;
    socket
        .write_all(&answer, &Stop::default(), Some(deadline))
        .map_err(|e| crate::endpoint::describe(&e))?;
    let noise = noise.into_transport_mode().map_err(|e| format!("handshake: {e}"))?;
    let leftover = &got[PREAMBLE_LEN + 2 + len..];
    Ok(Some(Box::new(Channel::new(Arc::clone(socket), noise, leftover))))
}
