//! Between hosts: a network peer as one more endpoint, authenticated, encrypted, and with
//! truncation detected.
//!
//! `zfs send | accel --to HOST:PORT --key-file K` sends the stream to
//! `accel --from [ADDR:]PORT --key-file K | zfs receive`. Both ends share a 32-byte secret,
//! the key file ([`key`]). The transport is the Noise protocol framework (`snow`), pattern
//! `NNpsk0` with X25519, SHA-256, and AES-256-GCM where the sender's CPU has AES
//! instructions, else ChaCha20-Poly1305 ([`wire`]): ephemeral keys for forward secrecy, the
//! shared key for authentication, one round trip. The ciphers are `aws-lc-rs`'s, given to
//! snow through [`cipher`]: they seal and open out of place, so a payload goes from the
//! buffer into the outgoing message (and back) without a copy, with the widest AES
//! instructions the CPU has. TLS 1.3 with a pre-shared key was the other standard
//! candidate, but rustls does not offer external pre-shared keys.
//!
//! The parts, in the order a run meets them:
//! - [`address`]: `HOST:PORT`, `[IPv6]:PORT`, `:PORT`, resolved once at start.
//! - [`Network::open`], at start, with the other endpoints: reads the key file, resolves the
//!   receiver's name, binds the listening sockets, so that a wrong key file, an unknown name
//!   or a port in use is said before anything else happens. Each peer is a [`Link`], still
//!   unconnected, which the run makes an endpoint like any other.
//! - [`Network::establish`], once signals are handled and before the clock starts: connects
//!   (`dial.rs`: tried again while the receiver refuses, for `--connect-for`) and handshakes
//!   ([`handshake`]); the receiver waits (until `--accept-timeout`) for the first connection
//!   that proves it holds the key, dropping any other. Each secure peer's [`Link`] is then
//!   tended by a thread of its own, which gets a dropped connection back ([`link`]).
//! - The run: the engine reads and writes the endpoints as it does any other. A plain peer
//!   (`--insecure`) is accel's own O_NONBLOCK socket, read, written and spliced like a pipe;
//!   an encrypted peer reads and writes through its [`channel`], so through memory.
//! - The end of the stream is part of the run: once a network output has every byte and the
//!   input ended cleanly, its own thread sends the End frame with the byte count and waits
//!   for the receiver's Ack ([`Link::end_stream`]), each output on its own, under the stall
//!   watchdog and the signals like any other wait. After the run, the receiver of a stream
//!   that did not end cleanly is told why it stops ([`Link::abort`]); the words are the run's
//!   to choose. The receiver's input ends cleanly only at an End whose count matches; a
//!   connection that ends before it is a read error (status 1).
//! - Delivered means confirmed: while the stream goes, the receiver tells the sender how many
//!   bytes its outputs have taken ([`Confirming`], at most every [`DELIVERED_EVERY`]), and
//!   it sends the Ack only once they have taken every byte ([`Link::acknowledge_end`]). The
//!   sender counts as delivered only what was confirmed; the rest it calls sent
//!   ([`Delivery`](crate::meter::Delivery)). Plain TCP (`--insecure`) has no frames, so nothing is confirmed there.
//!
//! Failures before the run (name not found, refused, unreachable, no answer, wrong key, port
//! in use, no sender in time) end accel with status 6 before a byte is read; failures during
//! it are the input's (1) or an output's (3), as for any endpoint.

pub mod address;
pub mod channel;
pub mod cipher;
pub mod compress;
pub mod congestion;
mod dial;
pub mod handshake;
pub mod key;
pub mod link;
pub mod socket;
pub mod wire;

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::log::Log;
use crate::meter::Meter;
use crate::stop::Stop;
use crate::words::describe;
use address::Address;
use channel::Channel;
use compress::Compress;
pub use congestion::Congestion;
use dial::Dialer;
use handshake::Opening;
use key::Key;
pub use link::{Link, Resume, Role, resumed_at};
use link::{Listening, Reconnect};

/// How long a sender may take to connect and handshake when `--stall-timeout` does not say.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(30);

/// How long a sender tries its first connection while the receiver refuses it, when
/// `--connect-for` does not say: a receiver started through ssh a moment after its sender
/// (a cron job's two commands) listens within a few seconds.
pub const CONNECT_FOR: Duration = Duration::from_secs(10);

