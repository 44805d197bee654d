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
//!   and handshakes ([`handshake`]); the receiver waits (until `--accept-timeout`) for the
//!   first connection that proves it holds the key, dropping any other.
//! - The run: the engine reads and writes the endpoints as it does any other. A plain peer
//!   (`--insecure`) is accel's own O_NONBLOCK socket, read, written and spliced like a pipe;
//!   an encrypted peer reads and writes through its [`channel`], so through memory.
//! - The end of the stream is part of the run: once a network output has every byte and the
//!   input ended cleanly, its own thread sends the End frame with the byte count and waits
//!   for the receiver's Ack ([`Link::finish`]), each output on its own, under the stall
//!   watchdog and the signals like any other wait. After the run, the receiver of a stream
//!   that did not end cleanly is told why it stops ([`Link::abort`]); the words are the run's
//!   to choose. The receiver's input ends cleanly only at an End whose count matches; a
//!   connection that ends before it is a read error (status 1).
//! - Delivered means confirmed: while the stream goes, the receiver tells the sender how many
//!   bytes its outputs have taken ([`Confirming`], at most every [`DELIVERED_EVERY`]), and
//!   it sends the Ack only once they have taken every byte ([`Link::acknowledge_end`]). The
//!   sender counts as delivered only what was confirmed; the rest it calls sent
//!   ([`Delivery`]). Plain TCP (`--insecure`) has no frames, so nothing is confirmed there.
//!
//! Failures before the run (name not found, refused, unreachable, no answer, wrong key, port
//! in use, no sender in time) end accel with status 6 before a byte is read; failures during
//! it are the input's (1) or an output's (3), as for any endpoint.

pub mod address;
pub mod channel;
pub mod cipher;
pub mod handshake;
pub mod key;
pub mod socket;
pub mod wire;

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustix::event::PollFlags;

use crate::log::Log;
use crate::meter::{Delivery, Meter};
use crate::stop::{Stop, wait_for};
use crate::words::describe;
use address::Address;
use channel::Channel;
use key::Key;
use socket::Socket;

/// How long a sender may take to connect and handshake when `--stall-timeout` does not say.
pub const CONNECT_PATIENCE: Duration = Duration::from_secs(30);

/// How often, at most, a receiver tells its sender what its outputs have taken: a frame of
/// 45 bytes, 20 times a second at most, costs nothing on any link, and a sender's stall
/// watchdog (seconds) sees each.
pub const DELIVERED_EVERY: Duration = Duration::from_millis(50);

/// What the command line asks of the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
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
}

/// Why the network side could not be set up; nothing was read.
#[derive(Debug)]
pub enum SetupError {
    /// The command line names what cannot be used (a key file): status 2.
    Usage(String),
    /// The network refused (unknown name, refused, unreachable, wrong key, port in use, no
    /// sender in time): status 6.
    Unreached(String),
}

/// A network peer: its name, and its connection once established.
#[derive(Debug)]
pub struct Link {
    secure: bool,
    connection: OnceLock<Connection>,
    /// An output's place in the meter, where what its receiver confirms is published.
    meter: OnceLock<(Arc<Meter>, usize)>,
}

#[derive(Debug)]
struct Connection {
    socket: Arc<Socket>,
    channel: Option<Mutex<Channel>>,
}

impl Link {
    fn new(secure: bool) -> Arc<Link> {
        Arc::new(Link { secure, connection: OnceLock::new(), meter: OnceLock::new() })
    }

    /// Makes this output reader `index` of `meter`: what its bytes mean ([`Delivery`]), and
    /// where what its receiver confirms is published.
    pub fn report_to(&self, meter: &Arc<Meter>, index: usize) {
        let delivery = if self.secure { Delivery::Confirmed } else { Delivery::Unconfirmed };
        meter.set_delivery(index, delivery);
        let _ = self.meter.set((Arc::clone(meter), index));
    }

    /// Publishes what the receiver confirmed, and whether the Ack is awaited.
    fn heard(&self, confirmed: u64, awaiting: bool) {
        if let Some((meter, index)) = self.meter.get() {
            meter.confirmed(*index, confirmed, awaiting);
        }
    }

    /// Whether bytes go through the secure channel (not `--insecure`).
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// The socket.
    ///
    /// # Panics
    /// Before the link is established: the run starts only after.
    pub fn socket(&self) -> &Socket {
        &self.connection().socket
    }

    fn connection(&self) -> &Connection {
        self.connection.get().expect("the link is established before the run")
    }

