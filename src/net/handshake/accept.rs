//! The listening side's handshake, and the lobby it keeps: every connection that comes is
//! answered, and the first that proves it holds the key is taken.
//!
//! The listening side never blocks on one connection: a port scan, a client that sends
//! garbage, says nothing, or replays a recorded handshake, is dropped (and said so) while it
//! goes on waiting for the real peer.
//!
//! Nor can a flood of connections lock the peer out ([`Lobby`]): the kernel holds back
//! connections that have sent nothing (Linux's `TCP_DEFER_ACCEPT`); the connecting side's
//! first message is made before it connects, so that it follows the connection at once; and
//! when too many connections are pending, the least advanced go first, never the one that has
//! sent a valid first message while another has not.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;

use super::WRONG_KEY;
use crate::log::Log;
use crate::net::channel::{Channel, Frame};
use crate::net::key::Key;
use crate::net::socket::{self, Socket};
use crate::net::wire::{self, Cipher, Hello, Join, PREAMBLE_LEN, Preamble};
use crate::stop::Stop;

/// How long a connection may take to complete its handshake before the receiver drops it.
const HANDSHAKE_PATIENCE: Duration = Duration::from_secs(10);

/// Connections in the middle of their handshake at once; beyond, the least advanced is
/// dropped (see [`Lobby`]). Each holds a descriptor, and most systems allow 1024.
const MOST_PENDING: usize = 128;

/// Of them, from one address. The more, the longer a sender may take between connecting and
/// its first message while a flood from its own address (loopback) goes on.
const MOST_PER_SOURCE: usize = 64;

/// Connections accepted from one listener before those pending are heard again.
const ACCEPTS_AT_ONCE: usize = 64;

/// Dropped connections said one by one; more are counted.
const LISTED_DROPS: usize = 20;

/// accel's first handshake message is 73 bytes (the ephemeral key, 32, and the Hello, 25,
/// sealed behind a tag of 16); anything much longer is not accel's.
const LONGEST_HELLO: usize = 1024;

/// Why a connection the listening side accepted was not taken for its peer, and was dropped;
/// its words (`Display`) follow the connection's address in the warning that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stranger {
    /// It closed the connection before its first message.
    ClosedBefore,
    /// It closed the connection after its first message, before its Start frame.
    ClosedDuring,
    /// Its connection failed: how, in words.
    Broken(String),
    /// It sent no whole handshake within [`HANDSHAKE_PATIENCE`].
    Silent,
    /// It is not accel: it sent something else.
    NotAccel,
    /// Its first message is far longer than accel's.
    TooLong,
    /// It speaks another version of accel's protocol.
    OtherVersion,
    /// Its first message was made with another key.
    WrongKey,
    /// Its Hello, or the frame after it, is not one accel sends.
    Malformed,
    /// It goes on with a stream this side never had (the Welcome [`wire::UNKNOWN_STREAM`]).
    UnknownStream,
    /// It has another stream than this side's (the Welcome [`wire::BUSY`]).
    Busy,
    /// Its first message proved the key, but its Start frame failed authentication: altered,
    /// or the handshake a recording.
    Replayed,
    /// The Noise state would not turn to transport (it cannot, once the handshake is read).
    Handshake(String),
    /// Too many connections at once, and it had come the least far ([`Pending::sent`]).
    Crowded(&'static str),
    /// No descriptor was left to accept more (the system's words), and it had come the least
    /// far.
    NoDescriptor(String, &'static str),
}

impl Stranger {
    /// The Welcome that tells the connecting side why it is refused, when it is owed one.
    fn welcome(&self) -> Option<u64> {
        match self {
            Stranger::UnknownStream => Some(wire::UNKNOWN_STREAM),
            Stranger::Busy => Some(wire::BUSY),
            _ => None,
        }
    }
}

impl std::fmt::Display for Stranger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stranger::ClosedBefore => f.write_str("closed the connection before the handshake"),
            Stranger::ClosedDuring => f.write_str("closed the connection during the handshake"),
            Stranger::Broken(why) | Stranger::Handshake(why) => f.write_str(why),
            Stranger::Silent => {
                write!(f, "no handshake within {}s", HANDSHAKE_PATIENCE.as_secs())
            }
            Stranger::NotAccel => {
                f.write_str("not an accel sender (it sent something else; an accel --insecure?)")
            }
            Stranger::TooLong => f.write_str("not an accel sender (a handshake far too long)"),
            Stranger::OtherVersion => f.write_str("speaks another version of accel's protocol"),
            Stranger::WrongKey => f.write_str(WRONG_KEY),
            Stranger::Malformed => f.write_str("a malformed handshake"),
            Stranger::UnknownStream => {
                f.write_str("asks to go on with a stream this receiver never had")
            }
            Stranger::Busy => f.write_str("a sender of another stream"),
            Stranger::Replayed => f.write_str(
                "the key matched, but the first frame failed authentication: it was altered on \
                 the way, or the handshake replayed",
            ),
            Stranger::Crowded(sent) => write!(f, "too many connections at once, and {sent}"),
            Stranger::NoDescriptor(why, sent) => write!(f, "{why} to accept more, and {sent}"),
        }
    }
}