/// How often, at most, a receiver tells its sender what its outputs have taken: a frame of
/// 45 bytes, 20 times a second at most, costs nothing on any link, and a sender's stall
/// watchdog (seconds) sees each.
pub const DELIVERED_EVERY: Duration = Duration::from_millis(50);

/// When the sender asks (its buffer fills with what is not confirmed), the receiver says
/// what its outputs have taken this often instead, until they have taken every byte the
/// sender had sent when it asked, for at most [`EAGER_ROUNDS`] rounds: on a fast link, 50 ms would leave the sender's buffer
/// full and its input waiting.
pub const EAGER_EVERY: Duration = Duration::from_millis(1);

/// See [`EAGER_EVERY`].
const EAGER_ROUNDS: u32 = 50;

/// How this accel meets its peers, as the command line says: the sender it waits for
/// (`--from`), the key that proves both ends, and how long it waits, tries, and resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peering {
    /// `--from`: receive the input from a sender. (Each `--to` is one of the run's outputs,
    /// given to [`Network::open`].)
    pub from: Option<Address>,
    /// `--key-file`, or the file `ACCEL_KEY_FILE` names; `None` with `--insecure`.
    pub key_file: Option<PathBuf>,
    /// The key file is the one `ACCEL_KEY_FILE` names: its errors say so.
    pub key_file_from_env: bool,
    /// `--insecure`: plain TCP.
    pub insecure: bool,
    /// `--accept-timeout`: how long a receiver waits for its sender.
    pub accept_timeout: Option<Duration>,
    /// `--connect-for`: how long a sender tries its first connection while the receiver
    /// refuses it ([`CONNECT_FOR`] by default).
    pub connect_for: Duration,
    /// `--reconnect-for`, `--heartbeat`.
    pub resume: Resume,
    /// `--congestion`: the TCP congestion control accel's own sockets ask for.
    pub congestion: Congestion,
    /// A key given in memory instead of a key file: the fresh key of a run started through
    /// ssh, which never touches a file.
    pub key: Option<Arc<Key>>,
    /// Listening sockets bound before the run, for `from`, which [`Network::open`] takes
    /// over instead of binding: `accel --serve-ssh` binds first, so as to say its port
    /// through ssh, as a socket-activated server is handed its sockets.
    pub bound: Vec<i32>,
    /// `--compress`: what each `--to` does with its frames.
    pub compress: Compress,
    /// `--compress` was given (else `compress` is the default): through the ssh session,
    /// only then are frames compressed ([`Peering::compress_through_ssh`]).
    pub compress_asked: bool,
    /// A connection to the one `--to`'s receiver made before the run (non-blocking), which
    /// the first try takes instead of connecting: accel started through ssh tries the direct
    /// path with the stream's own connection, so the stream pays no second round trip.
    pub dialed: Option<i32>,
    /// A connection carried by the ssh session (an end of a socketpair of accel's own, see
    /// [`socket::carried`]), and the ssh host's address to name it by: the run's one
    /// connection, the first `--to`'s (instead of connecting) or the sender's (instead of
    /// listening). Frames' payloads go unsealed on it (ssh's cipher protects them); it does
    /// not resume (the session's end is the stream's).
    pub carried: Option<(i32, SocketAddr)>,
    /// Where [`carried`](Peering::carried)'s connection writes, when that is not its own
    /// descriptor: the remote end reads sshd's stdin and writes its stdout, both pipes opened
    /// anew as accel's own ([`socket::carried_by_pipes`]).
    pub carried_out: Option<i32>,
    /// The first handshake message, already sent on `dialed` or `carried` ([`opening_ahead`]),
    /// which the first try on that connection goes on from.
    pub ahead: Option<handshake::Ahead>,
    /// `--streams`: the connections each `--to` proposes for its stream (1 to
    /// [`wire::MOST_STREAMS`]); 1 is wire version 4, as before.
    pub streams: u8,
    /// A receiver's window over several connections: the most bytes a sender may have
    /// beyond what the receiver's input took in, in order, which its reorder map may hold
    /// (a quarter of `-m`).
    pub window: u64,
    /// A receiver's most bytes over several connections beyond what its outputs took, in
    /// its buffer and its reorder map together: its `-m` (at least the window).
    pub hold: u64,
    /// Raised once the receiver's first sender has proved the key, for the one who started
    /// the run to read: `accel --serve-ssh`, whose session's end stops it until then.
    pub met: Option<Met>,
}

