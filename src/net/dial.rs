//! The side that connects: the first connection, tried again while the peer refuses it
//! (`--connect-for`), and a connection made again after a drop ([`Dialer::again`]), each try
//! through every address the peer's name has, with its own patience; the pauses between
//! tries ([`Pauses`]).
//!
//! Which side connects is not which side sends: a Dialer connects and handshakes (it speaks
//! first: see `handshake/connect.rs`), and what the new session then says (where the stream
//! goes on) is the caller's, given as `settle`. Today only a sender dials.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::address::Address;
use super::channel::Channel;
use super::handshake::{self, Failure, Opening};
use super::key::Key;
use super::seconds;
use super::socket::{self, Socket};
use super::wire::{Hello, Join};
use crate::log::Log;
use crate::stop::Stop;
use crate::words::{describe, duration};

/// The pause between two tries of a first connection: a receiver about to listen does so in
/// well under a second, and a refused try costs a round trip.
const FIRST_TRIES_EVERY: Duration = Duration::from_millis(250);

/// The pause before the first try to connect again after a drop: a reset on a path that is
/// still up (the common case: a NAT or a firewall dropped its state) is over by then, and a
/// refused try costs only a round trip. Then pauses of 1 s, doubling to the longest; each
/// counts from the start of the try before.
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const SECOND_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// What the side that connects needs: the peer's address as typed (resolved again for each
/// try after a drop: the peer's address may have changed), the key that proves this side to
/// it (none over plain TCP, `--insecure`), and the congestion control its sockets ask for.
pub(super) struct Dialer {
    pub(super) address: Address,
    pub(super) key: Option<Arc<Key>>,
    pub(super) congestion: Option<Arc<str>>,
    /// A connection to the peer made before the run ([`super::Peering::dialed`]), which the
    /// first try takes instead of connecting.
    pub(super) dialed: Mutex<Option<Socket>>,
    /// The first message of the stream's first connection, already sent on `dialed`
    /// ([`super::Peering::ahead`]).
    pub(super) ahead: Mutex<Option<Box<Opening>>>,
    /// The connections its stream asks for (`--streams`): above 1, each connection is one
    /// of several (wire version 5).
    pub(super) streams: u8,
    /// Its frames are compressed (`--compress` other than none): each connection speaks
    /// wire version 6 (or 7), whose compressed frames keep the session's history. Cleared
    /// for good when `falls_back` and the receiver turns out older ([`Dialer::compresses`]).
    pub(super) history: AtomicBool,
    /// `--compress auto`: a receiver of an older version (4 or 5: no history) is dialed again
    /// speaking the version without compression, as `--compress none` would, rather than
    /// refused; a level asked for (`zstd:N`) is refused there, as the user asked for it.
    pub(super) falls_back: bool,
}

/// Why a try to connect failed: worth another while the tries last, or not.
pub(super) enum Missed {
    /// The peer refused the connection (nothing listens there yet).
    Refused(String),
    /// No answer, or the connection dropped once the peer had answered: another try may
    /// find it.
    Again(String),
    /// The same peer would answer another try the same way (the keys differ, it has another
    /// stream).
    Final(String),
}

impl Missed {
    /// What the try met, in words; `yet` while there will be another.
    fn words(&self, yet: bool) -> String {
        match self {
            Missed::Refused(why) if yet => format!("cannot connect yet: {why}"),
            Missed::Refused(why) => format!("cannot connect: {why}"),
            Missed::Again(why) | Missed::Final(why) => why.clone(),
        }
    }
}

impl Dialer {
    /// Whether its connections speak the version whose compressed frames keep their history:
    /// `false` once an older receiver made `--compress auto` fall back, and from then on
    /// (the link then sends uncompressed, over every connection, resumed or further).
    pub(super) fn compresses(&self) -> bool {
        self.history.load(Relaxed)
    }