/// What the listening side takes: the stream a connection must name (`None` for the first
/// connection, which starts one), and the window it announces to one of several connections
/// (its reorder hold, from its `-m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terms {
    /// The stream a reconnecting sender, or a further connection of it, must name.
    pub stream: Option<[u8; 16]>,
    /// The most bytes a sender over several connections may have beyond what was confirmed.
    pub window: u64,
}

/// A connection the receiver has accepted and not yet decided about.
struct Pending {
    socket: Arc<Socket>,
    /// Its address, which connections from one host share.
    source: IpAddr,
    since: Instant,
    stage: Stage,
}

enum Stage {
    /// Waiting for the preamble and first message, of which `got` has arrived.
    Hello(Vec<u8>),
    /// The answer was sent; waiting for the Start frame.
    Confirm(Box<Channel>),
}

impl Pending {
    /// How far its handshake has come: when there are too many, the least advanced goes
    /// first. A connection that sent a valid first message proved it knows the key (or
    /// replays one that did), and comes before one that sent a part of one, which comes
    /// before one that sent nothing.
    fn progress(&self) -> u8 {
        match &self.stage {
            Stage::Hello(got) if got.is_empty() => 0,
            Stage::Hello(_) => 1,
            Stage::Confirm(_) => 2,
        }
    }

    /// What it has sent, for the message that drops it.
    fn sent(&self) -> &'static str {
        match self.progress() {
            0 => "it had sent nothing",
            1 => "it had sent a part of a handshake",
            _ => "it had not confirmed its handshake",
        }
    }
}

/// What became of a pending connection after it had something to say.
enum Verdict {
    /// Not yet decided.
    Waiting,
    /// It proved it holds the key: the session.
    Proved(Box<Channel>),
    /// Dropped, for this reason.
    Dropped(Stranger),
}

/// The connections a receiver has accepted and not yet decided about, and how many it has
/// dropped.
///
/// A flood of connections must not push out the real sender. Each connection is read as soon
/// as it is accepted (on loopback, the sender's first message is there already) and again
/// before it is dropped; when there are too many, the least advanced goes first (see
/// [`Pending::progress`]), the oldest among equals, and from the address with the most
/// connections waiting; no address may hold more than [`MOST_PER_SOURCE`] of them. So
/// strangers that say nothing, or half a handshake, only ever push out each other, and a
/// flood from one host leaves other hosts' connections alone. (All of loopback is one
/// address, 127.0.0.1: there, only the order of progress keeps the sender in.)
pub struct Lobby<'a> {
    listeners: &'a [OwnedFd],
    pending: Vec<Pending>,
    key: &'a Key,
    /// What it takes: the stream a reconnecting sender must name, and the window.
    terms: Terms,
    /// Connections dropped in this run so far (the first connection's wait, and later ones).
    dropped: &'a mut usize,
    log: &'a Log,
    stop: &'a Stop,
}