/// A flag a receiver raises once its first sender has come ([`Peering::met`]). Two are
/// equal when they are the same flag.
#[derive(Debug, Clone, Default)]
pub struct Met(Arc<AtomicBool>);

impl Met {
    /// Whether the first sender has come.
    pub fn is_raised(&self) -> bool {
        self.0.load(Relaxed)
    }

    fn raise(&self) {
        self.0.store(true, Relaxed);
    }
}

impl PartialEq for Met {
    fn eq(&self, other: &Met) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Met {}

impl Default for Peering {
    fn default() -> Peering {
        Peering {
            from: None,
            key_file: None,
            key_file_from_env: false,
            insecure: false,
            accept_timeout: None,
            connect_for: CONNECT_FOR,
            resume: Resume::default(),
            congestion: Congestion::Preferred,
            key: None,
            bound: Vec::new(),
            dialed: None,
            carried: None,
            carried_out: None,
            ahead: None,
            compress: Compress::default(),
            compress_asked: false,
            streams: 1,
            window: LEAST_WINDOW,
            hold: LEAST_WINDOW,
            met: None,
        }
    }
}

/// The least window a receiver announces to a sender over several connections: a few
/// frames for each of the most connections.
pub const LEAST_WINDOW: u64 = 4 << 20;

/// How long a receiver waits for the further connections of a stream over several, once
/// the first is in: they are dialled at once after it.
const JOIN_PATIENCE: Duration = Duration::from_secs(30);

/// Why the network side could not be set up; nothing was read.
#[derive(Debug)]
pub enum SetupError {
    /// The command line names what cannot be used (a key file): status 2.
    Usage(String),
    /// The network refused (unknown name, refused, unreachable, wrong key, port in use, no
    /// sender in time): status 6.
    Unreached(String),
}

/// A receiver's confirmations while the run goes: a thread that tells the sender, every
/// [`DELIVERED_EVERY`] at most, how many bytes the outputs have taken, when that grew, and
/// the same count again when it has said nothing for a heartbeat. The count is that of the
/// output furthest behind still there, and for an output that is itself a network output (a
/// relay), what its own receiver confirmed.
#[derive(Debug)]
pub struct Confirming {
    thread: Option<JoinHandle<()>>,
    done: Arc<AtomicBool>,
}

impl Confirming {
    /// Starts confirming on `input` (a `--from` link) what the first `outputs` readers of
    /// `meter` take; nothing over plain TCP.
    pub fn start(input: &Arc<Link>, meter: &Arc<Meter>, outputs: usize) -> io::Result<Confirming> {
        let done = Arc::new(AtomicBool::new(false));
        if !input.is_secure() {
            return Ok(Confirming { thread: None, done });
        }
        let (link, meter, over) = (Arc::clone(input), Arc::clone(meter), Arc::clone(&done));
        let thread = thread::Builder::new().name("accel-confirm".into()).spawn(move || {
            let (mut told, mut pace) = (0, Pace::default());
            loop {
                thread::park_timeout(pace.period());
                if let Some(upto) = link.take_asked() {
                    pace.asked(upto);
                }
                // Once more after the run: the last count, exact, whatever follows.
                let last = over.load(Relaxed);
                let snapshot = meter.snapshot();
                let live = snapshot.readers[..outputs].iter().filter(|reader| !reader.gone);
                let Some(taken) = live.map(|reader| reader.delivered()).min() else { return };
                // A count that could not be written (the connection dropped) is said again
                // on the next one. Over several connections, also when the input took more
                // in: that opens the sender's window.
                let news = taken > told || link.quiet() || link.more_credit(taken);
                if news && matches!(link.deliver(taken), Ok(true)) {
                    told = taken;
                }
                // Over several connections, what the input took in answers an ask too.
                pace.after(taken.max(link.received_in_order()));
                if last {
                    return;
                }
            }
        })?;
        input.confirm_with(thread.thread().clone());
        Ok(Confirming { thread: Some(thread), done })
    }

