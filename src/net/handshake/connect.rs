//! The connecting side's handshake: its first message ([`Opening`]), made before it connects so
//! that it follows the connection at once; the listening side's answer checked; the Start
//! frame that confirms the session. Why it failed is a [`Failure`], whose variant, not its
//! words, says whether another try may do better.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::WRONG_KEY;
use crate::log::Log;
use crate::net::channel::Channel;
use crate::net::key::Key;
use crate::net::socket::Socket;
use crate::net::wire::{self, Cipher, Hello, Join, Kind, PREAMBLE_LEN, Preamble, Version};
use crate::stop::Stop;

/// Why the connecting side's handshake failed (today always the sender's); its words
/// (`Display`) are what the user reads after `accel: HOST:PORT: `. Whether another try may do
/// better is the variant's, not the words'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The receiver did not answer before the deadline.
    NoAnswer,
    /// The receiver closed the connection before answering.
    ClosedEarly,
    /// The connection failed before the receiver answered: how, in words.
    Broken(String),
    /// The connection failed once the receiver had answered, before the sender's Start
    /// frame was out: no session was confirmed, and the receiver still waits for its
    /// sender.
    CutAfterAnswer(String),
    /// The receiver speaks another version of the protocol.
    OtherVersion,
    /// The receiver speaks version 4, which takes one connection per stream: it is older
    /// than `--streams`.
    Single,
    /// The receiver speaks version 4 or 5, whose compressed frames do not keep the
    /// session's history: it is older than this `--compress`.
    NoHistory,
    /// Not an accel receiver.
    NotAccel,
    /// The receiver refused the first message: the keys differ.
    WrongKey,
    /// The receiver's answer failed authentication.
    AnswerAltered,
    /// The receiver has a stream of another sender's.
    Busy,
    /// The receiver never had the stream the sender goes on with.
    UnknownStream,
    /// The answer is not one accel gives (the Welcome's value, when there was one).
    Malformed(Option<u64>),
}

impl Failure {
    /// Whether trying again cannot help: the same receiver would refuse the same way.
    pub fn is_final(&self) -> bool {
        matches!(
            self,
            Failure::WrongKey
                | Failure::Busy
                | Failure::UnknownStream
                | Failure::Single
                | Failure::NoHistory
        )
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::NoAnswer => f.write_str("no answer to the handshake in time"),
            Failure::ClosedEarly => f.write_str(
                "the receiver closed the connection during the handshake (is it accel, with the \
                 same --insecure choice?)",
            ),
            Failure::Broken(why) => write!(f, "handshake: {why}"),
            Failure::CutAfterAnswer(why) => {
                write!(f, "the connection dropped right after the handshake ({why})")
            }
            Failure::OtherVersion => {
                f.write_str("the receiver speaks another version of accel's protocol")
            }
            Failure::Single => f.write_str(
                "the receiver does not take several streams: it speaks version 4 of accel's \
                 protocol, one connection per stream (an older accel); --streams 1 talks to it",
            ),
            Failure::NoHistory => f.write_str(
                "the receiver does not take this --compress: it speaks an older version of \
                 accel's protocol, whose compressed frames keep no history (an older accel); \
                 --compress none talks to it",
            ),
            Failure::NotAccel => f.write_str("not an accel receiver (it answered something else)"),
            Failure::WrongKey => f.write_str(WRONG_KEY),
            Failure::AnswerAltered => f.write_str(
                "the receiver's answer to the handshake failed authentication: it was altered on \
                 the way (the receiver had accepted the key)",
            ),
            Failure::Busy => {
                f.write_str("the receiver is busy with another stream (another sender's)")
            }
            Failure::UnknownStream => f.write_str(
                "the receiver does not have this stream: it is not the receiver the stream \
                 started with (restarted?)",
            ),
            Failure::Malformed(Some(welcome)) => {
                write!(f, "a malformed handshake from the receiver ({welcome})")
            }
            Failure::Malformed(None) => f.write_str("a malformed handshake from the receiver"),
        }
    }
}

/// The connecting side's first handshake message, made before it connects: the moment the
/// connection is up, the message follows, so that a receiver busy with a flood of silent
/// connections sees this one speak at once (the key exchange takes a while in a debug build).
pub struct Opening {
    cipher: Cipher,
    noise: snow::HandshakeState,
    first: Vec<u8>,
    stream: [u8; 16],
    join: Option<Join>,
    version: Version,
    /// The first message is already on its way ([`Opening::send_ahead`]).
    sent: bool,
}

impl Opening {
    /// A fresh handshake with `key`, saying `hello` (a new stream, or one to go on with).
    pub fn new(key: &Key, hello: Hello) -> Opening {
        Opening::joining(key, hello, None, false)
    }

    /// [`Opening::new`], for one of several connections of the stream when `join` says
    /// which (wire version 5), and with compressed frames that keep the session's history
    /// when `history` (a sender that compresses; version 6, or 7).
    pub fn joining(key: &Key, hello: Hello, join: Option<Join>, history: bool) -> Opening {
        let cipher = Cipher::fastest_here();
        let version = Version { several: join.is_some(), history };
        let mut noise = wire::handshake_of(cipher, key, true, version);
        let mut message = vec![0u8; wire::MAX_MESSAGE];
        let said = match join {
            Some(join) => noise.write_message(&join.encode_hello(&hello), &mut message),
            None => noise.write_message(&hello.encode(), &mut message),
        };
        let len = said.expect("a short message");
        let mut first = wire::preamble_of(cipher, version).to_vec();
        first.extend_from_slice(&(len as u16).to_be_bytes());
        first.extend_from_slice(&message[..len]);
        Opening { cipher, noise, first, stream: hello.stream, join, version, sent: false }
    }