/// What became of a pending connection once its verdict was applied.
enum Settled {
    /// Still pending, where it was.
    Waiting,
    /// Dropped: another pending connection now holds its index.
    Gone,
    /// It proved it holds the key: the peer.
    Proved(Arc<Socket>, Box<Channel>),
}

impl Lobby<'_> {
    /// Applies `verdict` to the connection at `index`.
    fn settle(&mut self, index: usize, verdict: Verdict) -> Settled {
        match verdict {
            Verdict::Waiting => Settled::Waiting,
            Verdict::Proved(channel) => {
                Settled::Proved(self.pending.swap_remove(index).socket, channel)
            }
            Verdict::Dropped(why) => {
                self.drop_at(index, &why);
                Settled::Gone
            }
        }
    }

    /// Drops the connection at `index`, saying why (only the first [`LISTED_DROPS`]: a flood
    /// would bury everything else said).
    fn drop_at(&mut self, index: usize, why: &Stranger) {
        let gone = self.pending.swap_remove(index);
        *self.dropped += 1;
        if *self.dropped <= LISTED_DROPS {
            self.log.warn(format_args!(
                "{}: {why}; dropped it, still waiting for the sender",
                gone.socket.peer()
            ));
        }
        if *self.dropped == LISTED_DROPS {
            self.log.warn(format_args!(
                "more connections may be dropped; they are counted, no longer listed"
            ));
        }
    }

    /// Takes a new connection: reads what it has sent, then thins the lobby out if there are too
    /// many.
    fn admit(&mut self, socket: Socket) -> Option<(Arc<Socket>, Box<Channel>)> {
        let source = socket.peer().ip().to_canonical();
        self.pending.push(Pending {
            socket: Arc::new(socket),
            source,
            since: Instant::now(),
            stage: Stage::Hello(Vec::new()),
        });
        let index = self.pending.len() - 1;
        let verdict = hear(&mut self.pending[index], self.key, self.terms, self.stop);
        if let Settled::Proved(socket, channel) = self.settle(index, verdict) {
            return Some((socket, channel));
        }
        self.thin_out(source)
    }

    /// Drops the least advanced connection, the oldest among equals, because `why` (no
    /// descriptor left for another).
    fn shed(&mut self, why: String) {
        let victim = (0..self.pending.len())
            .min_by_key(|&index| (self.pending[index].progress(), self.pending[index].since))
            .expect("one pending");
        let why = Stranger::NoDescriptor(why, self.pending[victim].sent());
        self.drop_at(victim, &why);
    }

    /// Drops connections while `source` holds more than [`MOST_PER_SOURCE`], or all of
    /// them are more than [`MOST_PENDING`]: the least advanced first. Each is read once more
    /// before it goes, in case its handshake arrived meanwhile.
    fn thin_out(&mut self, source: IpAddr) -> Option<(Arc<Socket>, Box<Channel>)> {
        loop {
            let mut per_source: HashMap<IpAddr, usize> = HashMap::new();
            for pending in &self.pending {
                *per_source.entry(pending.source).or_default() += 1;
            }
            let crowded = per_source.get(&source).is_some_and(|&n| n > MOST_PER_SOURCE);
            if !crowded && self.pending.len() <= MOST_PENDING {
                return None;
            }
            let (victim, _) = self
                .pending
                .iter()
                .enumerate()
                .filter(|(_, pending)| !crowded || pending.source == source)
                .min_by_key(|(_, pending)| {
                    (pending.progress(), Reverse(per_source[&pending.source]), pending.since)
                })
                .expect("too many, so some");
            let before = self.pending[victim].progress();
            let verdict = hear(&mut self.pending[victim], self.key, self.terms, self.stop);
            match self.settle(victim, verdict) {
                Settled::Proved(socket, channel) => return Some((socket, channel)),
                Settled::Gone => continue,
                Settled::Waiting if self.pending[victim].progress() > before => continue,
                Settled::Waiting => {
                    let why = Stranger::Crowded(self.pending[victim].sent());
                    self.drop_at(victim, &why);
                }
            }
        }
    }
}