    /// The first connection, to the `resolved` addresses, for the new stream `stream`,
    /// `patience` bounding each try. A peer that refuses (not listening yet: started a moment
    /// after this side), or a connection that drops once the peer has answered but before
    /// the stream began, is tried again every [`FIRST_TRIES_EVERY`] until `connect_for` is
    /// over, the last try then; any other failure is said at once. The socket, and the
    /// session unless over plain TCP; else why, in words.
    pub(super) fn first(
        &self,
        resolved: &[SocketAddr],
        stream: [u8; 16],
        connect_for: Duration,
        patience: Duration,
        log: &Log,
        stop: &Stop,
    ) -> Result<(Arc<Socket>, Option<Channel>), String> {
        let until = Instant::now() + connect_for;
        let mut said = false;
        loop {
            let again = match self.try_first(resolved, stream, 0, patience, log, stop) {
                Ok(connected) => return Ok(connected),
                Err(Missed::Final(why)) => return Err(why),
                Err(again) => again,
            };
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let tried = if said {
                    format!(" (tried for {})", duration(connect_for))
                } else {
                    String::new()
                };
                return Err(format!("{}{tried}", again.words(false)));
            }
            if !said {
                said = true;
                log.warn(format_args!(
                    "{}: {}; trying again for up to {} (--connect-for)",
                    self.address,
                    again.words(true),
                    duration(connect_for)
                ));
            }
            stop.sleep(FIRST_TRIES_EVERY.min(left)).map_err(|e| describe(&e))?;
        }
    }

    /// A further connection of a stream over several, the `index`th, once the first is
    /// established: one try, `patience` bounding it. The session, or why not, in words.
    pub(super) fn join(
        &self,
        resolved: &[SocketAddr],
        stream: [u8; 16],
        index: u8,
        patience: Duration,
        log: &Log,
        stop: &Stop,
    ) -> Result<Channel, String> {
        match self.try_first(resolved, stream, index, patience, log, stop) {
            Ok((_, Some(channel))) => Ok(channel),
            Ok((_, None)) => Err("plain TCP takes one connection".into()),
            Err(missed) => Err(format!("connection {}: {}", index + 1, missed.words(false))),
        }
    }

    /// One try of [`first`](Dialer::first) (or of a further connection of several, the
    /// `index`th): each of the peer's addresses in turn.
    fn try_first(
        &self,
        resolved: &[SocketAddr],
        stream: [u8; 16],
        index: u8,
        patience: Duration,
        log: &Log,
        stop: &Stop,
    ) -> Result<(Arc<Socket>, Option<Channel>), Missed> {
        let deadline = Instant::now() + patience;
        let mut failures = Vec::new();
        let mut refused = true;
        for &address in resolved {
            let hello = Hello { stream, offset: 0, resuming: false };
            let join =
                (self.streams > 1).then_some(Join { index, streams: self.streams, window: 0 });
            // A connection made before the run (to the first address) is this try's, with the
            // first message already sent on it, if it was.
            let dialed = self.dialed.lock().unwrap_or_else(PoisonError::into_inner).take();
            let ahead = self.ahead.lock().unwrap_or_else(PoisonError::into_inner).take();
            let history = self.compresses();
            let opening = match ahead.filter(|_| dialed.is_some()) {
                Some(opening) => Some(*opening),
                None => self.key.as_ref().map(|key| Opening::joining(key, hello, join, history)),
            };
            let connected = match dialed {
                Some(socket) => Ok(socket),
                None => socket::connect(address, self.congestion.as_deref(), stop, deadline),
            };
            match connected {
                Ok(socket) => {
                    log.debug(format_args!(
                        "{}: connected to {address}; the connection's TCP congestion control: {}",
                        self.address,
                        socket.congestion_control()
                    ));
                    let Some(opening) = opening else { return Ok((Arc::new(socket), None)) };
                    let name = self.address.to_string();
                    let hint = Some((name.as_str(), log));
                    // A connection carried by the ssh session cannot be made again: the
                    // receiver that refused it has let it go.
                    let carried = socket.is_carried();
                    return match handshake::initiate(opening, socket, stop, deadline, hint) {
                        Ok(channel) => Ok((Arc::clone(channel.socket()), Some(channel))),
                        // Dialed again at once (the receiver is there), without compression:
                        // once, since the connections speak no history from now on.
                        Err(Failure::NoHistory)
                            if index == 0 && !carried && self.fall_back(log) =>
                        {
                            self.try_first(resolved, stream, index, patience, log, stop)
                        }
                        Err(cut @ Failure::CutAfterAnswer(_)) => {
                            Err(Missed::Again(cut.to_string()))
                        }
                        Err(Failure::NoAnswer) => Err(Missed::Final(format!(
                            "{} (a receiver with --insecure does not answer)",
                            Failure::NoAnswer
                        ))),
                        Err(failure) => Err(Missed::Final(failure.to_string())),
                    };
                }
                Err(error) if error.kind() == io::ErrorKind::TimedOut => {
                    failures.push(format!("no answer from {address} within {}", seconds(patience)));
                    refused = false;
                    break;
                }
                Err(error) => {
                    refused &= error.kind() == io::ErrorKind::ConnectionRefused;
                    if resolved.len() == 1 {
                        failures.push(describe(&error));
                    } else {
                        failures.push(format!("{address}: {}", describe(&error)));
                    }
                }
            }
        }
        let failures = failures.join("; ");
        Err(if refused {
            Missed::Refused(failures)
        } else {
            Missed::Final(format!("cannot connect: {failures}"))
        })
    }

    /// The receiver answered in an older version, without the compressed frames' history:
    /// with `--compress auto`, the connections speak the version without compression from
    /// now on (said once: a notice, not a failure), and `true`; else `false` (a level asked
    /// for is refused there).
    fn fall_back(&self, log: &Log) -> bool {
        if !self.falls_back || !self.history.swap(false, Relaxed) {
            return false;
        }
        log.warn(format_args!(
            "{}: the receiver speaks an older version of accel's protocol, without \
             compression; sending uncompressed",
            self.address
        ));
        true
    }

    /// One try to connect again, saying `hello` (and `join`, for one of several
    /// connections): connects to each of the peer's addresses in
    /// turn, handshakes, and lets `settle` hear or say what the new session must (where the
    /// stream goes on), each address within `patience`. `settle`'s `InvalidData` is final
    /// (the peer asks for what cannot be), its other failures worth another try.
    pub(super) fn again<T>(
        &self,
        hello: Hello,
        join: Option<Join>,
        patience: Duration,
        stop: &Stop,
        mut settle: impl FnMut(&mut Channel, Instant) -> io::Result<T>,
    ) -> Result<(Channel, T), Missed> {
        let Some(key) = &self.key else {
            return Err(Missed::Final("plain TCP does not connect again".into()));
        };
        let addresses: Vec<SocketAddr> =
            self.address.resolve().map_err(|e| Missed::Again(describe(&e)))?;
        let mut failures = Vec::new();
        for address in addresses {
            let deadline = Instant::now() + patience;
            // Whether it connects, handshakes or settles, the same words.
            let no_answer = || format!("{address}: no answer within {}", seconds(patience));
            let opening = Opening::joining(key, hello, join, self.compresses());
            let socket = match socket::connect(address, self.congestion.as_deref(), stop, deadline)
            {
                Ok(socket) => socket,
                Err(error) if error.kind() == io::ErrorKind::TimedOut => {
                    failures.push(no_answer());
                    continue;
                }
                Err(error) => {
                    failures.push(format!("{address}: {}", describe(&error)));
                    continue;
                }
            };
            // The peer answered before: no word of a listener that never answers.
            let mut channel = match handshake::initiate(opening, socket, stop, deadline, None) {
                Ok(channel) => channel,
                Err(failure) if failure.is_final() => {
                    return Err(Missed::Final(failure.to_string()));
                }
                Err(Failure::NoAnswer) => {
                    failures.push(no_answer());
                    continue;
                }
                Err(failure) => {
                    failures.push(format!("{address}: {failure}"));
                    continue;
                }
            };
            match settle(&mut channel, deadline) {
                Ok(settled) => return Ok((channel, settled)),
                Err(error) if error.kind() == io::ErrorKind::InvalidData => {
                    return Err(Missed::Final(describe(&error)));
                }
                Err(error) if error.kind() == io::ErrorKind::TimedOut => failures.push(no_answer()),
                Err(error) => failures.push(format!("{address}: {}", describe(&error))),
            }
        }
        Err(Missed::Again(failures.join("; ")))
    }
}