    /// The stream its Hello names.
    pub fn stream(&self) -> [u8; 16] {
        self.stream
    }

    /// Sends the first message now, on a connection (blocking) that the run then takes with
    /// this opening: accel started through ssh sends it right behind its request, or right on
    /// the direct connection, so that it does not wait for the run to start. The message
    /// proves the key to a listener that holds it, and carries no data.
    pub fn send_ahead(&mut self, to: &mut impl io::Write) -> io::Result<()> {
        to.write_all(&self.first)?;
        self.sent = true;
        Ok(())
    }
}

/// An [`Opening`] already sent on the connection made before the run
/// (`net::Peering::dialed` or `carried`), for the run's first try on it.
#[derive(Clone)]
pub struct Ahead(Arc<Mutex<Option<Opening>>>);

impl Ahead {
    /// `opening`, sent ([`Opening::send_ahead`]).
    pub fn new(opening: Opening) -> Ahead {
        Ahead(Arc::new(Mutex::new(Some(opening))))
    }

    /// The opening, once.
    pub fn take(&self) -> Option<Opening> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl PartialEq for Ahead {
    fn eq(&self, other: &Ahead) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Ahead {}

impl std::fmt::Debug for Ahead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ahead(..)")
    }
}

/// How long the sender waits for the receiver's answer before it says that it waits: an
/// accel answers in milliseconds, a plain `mbuffer -I` (or any listener that only reads)
/// never, and the deadline is tens of seconds away.
const QUIET_HINT: Duration = Duration::from_secs(3);

/// The connecting side's handshake, `opening`, on a connected `socket`: on success, the
/// session, whose Start frame has been sent. On a first connection, `hint` names the receiver
/// as typed and where to say that it has not answered yet, and what that may mean; a
/// receiver that is reconnected to answered before, so nothing is said then.
pub fn initiate(
    opening: Opening,
    socket: Socket,
    stop: &Stop,
    deadline: Instant,
    hint: Option<(&str, &Log)>,
) -> Result<Channel, Failure> {
    let io_error = |error: io::Error| match error.kind() {
        io::ErrorKind::TimedOut => Failure::NoAnswer,
        io::ErrorKind::UnexpectedEof => Failure::ClosedEarly,
        _ => Failure::Broken(crate::words::describe(&error)),
    };
    let Opening { cipher, mut noise, first, stream, join, version, sent } = opening;
    if !sent {
        socket.write_all(&first, stop, Some(deadline)).map_err(io_error)?;
    }

    let mut head = [0u8; PREAMBLE_LEN + 2];
    let hint_at = (Instant::now() + QUIET_HINT).min(deadline);
    if let Some((name, log)) = hint.filter(|_| hint_at < deadline) {
        if !socket.readable_by(stop, hint_at).map_err(io_error)? {
            log.warn(format_args!(
                "{name}: no answer to the handshake yet; a plain TCP listener such as mbuffer -I \
                 never answers (--insecure talks to one)"
            ));
        }
    }
    read_exact(&socket, &mut head, stop, deadline).map_err(io_error)?;
    match wire::read_preamble(&head[..PREAMBLE_LEN]) {
        Preamble::Accel(answered, spoken) if answered == cipher && spoken == version => {}
        // A receiver of an older version answers with its own preamble: version 4 to any
        // later one, version 5 to version 7.
        Preamble::Accel(_, spoken) if version.history && !spoken.history => {
            return Err(Failure::NoHistory);
        }
        Preamble::Accel(_, spoken) if version.several && !spoken.several => {
            return Err(Failure::Single);
        }
        Preamble::Accel(..) | Preamble::OtherVersion => return Err(Failure::OtherVersion),
        Preamble::Foreign => return Err(Failure::NotAccel),
    }
    let len = usize::from(u16::from_be_bytes([head[PREAMBLE_LEN], head[PREAMBLE_LEN + 1]]));
    if len == 0 {
        // The receiver's word that our first message failed; unauthenticated, but whoever
        // could forge it could as well cut the connection.
        return Err(Failure::WrongKey);
    }
    let mut answer = vec![0u8; len];
    read_exact(&socket, &mut answer, stop, deadline).map_err(io_error)?;
    let mut welcome = [0u8; 64];
    // The receiver answers only a first message made with its key (else the empty answer
    // above): an answer that fails was altered on the way.
    let got = noise.read_message(&answer, &mut welcome).map_err(|_| Failure::AnswerAltered)?;
    let (status, terms) = match join {
        Some(join) => match Join::decode_welcome(&welcome[..got], join.index) {
            Some((status, terms)) => (Ok(status), Some(terms)),
            None => (Err(()), None),
        },
        None => (welcome[..got].try_into().map(u64::from_be_bytes).map_err(|_| ()), None),
    };
    match status {
        Ok(0) => {}
        Ok(wire::BUSY) => return Err(Failure::Busy),
        Ok(wire::UNKNOWN_STREAM) => return Err(Failure::UnknownStream),
        Ok(welcome) => return Err(Failure::Malformed(Some(welcome))),
        Err(()) => return Err(Failure::Malformed(None)),
    }
    if let Some((name, log)) = hint {
        log.debug(format_args!("{name}: the receiver answered the handshake"));
    }
    let noise = noise.into_transport_mode().map_err(|e| Failure::Broken(e.to_string()))?;
    let mut channel = Channel::new(Arc::new(socket), noise, &[]);
    channel.set_stream(stream);
    if let Some(terms) = terms {
        channel.join(terms);
    }
    // The receiver proved it holds the key; what fails now is the connection, before the
    // session is confirmed: the receiver has no stream yet.
    channel
        .send_frame(Kind::Start, &[], stop, Some(deadline))
        .map_err(|error| Failure::CutAfterAnswer(crate::words::describe(&error)))?;
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