/// The first connection on `listeners` that proves it holds `key` (any connection at all when
/// `key` is `None`: `--insecure`), and the socket's peer. Drops the others, saying why to
/// `log`. Gives up at `deadline` with the reason, which counts the connections dropped.
/// With `terms`' stream, only a sender that goes on with that stream is taken (a
/// reconnection, or a further connection of a stream over several).
/// `dropped` counts the connections dropped over the run, so that only the first few are
/// said, one by one.
pub fn accept_sender(
    listeners: &[OwnedFd],
    key: Option<&Key>,
    terms: Terms,
    deadline: Option<Instant>,
    dropped: &mut usize,
    log: &Log,
    stop: &Stop,
) -> Result<(Arc<Socket>, Option<Channel>), String> {
    let Some(key) = key else {
        return accept_first(listeners, deadline, stop).map(|socket| (Arc::new(socket), None));
    };
    let mut lobby = Lobby::open(listeners, key, terms, dropped, log, stop);
    let (socket, channel) = lobby.next_sender(deadline)?;
    Ok((socket, Some(*channel)))
}

impl<'a> Lobby<'a> {
    /// A lobby on `listeners` for senders that prove `key` and meet `terms`; `dropped`
    /// counts the connections dropped over the run, said to `log`.
    pub fn open(
        listeners: &'a [OwnedFd],
        key: &'a Key,
        terms: Terms,
        dropped: &'a mut usize,
        log: &'a Log,
        stop: &'a Stop,
    ) -> Lobby<'a> {
        for listener in listeners {
            // An accel sender speaks first, at once: a connection is worth accepting once it
            // has.
            crate::sys::accept_only_with_data(listener.as_fd(), HANDSHAKE_PATIENCE);
        }
        Lobby { listeners, pending: Vec::new(), key, terms, dropped, log, stop }
    }

    /// Takes a connection made before the run (one carried by the ssh session, see
    /// `socket::carried`) as if it had been accepted: it must prove the key as any other.
    pub fn take(&mut self, socket: Socket) {
        let source = socket.peer().ip().to_canonical();
        let socket = Arc::new(socket);
        self.pending.push(Pending {
            socket,
            source,
            since: Instant::now(),
            stage: Stage::Hello(Vec::new()),
        });
    }

    /// The next connection that proves the key and meets the terms, and its socket; the
    /// others are dropped, said so. Connections still in their handshake stay in the lobby
    /// for the next call (the further connections of a stream over several come together).
    /// Gives up at `deadline` with the reason, which counts the connections dropped.
    pub fn next_sender(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<(Arc<Socket>, Box<Channel>), String> {
        loop {
            let now = Instant::now();
            if deadline.is_some_and(|deadline| now >= deadline) {
                let also = match *self.dropped {
                    0 => String::new(),
                    1 => " (1 connection was dropped)".into(),
                    n => format!(" ({n} connections were dropped)"),
                };
                return Err(format!("no sender came in time{also}"));
            }
            let next =
                self.pending.iter().map(|p| p.since + HANDSHAKE_PATIENCE).chain(deadline).min();
            let ready =
                wait(self.listeners, self.pending.iter().map(|p| p.socket.fd()), next, self.stop)?;
            let (listening, talking) = ready.split_at(self.listeners.len());
            // From the last: swap_remove moves only connections already looked at.
            for index in (0..self.pending.len()).rev() {
                let verdict = if talking[index] {
                    hear(&mut self.pending[index], self.key, self.terms, self.stop)
                } else if self.pending[index].since.elapsed() >= HANDSHAKE_PATIENCE {
                    Verdict::Dropped(Stranger::Silent)
                } else {
                    Verdict::Waiting
                };
                if let Settled::Proved(socket, channel) = self.settle(index, verdict) {
                    return Ok(self.found(socket, channel));
                }
            }
            for (listener, _) in self.listeners.iter().zip(listening).filter(|(_, ready)| **ready) {
                // A bounded number at a time: those already pending are heard between.
                for _ in 0..ACCEPTS_AT_ONCE {
                    let socket = match socket::accept(listener) {
                        Ok(Some(socket)) => socket,
                        Ok(None) => break,
                        // Out of descriptors with connections pending: the least advanced goes,
                        // and the next round accepts again.
                        Err(e)
                            if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
                                && !self.pending.is_empty() =>
                        {
                            self.shed(crate::words::describe(&e));
                            break;
                        }
                        Err(e) => return Err(format!("accept: {}", crate::words::describe(&e))),
                    };
                    if let Some((socket, channel)) = self.admit(socket) {
                        return Ok(self.found(socket, channel));
                    }
                }
            }
        }
    }

    /// From now on, takes what `terms` say (the stream its first connection started): the
    /// further connections that came before, waiting unanswered, are answered now.
    pub fn expect(&mut self, terms: Terms) {
        self.terms = terms;
        for index in (0..self.pending.len()).rev() {
            let pending = &mut self.pending[index];
            let Stage::Hello(got) = &pending.stage else { continue };
            if got.is_empty() {
                continue;
            }
            // Answered, it waits for its Start frame, which the next call hears.
            match answer_hello(&pending.socket, got, self.key, terms, self.stop) {
                Ok(Some(channel)) => pending.stage = Stage::Confirm(channel),
                Ok(None) => {}
                Err(why) => self.drop_at(index, &why),
            }
        }
    }

    /// A sender proved itself: said, if many were dropped before it.
    fn found(&self, socket: Arc<Socket>, channel: Box<Channel>) -> (Arc<Socket>, Box<Channel>) {
        if *self.dropped > LISTED_DROPS {
            self.log.warn(format_args!(
                "{} connections were dropped before the sender came",
                *self.dropped
            ));
        }
        (socket, channel)
    }
}