/// When to try to connect again after a drop: [`FIRST_PAUSE`] after it, then pauses that
/// double from 1 s to 30 s, with jitter, each counted from the start of the try before (a
/// try that waited longer for its answer is followed without a pause).
pub(super) struct Pauses {
    pause: Duration,
    due: Instant,
}

impl Pauses {
    /// The pauses after a drop at `since`.
    pub(super) fn after(since: Instant) -> Pauses {
        Pauses { pause: FIRST_PAUSE, due: since + jittered(FIRST_PAUSE) }
    }

    /// When the next try is due.
    pub(super) fn due(&self) -> Instant {
        self.due
    }

    /// A try starts now: the one after it is due a longer pause from now.
    pub(super) fn trying(&mut self) {
        self.pause = if self.pause < SECOND_PAUSE {
            SECOND_PAUSE
        } else {
            (self.pause * 2).min(LONGEST_PAUSE)
        };
        self.due = Instant::now() + jittered(self.pause);
    }
}

/// `pause`, give or take a quarter, so that senders cut off together do not all come back
/// at the same instant.
fn jittered(pause: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let _ = super::cipher::fill_random(&mut byte);
    // 0.75 to 1.25 times.
    pause.mul_f64(0.75 + f64::from(byte[0]) / 510.0)
}