    fn channel(&self) -> Option<std::sync::MutexGuard<'_, Channel>> {
        let channel = self.connection().channel.as_ref()?;
        Some(channel.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Reads what has arrived, up to `buf.len()` (0 at the end of the stream): through the
    /// channel, or from the plain socket, until the run's `stop`. The channel is not held
    /// while waiting for the socket, so that confirmations go out meanwhile.
    pub fn read(&self, buf: &mut [u8], stop: &Stop) -> io::Result<usize> {
        loop {
            let Some(mut channel) = self.channel() else {
                return self.socket().read(buf, stop, None);
            };
            match channel.receive_until(buf, stop, Some(Instant::now())) {
                Err(error) if error.kind() == io::ErrorKind::TimedOut => {}
                result => return result,
            }
            drop(channel);
            wait_for(self.socket().fd(), PollFlags::IN, stop, None)?;
        }
    }

    /// Writes some of `buf` (at least a byte): through the channel, or to the plain socket,
    /// until the run's `stop`.
    pub fn write(&self, buf: &[u8], stop: &Stop) -> io::Result<usize> {
        match self.channel() {
            Some(mut channel) => {
                let sent = channel.send(buf, stop);
                self.heard(channel.confirmed(), false);
                sent
            }
            None => self.socket().write(buf, stop).map_err(|e| closed_by_peer(e, "the receiver")),
        }
    }

    /// An output's end, once it has sent every byte of a stream that ended cleanly: the End
    /// frame, then the receiver's confirmations until its Ack, published as they come. Until
    /// the run's `stop`, which a stall or a signal requests. Nothing to do over plain TCP.
    pub fn end_stream(&self, stop: &Stop) -> io::Result<()> {
        let Some(mut channel) = self.channel() else { return Ok(()) };
        channel.end_stream(stop, &mut |confirmed, awaiting| self.heard(confirmed, awaiting))
    }

    /// The receiver's last word, once its outputs have taken every byte: the Ack of the End
    /// (see [`Channel::acknowledge_end`]).
    pub fn acknowledge_end(&self) -> io::Result<()> {
        match self.channel() {
            Some(mut channel) => channel.acknowledge_end(),
            None => Ok(()),
        }
    }

    /// After the run, for an output whose stream did not end: tells the receiver it stops
    /// here, and `why`. Best effort, whether or not the run's stop was requested; nothing over
    /// plain TCP, which has no frames, nor while a thread that never ended holds the channel.
    pub fn abort(&self, why: &str) {
        let Some(channel) = self.connection().channel.as_ref() else { return };
        if let Ok(mut channel) = channel.try_lock() {
            channel.abort(why);
        }
    }

    fn establish(&self, socket: Arc<Socket>, channel: Option<Channel>) {
        let connection = Connection { socket, channel: channel.map(Mutex::new) };
        assert!(self.connection.set(connection).is_ok(), "a link is established once");
    }
}

/// A receiver's confirmations while the run goes: a thread that tells the sender, every
/// [`DELIVERED_EVERY`] at most, how many bytes the outputs have taken, when that grew. The
/// count is that of the output furthest behind still there, and for an output that is
/// itself a network output (a relay), what its own receiver confirmed.
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
            let mut told = 0;
            loop {
                thread::park_timeout(DELIVERED_EVERY);
                // Once more after the run: the last count, exact, whatever follows.
                let last = over.load(Relaxed);
                let snapshot = meter.snapshot();
                let live = snapshot.readers[..outputs].iter().filter(|reader| !reader.gone);
                let Some(taken) = live.map(|reader| reader.delivered()).min() else { return };
                if taken > told {
                    let Some(mut channel) = link.channel() else { return };
                    if channel.deliver(taken).is_err() {
                        return;
                    }
                    told = taken;
                }
                if last {
                    return;
                }
            }
        })?;
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
    key: Option<Key>,
    input: Option<Receiving>,
    outputs: Vec<Sending>,
}

#[derive(Debug)]
struct Receiving {
    address: Address,
    listeners: Vec<OwnedFd>,
    link: Arc<Link>,
    accept_timeout: Option<Duration>,
}

#[derive(Debug)]
struct Sending {
    address: Address,
    resolved: Vec<SocketAddr>,
    link: Arc<Link>,
}