/// `--insecure`: the first connection that comes.
fn accept_first(
    listeners: &[OwnedFd],
    deadline: Option<Instant>,
    stop: &Stop,
) -> Result<Socket, String> {
    loop {
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            return Err("no sender came in time".into());
        }
        wait(listeners, std::iter::empty(), deadline, stop)?;
        for listener in listeners {
            if let Some(socket) = socket::accept(listener).map_err(|e| format!("accept: {e}"))? {
                return Ok(socket);
            }
        }
    }
}

/// Waits until a listener or a pending connection is ready, or `until`; which are ready, in
/// that order.
fn wait<'a>(
    listeners: &[OwnedFd],
    pending: impl Iterator<Item = BorrowedFd<'a>>,
    until: Option<Instant>,
    stop: &Stop,
) -> Result<Vec<bool>, String> {
    let timeout = until.map(|at| {
        rustix::event::Timespec::try_from(at.saturating_duration_since(Instant::now()))
            .unwrap_or_default()
    });
    let mut fds: Vec<PollFd<'_>> = listeners
        .iter()
        .map(|fd| PollFd::new(fd, PollFlags::IN))
        .chain(pending.map(|fd| PollFd::from_borrowed_fd(fd, PollFlags::IN)))
        .collect();
    loop {
        match rustix::event::poll(&mut fds, timeout.as_ref()) {
            Ok(_) => return Ok(fds.iter().map(|fd| !fd.revents().is_empty()).collect()),
            Err(Errno::INTR) => stop.check().map_err(|e| e.to_string())?,
            Err(e) => return Err(format!("waiting for a sender: {e}")),
        }
    }
}