    /// Stops confirming and joins the thread (the run is over: the Ack, or nothing, follows).
    pub fn join(mut self) {
        self.done.store(true, Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// How often a receiver's [`Confirming`] says what its outputs have taken: every
/// [`DELIVERED_EVERY`], or, once the sender asked, every [`EAGER_EVERY`] until the outputs have
/// taken every byte the sender had sent when it asked (at most [`EAGER_ROUNDS`] rounds).
#[derive(Debug, Default)]
struct Pace {
    /// Short rounds left.
    eager: u32,
    /// The furthest stream offset the sender asked about.
    until: u64,
}

impl Pace {
    /// The sender asked, having sent `upto` bytes.
    fn asked(&mut self, upto: u64) {
        (self.eager, self.until) = (EAGER_ROUNDS, self.until.max(upto));
    }

    /// A round is over, the outputs having taken `taken` bytes. Not what the input has
    /// counted in: it may not have handed the backlog the bytes it read with the ask yet,
    /// and the sender, its buffer full of them, would wait for the next long round (taken
    /// as far as the input had counted, the short rounds ended there, and a `-m 1M` sender
    /// got the word of each MiB 50 ms late).
    fn after(&mut self, taken: u64) {
        self.eager = if taken >= self.until { 0 } else { self.eager.saturating_sub(1) };
    }

    /// How long until the next round.
    fn period(&self) -> Duration {
        if self.eager > 0 { EAGER_EVERY } else { DELIVERED_EVERY }
    }
}

/// Whether `error`, met on a connection, is a drop, which a resumed stream outlives: a reset
/// or an abort however the system says it (ECONNRESET, ECONNABORTED, which `ss -K` gives
/// the end whose socket it kills, ENETRESET, EPIPE), a connection that ended without the
/// end of its stream or fell silent, a path or host gone. Not a failure that no new
/// connection mends: data altered, the peer's word that it stopped.
pub fn is_drop(error: &io::Error) -> bool {
    use io::ErrorKind::*;
    matches!(
        error.kind(),
        ConnectionReset
            | ConnectionAborted
            | BrokenPipe
            | UnexpectedEof
            | TimedOut
            | NotConnected
            | HostUnreachable
            | NetworkUnreachable
            | NetworkDown
    ) || matches!(
        // The two that std gives no kind of their own.
        error.raw_os_error(),
        Some(libc::ENETRESET | libc::EHOSTDOWN)
    )
}

impl Peering {
    /// What the frames become through the ssh session (`--via ssh`, or where the direct path
    /// is closed): as asked, else none. The session is the stream's one connection: an
    /// accel there of an older version, which refuses a compressing sender's (see `dial`),
    /// cannot be dialed again, as one on the direct path is by the default `auto`; nor can
    /// an older local accel that pulls be (it passes no `--compress` on unless asked, so a
    /// remote sender without one never compresses through the session).
    pub fn compress_through_ssh(&self) -> Compress {
        if self.compress_asked { self.compress } else { Compress::None }
    }
}

/// The first handshake message of a run's first `--to` connection, as that run makes it (a
/// new stream; the first of `streams` connections; history when `peering` compresses), to
/// be sent ahead on the connection given to the run ([`Peering::ahead`]).
pub fn opening_ahead(peering: &Peering, streams: u8, key: &Key) -> Result<Opening, String> {
    let stream = handshake::new_stream()?;
    let hello = wire::Hello { stream, offset: 0, resuming: false };
    let join = (streams > 1).then_some(wire::Join { index: 0, streams, window: 0 });
    Ok(Opening::joining(key, hello, join, peering.compress != Compress::None))
}

/// A peer's going away, said as such: `EPIPE` and `ECONNRESET` on a socket mean that `who`
/// (the receiver) closed the connection, which is a failure to report, not the quiet
/// SIGPIPE a pipeline's consumer exiting early gets.
pub fn closed_by_peer(error: io::Error, who: &str) -> io::Error {
    match error.kind() {
        io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!("{who} closed the connection ({})", describe(&error)),
        ),
        _ => error,
    }
}

/// The network side of a run: the peers, from start to finish.
#[derive(Debug)]
pub struct Network {
    key: Option<Arc<Key>>,
    input: Option<Input>,
    outputs: Vec<Output>,
    /// The input's link once its sender came.
    received: Option<Arc<Link>>,
    /// `--connect-for`.
    connect_for: Duration,
    /// The TCP congestion control every socket asks for (`None`: the system's default).
    congestion: Option<Arc<str>>,
    /// `--streams`, each output's; the receiver's window over several connections.
    streams: u8,
    window: u64,
    hold: u64,
    /// What each output's frames become (`--compress`): other than none, its connections
    /// speak wire version 6 (or 7); with auto, an older receiver is sent to uncompressed.
    compress: Compress,
    /// [`Peering::ahead`], for the first output's first try.
    ahead: Option<handshake::Ahead>,
}

/// The `--from` input, before its sender came: where it listens.
#[derive(Debug)]
struct Input {
    address: Address,
    listeners: Vec<OwnedFd>,
    /// [`Peering::carried`]: the sender's connection, made before the run.
    carried: Option<socket::Socket>,
    link: Arc<Link>,
    accept_timeout: Option<Duration>,
    /// [`Peering::met`].
    met: Option<Met>,
}

/// A `--to` output: its receiver's address as typed and as resolved at the start.
#[derive(Debug)]
struct Output {
    address: Address,
    resolved: Vec<SocketAddr>,
    link: Arc<Link>,
    /// [`Peering::dialed`], for its first try.
    dialed: Option<socket::Socket>,
}

impl Network {
    /// Reads the key, resolves each receiver's name and binds the receiver's sockets: what
    /// can fail before anything else happens.
    pub fn open(peering: &Peering, to: &[&Address], log: &Arc<Log>) -> Result<Network, SetupError> {
        let key = match &peering.key_file {
            Some(path) => Some(Key::read(path).map(Arc::new).map_err(|why| {
                let named = if peering.key_file_from_env {
                    format!("{}={}", key::ENV, path.display())
                } else {
                    format!("--key-file {}", path.display())
                };
                SetupError::Usage(format!("{named}: {why}"))
            })?),
            None => peering.key.clone(),
        };
        let congestion = peering.congestion.settle(log).map_err(SetupError::Usage)?;
        let secure = !peering.insecure;
        let mut outputs = Vec::new();
        for &address in to {
            let resolved = match (outputs.is_empty(), peering.carried) {
                // Nothing to resolve (the name may be the ssh jump host's to know): the
                // connection is there, carried by ssh.
                (true, Some((_, peer))) => Ok(vec![peer]),
                _ => address.resolve(),
            };
            let resolved = resolved.map_err(|e| {
                SetupError::Unreached(format!("{address}: {}; nothing was sent", describe(&e)))
            })?;
            let name = address.to_string();
            let link = Link::new(Role::Sender, secure, name, peering.resume, Arc::clone(log));
            link.compress(peering.compress);
            let first = outputs.is_empty();
            let dialed = match (first, peering.dialed, peering.carried) {
                (true, _, Some((fd, peer))) => Some(carried(fd, peering.carried_out, peer)),
                // SAFETY: the connection was made for this run and handed over once.
                (true, Some(fd), None) => {
                    Some(socket::adopt(unsafe { OwnedFd::from_raw_fd(fd) }, congestion.as_deref()))
                }
                _ => None,
            };
            let dialed = dialed.transpose().map_err(|e| {
                SetupError::Unreached(format!("{address}: {}; nothing was sent", describe(&e)))
            })?;
            outputs.push(Output { address: address.clone(), resolved, link, dialed });
        }
        let input = match &peering.from {
            None => None,
            Some(address) => Some(Input {
                carried: match (to.is_empty(), peering.carried) {
                    (true, Some((fd, peer))) => {
                        Some(carried(fd, peering.carried_out, peer).map_err(|e| {
                            SetupError::Unreached(format!("{address}: {}", describe(&e)))
                        })?)
                    }
                    _ => None,
                },
                listeners: match peering.bound.as_slice() {
                    // Nothing to listen for: the sender's connection is carried by ssh.
                    _ if to.is_empty() && peering.carried.is_some() => Vec::new(),
                    [] => bind(address, congestion.as_deref(), log)?,
                    // SAFETY: the sockets were bound for this run and handed over once.
                    fds => fds
                        .iter()
                        .map(|&fd| unsafe { OwnedFd::from_raw_fd(fd) })
                        .inspect(|fd| socket::ask_congestion(fd.as_fd(), congestion.as_deref()))
                        .collect(),
                },
                address: address.clone(),
                link: Link::new(
                    Role::Receiver,
                    secure,
                    address.to_string(),
                    peering.resume,
                    Arc::clone(log),
                ),
                accept_timeout: peering.accept_timeout,
                met: peering.met.clone(),
            }),
        };
        Ok(Network {
            key,
            input,
            outputs,
            received: None,
            connect_for: peering.connect_for,
            congestion,
            streams: peering.streams,
            window: peering.window.max(LEAST_WINDOW),
            hold: peering.hold,
            compress: peering.compress,
            ahead: peering.ahead.clone(),
        })
    }

    /// The input's link, with `--from`.
    pub fn input(&self) -> Option<Arc<Link>> {
        let waiting = self.input.as_ref().map(|input| &input.link);
        waiting.or(self.received.as_ref()).map(Arc::clone)
    }

    /// The outputs' links, in `--to` order.
    pub fn outputs(&self) -> impl Iterator<Item = Arc<Link>> + '_ {
        self.outputs.iter().map(|output| Arc::clone(&output.link))
    }

    /// Connects to every receiver, then waits for the sender; `patience` bounds each connect
    /// and handshake. Each secure link is then tended for the rest of the run (see
    /// [`link`]), until [`close`](Network::close).
    pub fn establish(
        &mut self,
        patience: Duration,
        log: &Arc<Log>,
        stop: &Stop,
    ) -> Result<(), SetupError> {
        let unreached = |address: &Address, e: io::Error| {
            SetupError::Unreached(format!("{address}: {}", describe(&e)))
        };
        for output in &mut self.outputs {
            // The first handshake message already sent on the connection made before the
            // run names the stream.
            let ahead = output.dialed.as_ref().and(self.ahead.take()).and_then(|a| a.take());
            let stream = match &ahead {
                Some(opening) => opening.stream(),
                None => handshake::new_stream().map_err(|why| {
                    SetupError::Unreached(format!("{}: {why}; nothing was sent", output.address))
                })?,
            };
            let dialer = Dialer {
                address: output.address.clone(),
                key: self.key.clone(),
                congestion: self.congestion.clone(),
                dialed: Mutex::new(output.dialed.take()),
                ahead: Mutex::new(ahead.map(Box::new)),
                streams: self.streams,
                history: AtomicBool::new(self.compress != Compress::None),
                falls_back: self.compress == Compress::Auto,
            };
            let first =
                dialer.first(&output.resolved, stream, self.connect_for, patience, log, stop);
            let (socket, channel) = first.map_err(|why| {
                SetupError::Unreached(format!("{}: {why}; nothing was sent", output.address))
            })?;
            if self.compress != Compress::None && !dialer.compresses() {
                // An older receiver: this stream goes uncompressed, over every connection.
                output.link.compress(Compress::None);
            }
            if let Some(terms) = channel.as_ref().and_then(Channel::joined) {
                let mut channels = vec![];
                for index in 1..terms.streams {
                    let more = dialer.join(&output.resolved, stream, index, patience, log, stop);
                    channels.push(more.map_err(|why| {
                        SetupError::Unreached(format!(
                            "{}: {why}; nothing was sent",
                            output.address
                        ))
                    })?);
                }
                log.debug(format_args!(
                    "{}: {} connections (of {} proposed), a window of {}",
                    output.address,
                    terms.streams,
                    self.streams,
                    crate::words::byte_count(terms.window)
                ));
                channels.insert(0, channel.expect("joined"));
                let reconnect = output.link.resumes().then_some(Reconnect::Dial(dialer));
                let established =
                    output.link.establish_several(channels, terms.window, 0, reconnect);
                established.map_err(|e| unreached(&output.address, e))?;
                continue;
            }
            output.link.establish(socket, channel);
            if self.key.is_some() {
                let tending = output.link.tend(Reconnect::Dial(dialer));
                tending.map_err(|e| unreached(&output.address, e))?;
            }
        }
        if let Some(mut input) = self.input.take() {
            let deadline = input.accept_timeout.map(|timeout| Instant::now() + timeout);
            log.debug(format_args!("{}: waiting for the sender", input.address));
            let mut dropped = 0;
            let terms = handshake::Terms { stream: None, window: self.window };
            let (socket, channel) = match self.key.clone() {
                // One lobby for the first connection and, over several, the further ones:
                // they come at once.
                Some(owned) => {
                    let mut lobby = handshake::Lobby::open(
                        &input.listeners,
                        &owned,
                        terms,
                        &mut dropped,
                        log,
                        stop,
                    );
                    if let Some(socket) = input.carried.take() {
                        lobby.take(socket);
                    }
                    let first = lobby.next_sender(deadline).map_err(|why| {
                        SetupError::Unreached(format!(
                            "{}: {why}; nothing was written",
                            input.address
                        ))
                    })?;
                    self.said_the_sender(&input, &first.0, log);
                    if let Some(join) = first.1.joined() {
                        let channels =
                            self.join_more(&input, &mut lobby, *first.1, join.streams, log)?;
                        drop(lobby);
                        let reconnect = match input.link.resumes() {
                            true => Some(Reconnect::Listen(Listening {
                                address: input.address.clone(),
                                listeners: input.listeners,
                                key: Arc::clone(&owned),
                                dropped,
                            })),
                            false => None,
                        };
                        let established = input.link.establish_several(
                            channels,
                            self.window,
                            self.hold,
                            reconnect,
                        );
                        established.map_err(|e| unreached(&input.address, e))?;
                        self.received = Some(input.link);
                        return Ok(());
                    }
                    (first.0, Some(*first.1))
                }
                None => {
                    let accepted = handshake::accept_sender(
                        &input.listeners,
                        None,
                        terms,
                        deadline,
                        &mut dropped,
                        log,
                        stop,
                    );
                    let (socket, channel) = accepted.map_err(|why| {
                        SetupError::Unreached(format!(
                            "{}: {why}; nothing was written",
                            input.address
                        ))
                    })?;
                    self.said_the_sender(&input, &socket, log);
                    (socket, channel)
                }
            };
            let channel = match channel {
                // A sender whose first connection dropped before this receiver had its Start
                // frame goes on with its stream, from byte 0: it waits to hear so.
                Some(mut channel) if channel.goes_on() => {
                    channel.resume_from(0, false).map_err(|e| unreached(&input.address, e))?;
                    Some(channel)
                }
                channel => channel,
            };
            input.link.establish(socket, channel);
            // Without resuming, the listening sockets close here: one sender per run, and
            // nobody else may try. Else only the same sender, with the same stream, comes in.
            if let (Some(key), true) = (&self.key, input.link.resumes()) {
                let listening = Listening {
                    address: input.address.clone(),
                    listeners: input.listeners,
                    key: Arc::clone(key),
                    dropped,
                };
                let tending = input.link.tend(Reconnect::Listen(listening));
                tending.map_err(|e| unreached(&input.address, e))?;
            }
            self.received = Some(input.link);
        }
        Ok(())
    }

    /// Says which sender came (in every case, unless -q: which of the hosts that may reach
    /// the port it is), and its connection's congestion control (--debug); raises
    /// [`Peering::met`].
    fn said_the_sender(&self, input: &Input, socket: &socket::Socket, log: &Log) {
        if let Some(met) = &input.met {
            met.raise();
        }
        log.warn(format_args!("{}: the sender is {}", input.address, socket.peer()));
        log.debug(format_args!(
            "{}: the connection's TCP congestion control: {}",
            input.address,
            socket.congestion_control()
        ));
    }

    /// The further connections of a stream over several, after its `first`, from `lobby`:
    /// each proves the key and names the stream and a place of its own among `streams`; any
    /// other is dropped, said so. Within [`JOIN_PATIENCE`]. Each in its place, the sender's
    /// numbering, whatever order their handshakes end in (a path may pass one connection's
    /// Start frame after the next one's): a connection that comes back names its place, and
    /// takes the place of the one there.
    fn join_more(
        &self,
        input: &Input,
        lobby: &mut handshake::Lobby<'_>,
        first: Channel,
        streams: u8,
        log: &Log,
    ) -> Result<Vec<Channel>, SetupError> {
        let unreached = |why: String| {
            SetupError::Unreached(format!("{}: {why}; nothing was written", input.address))
        };
        lobby.expect(handshake::Terms { stream: Some(first.stream()), window: self.window });
        let deadline = Instant::now() + JOIN_PATIENCE;
        let mut places: Vec<Option<Channel>> = (0..streams).map(|_| None).collect();
        let mut more = first;
        loop {
            // The place it names among as many as the first said, if no other has it.
            let place = more.joined().filter(|join| join.streams == streams);
            let place = place.and_then(|join| places.get_mut(usize::from(join.index)));
            match place {
                Some(place @ None) => *place = Some(more),
                _ => log.warn(format_args!(
                    "{}: a connection of the stream came again or out of place; dropped it",
                    more.socket().peer()
                )),
            }
            let joined = places.iter().flatten().count();
            if joined == places.len() {
                break;
            }
            let (_, next) = lobby
                .next_sender(Some(deadline))
                .map_err(|why| unreached(format!("connection {}: {why}", joined + 1)))?;
            more = *next;
        }
        log.debug(format_args!(
            "{}: {streams} connections, a window of {}",
            input.address,
            crate::words::byte_count(self.window)
        ));
        Ok(places.into_iter().flatten().collect())
    }

    /// The run is over: every link's tending thread ends.
    pub fn close(&mut self) {
        for output in &self.outputs {
            output.link.close();
        }
        if let Some(link) = self.received.take() {
            link.close();
        }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        self.close();
    }
}

/// Listening sockets on exactly `address`: each address its name resolves to, or every
/// interface for a bare port (IPv6 and IPv4, or IPv4 alone where there is no IPv6); their
/// connections get the congestion control `congestion`.
fn bind(
    address: &Address,
    congestion: Option<&str>,
    log: &Log,
) -> Result<Vec<OwnedFd>, SetupError> {
    let fail =
        |why: String| SetupError::Unreached(format!("{address}: {why}; nothing was written"));
    let resolved = address.resolve().map_err(|e| fail(describe(&e)))?;
    let mut listeners = Vec::new();
    // Port 0: the system's choice for the first address, the same port for the others.
    let mut port = address.port;
    for mut local in resolved {
        local.set_port(port);
        let both = address.every_interface();
        let listener = match socket::listen(local, both, congestion) {
            Err(error) if both && error.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
                local = SocketAddr::from((address::EVERY_IPV4, port));
                socket::listen(local, false, congestion)
            }
            result => result,
        };
        let listener =
            listener.map_err(|e| fail(format!("cannot listen on {local}: {}", describe(&e))))?;
        let bound = socket::local_address(&listener).unwrap_or(local);
        port = bound.port();
        // Said in every case (unless -q): a receiver that waits in silence looks hung, and
        // with port 0 nobody could know the port otherwise.
        log.warn(format_args!("listening on {bound}"));
        listeners.push(listener);
    }
    Ok(listeners)
}

/// `30 s`.
fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

/// [`Peering::carried`]'s connection, taken over once.
/// With `out`, the two pipes it reads and writes.
fn carried(fd: i32, out: Option<i32>, peer: SocketAddr) -> io::Result<socket::Socket> {
    // SAFETY: the socketpair end, or the pipes, were opened for this run and handed over once.
    let (fd, out) = unsafe { (OwnedFd::from_raw_fd(fd), out.map(|out| OwnedFd::from_raw_fd(out))) };
    match out {
        None => socket::carried(fd, peer),
        Some(out) => socket::carried_by_pipes(fd, out, peer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asked, a receiver keeps to the short period until its outputs have taken every byte
    /// the sender had sent when it asked: not only what its input had counted in by then
    /// (seen: the ask about 1 MiB opened, 851,747 bytes counted in and taken, the short
    /// rounds ended, the rest said 50 ms later); and for so many rounds at most.
    #[test]
    fn asked_the_receiver_confirms_at_the_short_period_until_the_ask_is_answered() {
        let mut pace = Pace::default();
        assert_eq!(pace.period(), DELIVERED_EVERY);
        pace.asked(1 << 20);
        pace.after(851_747);
        assert_eq!(pace.period(), EAGER_EVERY, "the bytes read with the ask are still to come");
        pace.after(1 << 20);
        assert_eq!(pace.period(), DELIVERED_EVERY, "the ask is answered");
        pace.asked(2 << 20);
        for _ in 0..EAGER_ROUNDS {
            assert_eq!(pace.period(), EAGER_EVERY);
            pace.after(1 << 20);
        }
        assert_eq!(pace.period(), DELIVERED_EVERY, "outputs this slow are the bottleneck");
    }

    /// Issue 32, item 5: every error a reset or an abort surfaces as is a drop; a failure
    /// that a new connection does not mend is not.
    #[test]
    fn drops_are_told_from_failures() {
        for errno in [
            libc::ECONNRESET,
            libc::ECONNABORTED,
            libc::ENETRESET,
            libc::EPIPE,
            libc::ENOTCONN,
            libc::ETIMEDOUT,
            libc::EHOSTUNREACH,
            libc::EHOSTDOWN,
            libc::ENETUNREACH,
            libc::ENETDOWN,
        ] {
            assert!(is_drop(&io::Error::from_raw_os_error(errno)), "errno {errno}");
        }
        let ended = io::Error::new(io::ErrorKind::UnexpectedEof, "ended before the end mark");
        assert!(is_drop(&ended));
        let altered = io::Error::new(io::ErrorKind::InvalidData, "failed authentication");
        assert!(!is_drop(&altered));
        assert!(!is_drop(&io::Error::other("the receiver stopped after 0 bytes were sent")));
        assert!(!is_drop(&io::Error::from_raw_os_error(libc::ENOSPC)));
    }
}