impl Network {
    /// Reads the key, resolves each receiver's name and binds the receiver's sockets: what
    /// can fail before anything else happens.
    pub fn open(settings: &Settings, to: &[&Address], log: &Log) -> Result<Network, SetupError> {
        let key = match &settings.key_file {
            Some(path) => Some(Key::read(path).map_err(|why| {
                let named = if settings.key_file_from_env {
                    format!("{}={}", key::ENV, path.display())
                } else {
                    format!("--key-file {}", path.display())
                };
                SetupError::Usage(format!("{named}: {why}"))
            })?),
            None => None,
        };
        let secure = !settings.insecure;
        let mut outputs = Vec::new();
        for &address in to {
            let resolved = address.resolve().map_err(|e| {
                SetupError::Unreached(format!("{address}: {}; nothing was sent", describe(&e)))
            })?;
            outputs.push(Sending { address: address.clone(), resolved, link: Link::new(secure) });
        }
        let input = match &settings.from {
            None => None,
            Some(address) => Some(Receiving {
                listeners: bind(address, log)?,
                address: address.clone(),
                link: Link::new(secure),
                accept_timeout: settings.accept_timeout,
            }),
        };
        Ok(Network { key, input, outputs })
    }

    /// The input's link, with `--from`.
    pub fn input(&self) -> Option<Arc<Link>> {
        self.input.as_ref().map(|input| Arc::clone(&input.link))
    }

    /// The outputs' links, in `--to` order.
    pub fn outputs(&self) -> impl Iterator<Item = Arc<Link>> + '_ {
        self.outputs.iter().map(|output| Arc::clone(&output.link))
    }

    /// Connects to every receiver, then waits for the sender; `patience` bounds each connect
    /// and handshake.
    pub fn establish(
        &mut self,
        patience: Duration,
        log: &Log,
        stop: &Stop,
    ) -> Result<(), SetupError> {
        for output in &self.outputs {
            let (socket, channel) = self.connect(output, patience, log, stop)?;
            output.link.establish(socket, channel);
        }
        if let Some(input) = self.input.take() {
            let deadline = input.accept_timeout.map(|timeout| Instant::now() + timeout);
            let (socket, channel) =
                handshake::accept_sender(&input.listeners, self.key.as_ref(), deadline, log, stop)
                    .map_err(|why| {
                        SetupError::Unreached(format!(
                            "{}: {why}; nothing was written",
                            input.address
                        ))
                    })?;
            log.debug(format_args!("{}: the sender is {}", input.address, socket.peer()));
            input.link.establish(socket, channel);
            // The listening sockets close here: one sender per run, and nobody else may try.
        }
        Ok(())
    }

    /// Connects to one receiver, trying each of its addresses in turn.
    fn connect(
        &self,
        output: &Sending,
        patience: Duration,
        log: &Log,
        stop: &Stop,
    ) -> Result<(Arc<Socket>, Option<Channel>), SetupError> {
        let deadline = Instant::now() + patience;
        let fail = |why: String| {
            SetupError::Unreached(format!("{}: {why}; nothing was sent", output.address))
        };
        let mut failures = Vec::new();
        for &address in &output.resolved {
            let opening =
                self.key.as_ref().map(handshake::Opening::new).transpose().map_err(fail)?;
            match socket::connect(address, stop, deadline) {
                Ok(socket) => {
                    log.debug(format_args!("{}: connected to {address}", output.address));
                    let Some(opening) = opening else { return Ok((Arc::new(socket), None)) };
                    let name = output.address.to_string();
                    let channel = handshake::initiate(opening, socket, stop, deadline, &name, log)
                        .map_err(fail)?;
                    return Ok((Arc::clone(channel.socket()), Some(channel)));
                }
                Err(error) if error.kind() == io::ErrorKind::TimedOut => {
                    failures.push(format!("no answer from {address} within {}", seconds(patience)));
                    break;
                }
                Err(error) if output.resolved.len() == 1 => failures.push(describe(&error)),
                Err(error) => failures.push(format!("{address}: {}", describe(&error))),
            }
        }
        Err(fail(format!("cannot connect: {}", failures.join("; "))))
    }
}

/// Listening sockets on exactly `address`: each address its name resolves to, or every
/// interface for a bare port (IPv6 and IPv4, or IPv4 alone where there is no IPv6).
fn bind(address: &Address, log: &Log) -> Result<Vec<OwnedFd>, SetupError> {
    let fail =
        |why: String| SetupError::Unreached(format!("{address}: {why}; nothing was written"));
    let resolved = address.resolve().map_err(|e| fail(describe(&e)))?;
    let mut listeners = Vec::new();
    // Port 0: the system's choice for the first address, the same port for the others.
    let mut port = address.port;
    for mut local in resolved {
        local.set_port(port);
        let both = address.every_interface();
        let listener = match socket::listen(local, both) {
            Err(error) if both && error.raw_os_error() == Some(libc::EAFNOSUPPORT) => {
                local = SocketAddr::from((address::EVERY_IPV4, port));
                socket::listen(local, false)
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