/// Reads what a pending connection sent, and goes as far with it as that allows; an answer
/// it is owed is written under the run's `stop`.
fn hear(pending: &mut Pending, key: &Key, terms: Terms, stop: &Stop) -> Verdict {
    match &mut pending.stage {
        Stage::Hello(got) => {
            let mut buf = [0u8; 2048];
            match pending.socket.read_now(&mut buf) {
                Ok(Some(0)) => {
                    return Verdict::Dropped(Stranger::ClosedBefore);
                }
                Ok(Some(n)) => got.extend_from_slice(&buf[..n]),
                Ok(None) => return Verdict::Waiting,
                Err(e) => return Verdict::Dropped(Stranger::Broken(crate::words::describe(&e))),
            }
            match answer_hello(&pending.socket, got, key, terms, stop) {
                Ok(Some(channel)) => {
                    pending.stage = Stage::Confirm(channel);
                    confirm(&mut pending.stage)
                }
                Ok(None) => Verdict::Waiting,
                Err(why) => Verdict::Dropped(why),
            }
        }
        Stage::Confirm(channel) => match channel.read_sealed_now() {
            Ok(Some(0)) => Verdict::Dropped(Stranger::ClosedDuring),
            Ok(_) => confirm(&mut pending.stage),
            Err(e) => Verdict::Dropped(Stranger::Broken(crate::words::describe(&e))),
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
            Verdict::Proved(channel)
        }
        Ok(Some(_)) => Verdict::Dropped(Stranger::Malformed),
        // Its first message proved the key (or replayed one that did); only the session's
        // keys open this frame, so it was altered, or the handshake is a recording.
        Err(_) => Verdict::Dropped(Stranger::Replayed),
    }
}

/// Once the preamble and first message are in: checks them and answers; `None` until then.
fn answer_hello(
    socket: &Arc<Socket>,
    got: &[u8],
    key: &Key,
    terms: Terms,
    stop: &Stop,
) -> Result<Option<Box<Channel>>, Stranger> {
    let preamble = match wire::read_preamble(&got[..got.len().min(PREAMBLE_LEN)]) {
        Preamble::Accel(_, version) if version.history && test_older() => Preamble::OtherVersion,
        preamble => preamble,
    };
    let (cipher, version) = match preamble {
        Preamble::Foreign => return Err(Stranger::NotAccel),
        _ if got.len() < PREAMBLE_LEN + 2 => return Ok(None),
        Preamble::OtherVersion => {
            // Our own preamble and an empty answer, as to a wrong key: an accel of another
            // version reads the preamble, and says that the versions differ (this one says
            // "another version of accel's protocol" to such an answer), instead of a
            // connection closed without a word.
            let mut refusal = wire::preamble(Cipher::fastest_here()).to_vec();
            refusal.extend_from_slice(&[0, 0]);
            let _ = socket.write_all(&refusal, stop, Some(Instant::now() + Duration::from_secs(1)));
            return Err(Stranger::OtherVersion);
        }
        Preamble::Accel(cipher, version) => (cipher, version),
    };
    let several = version.several;
    let len = usize::from(u16::from_be_bytes([got[PREAMBLE_LEN], got[PREAMBLE_LEN + 1]]));
    if len > LONGEST_HELLO {
        return Err(Stranger::TooLong);
    }
    let Some(message) = got.get(PREAMBLE_LEN + 2..PREAMBLE_LEN + 2 + len) else {
        return Ok(None);
    };
    let mut noise = wire::handshake_of(cipher, key, false, version);
    let mut payload = [0u8; LONGEST_HELLO];
    let Ok(n) = noise.read_message(message, &mut payload) else {
        // Say so, so that the sender can tell the user; then drop it.
        let mut refusal = wire::preamble_of(cipher, version).to_vec();
        refusal.extend_from_slice(&[0, 0]);
        let _ = socket.write_all(&refusal, stop, Some(Instant::now() + Duration::from_secs(1)));
        return Err(Stranger::WrongKey);
    };
    let (hello, join) = match several {
        true => Join::decode_hello(&payload[..n]).map(|(hello, join)| (hello, Some(join))),
        false => Hello::decode(&payload[..n]).map(|hello| (hello, None)),
    }
    .ok_or(Stranger::Malformed)?;
    // A first connection starts a stream; a reconnection goes on with ours. A stream exists
    // from the moment its first session is confirmed, at the sender's end too: when the
    // connection dropped before that frame came, the sender comes back going on with a
    // stream this receiver never had, from byte 0, which is a stream that starts now. Any
    // further on, the stream was another receiver's (this one was restarted).
    // A further connection of a stream over several (index above 0) joins a stream that
    // exists: the first connection started it.
    let further = join.is_some_and(|join| join.index > 0);
    // A further connection that comes before the first was confirmed (the sender dials it
    // the moment its first is answered) waits, unanswered, until the lobby knows the
    // stream ([`Lobby::expect`]).
    if terms.stream.is_none() && further {
        return Ok(None);
    }
    let refusal = match terms.stream {
        None if hello.resuming && hello.offset > 0 => Some(Stranger::UnknownStream),
        Some(ours) if hello.stream != ours || !(hello.resuming || further) => Some(Stranger::Busy),
        _ => None,
    };
    let welcome = refusal.as_ref().and_then(Stranger::welcome).unwrap_or(0);
    // The receiver's own bound on the connections it takes, and its window.
    let join = join.map(|join| Join {
        streams: join.streams.min(wire::MOST_STREAMS),
        window: terms.window,
        ..join
    });
    let mut message = vec![0u8; wire::MAX_MESSAGE];
    let written = match join {
        Some(join) => noise.write_message(&join.encode_welcome(welcome), &mut message),
        None => noise.write_message(&welcome.to_be_bytes(), &mut message),
    };
    let len2 = written.expect("a short message");
    let mut answer = wire::preamble_of(cipher, version).to_vec();
    answer.extend_from_slice(&(len2 as u16).to_be_bytes());
    answer.extend_from_slice(&message[..len2]);
    let deadline = Instant::now() + HANDSHAKE_PATIENCE;
    let answered = socket.write_all(&answer, stop, Some(deadline));
    answered.map_err(|e| Stranger::Broken(crate::words::describe(&e)))?;
    if let Some(refusal) = refusal {
        return Err(refusal);
    }
    let noise = noise.into_transport_mode();
    let noise = noise.map_err(|e| Stranger::Handshake(format!("handshake: {e}")))?;
    let leftover = &got[PREAMBLE_LEN + 2 + len..];
    let mut channel = Channel::new(Arc::clone(socket), noise, leftover);
    channel.opened_by(&hello);
    if let Some(join) = join {
        channel.join(join);
    }
    Ok(Some(Box::new(channel)))
}

/// The debug builds' test hook, `ACCEL_TEST_WIRE=5`: this receiver answers as one of wire
/// version 5 does (an accel from before the compressed frames kept their history): the
/// preamble of version 6 or 7 is another version's, answered with version 4's and an empty
/// message, and the connection dropped; so that the tests can show what a compressing sender
/// makes of an older receiver (`--compress auto` dials again without compression). `false`
/// in release builds, and when not asked.
fn test_older() -> bool {
    #[cfg(debug_assertions)]
    {
        static ASKED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ASKED.get_or_init(|| std::env::var("ACCEL_TEST_WIRE").is_ok_and(|asked| asked == "5"))
    }
    #[cfg(not(debug_assertions))]
    false
}
