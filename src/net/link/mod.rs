//! A network peer over any number of connections: one stream that survives a dropped
//! connection, resuming at the exact byte.
//!
//! A [`Link`] holds the session in use ([`Channel`]), which a reconnection replaces. Its
//! endpoint's thread reads or writes through it; a thread of the link's own tends it
//! ([`Link::tend`]):
//!
//! - A sender's takes in the receiver's confirmations while the output has nothing to send
//!   (so that the backlog lets go of what was confirmed), says it is there when it has sent
//!   nothing for a heartbeat, and notices a receiver silent for [`SILENT_BEATS`] of them.
//!   When the connection drops, it connects again 0.2 s later, then 1 s after, doubling to
//!   30 s, with jitter, and a last time at the end of `--reconnect-for`, each try waiting a
//!   heartbeat for its answer ([`Resume::try_patience`]); the output then goes on from where
//!   the receiver's Resume frame says ([`Resumed`]): the backlog kept every byte not
//!   confirmed, and the output is sent back there even while it waits for data.
//! - A receiver's waits for a sender that connects again (longer than the sender tries:
//!   [`Resume::receiver_waits`]), and takes it back once it has
//!   proved, in a session of its own, that it holds the key and names the same stream: a
//!   stranger, or a recorded handshake replayed, never gets that far, so it cannot take a
//!   stream over or push a healthy connection out. The input then goes on from the first
//!   byte it has not handed out; no byte is written twice or skipped.
//!
//! Plain TCP (`--insecure`) has no offsets: its link is its one socket, and a drop is the
//! end of the run, as it always was.
//!
//! Today the sender is the side that connects and the receiver the side that listens; in
//! the code, what an end of the stream does (its [`Role`]) and how a dropped connection comes
//! back ([`Reconnect`]) are apart. This file is the link and what outlives a connection
//! ([`Session`]'s counts, the outage); [`send`] is the output's side (writing, the end of the
//! stream, the sender's round of tending, going on after a drop), [`receive`] the input's
//! (reading, the confirmations, taking the sender back), [`tend`] the thread that tends the
//! link and gets its connection back.

mod receive;
mod send;
mod several;
mod tend;

pub(super) use tend::{Listening, Reconnect};

use std::fmt;
use std::io;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::channel::Channel;
use super::compress::{Compress, Compressor};
use super::is_drop;
use super::socket::Socket;
use crate::backlog::Keep;
use crate::log::Log;
use crate::meter::{Delivery, Meter, Peer, Wire};
use crate::stop::Stop;
use crate::words::{byte_count, describe, duration};

/// Heartbeats a peer may miss before the path counts as dead.
pub const SILENT_BEATS: u32 = 4;

/// How long the words after a run (the Abort, the end of tending) wait for the session that
/// another thread holds.
const ABORT_PATIENCE: Duration = Duration::from_secs(1);

/// The least a try to connect again waits for its answer (see [`Resume::try_patience`]).
const LEAST_TRY: Duration = Duration::from_secs(1);

/// How a stream outlives its connections (`--reconnect-for`, `--heartbeat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resume {
    /// How long a connection may stay down before the run fails; zero: at once.
    pub within: Duration,
    /// How often a side that has sent nothing says it is there.
    pub heartbeat: Duration,
}

impl Default for Resume {
    fn default() -> Resume {
        Resume { within: Duration::from_secs(600), heartbeat: Duration::from_secs(5) }
    }
}

impl Resume {
    /// How long a peer may say nothing before the path counts as dead.
    pub fn silence(&self) -> Duration {
        self.heartbeat * SILENT_BEATS
    }

    /// How long one try to connect again may take, its handshake and the receiver's word of
    /// where to go on: a heartbeat, at least a second. The receiver answered well within a
    /// heartbeat before the drop; a try that waits longer waits on a path still dead (a
    /// tunnel whose far side is gone takes the connection at once, and answers never),
    /// where a new try would find it back.
    pub fn try_patience(&self) -> Duration {
        self.heartbeat.max(LEAST_TRY)
    }

    /// How long a receiver waits for its sender to come back: `--reconnect-for`, and as
    /// long again as the sender may see the drop after it (the peer's silence) and as its
    /// last try may take: so that the sender's last try, at the end of its own
    /// `--reconnect-for`, finds the receiver there.
    pub fn receiver_waits(&self) -> Duration {
        self.within + self.silence() + self.try_patience()
    }
}

/// The error a secure output's write or end returns once its connection is back: the
/// receiver has every byte before `at`, and the output goes on from there ([`resumed_at`]).
#[derive(Debug)]
pub struct Resumed {
    /// Where the stream goes on.
    pub at: u64,
}

impl fmt::Display for Resumed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the connection is back; the stream goes on from byte {}", self.at)
    }
}

impl std::error::Error for Resumed {}

/// Where the stream goes on, when `error` says the connection is back ([`Resumed`]).
pub fn resumed_at(error: &io::Error) -> Option<u64> {
    error.get_ref()?.downcast_ref::<Resumed>().map(|resumed| resumed.at)
}

/// Which end of the stream a link is. Not which end connected: that is how the link gets
/// its connection back ([`tend`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It sends the stream: a `--to` output.
    Sender,
    /// It receives the stream: the `--from` input.
    Receiver,
}

/// A network peer: its name, and its session once established.
pub struct Link {
    role: Role,
    secure: bool,
    /// The address as the user gave it, for messages.
    name: String,
    resume: Resume,
    log: Arc<Log>,
    /// The first connection's socket: a plain peer's for the whole run.
    socket: OnceLock<Arc<Socket>>,
    session: Mutex<Session>,
    /// Signalled when the session changes: dropped, back, or given up.
    changed: Condvar,
    /// Where its counts are published.
    meter: OnceLock<(Arc<Meter>, Peer)>,
    /// A sender's hold on the bytes its receiver has not confirmed.
    keep: OnceLock<Keep>,
    /// The thread that tends it, and that thread's own stop.
    tending: Mutex<Option<(JoinHandle<()>, Arc<Stop>)>>,
    /// A receiver's thread that confirms deliveries ([`super::Confirming`]), woken when
    /// the sender asks; and, if it asked, the stream offset its word must reach (the
    /// receiving side's word: the sender's is [`Session`]'s `awaits_count`).
    confirmer: OnceLock<thread::Thread>,
    asked: Mutex<Option<u64>>,
    /// The last count a receiver told its sender, told again in each new session.
    told: AtomicU64,
    /// The stream over several connections (`--streams`), which then carry it instead of
    /// the session ([`several`]).
    several: OnceLock<Arc<several::Several>>,
    /// What each frame's payload becomes (`--compress`): the setting, for each of several
    /// connections' own compressor (none until told, and again once an older receiver made
    /// auto fall back).
    compress_setting: Mutex<Compress>,
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut link = f.debug_struct("Link");
        link.field("name", &self.name).field("role", &self.role);
        link.field("secure", &self.secure).finish()
    }
}

/// The session in use, and what outlives it.
#[derive(Default)]
struct Session {
    channel: Option<Channel>,
    /// The stream's name.
    stream: [u8; 16],
    /// Sessions since the first; the output learns of a new one at its next write.
    generation: u64,
    /// The session the output writes in (sending side).
    writing: u64,
    /// Where the newest session goes on.
    resume_at: u64,
    /// Sending side: bytes sent, and confirmed by the receiver, over every session; and the
    /// furthest byte sealed, which a connection cut mid-write may have carried.
    sent: u64,
    confirmed: u64,
    reached: u64,
    /// Receiving side: the End came.
    ended: bool,
    /// Sending side: what each frame's payload becomes (`--compress`), over every session,
    /// and when its counts were last published.
    compressor: Option<Compressor>,
    wire_published: Option<Instant>,
    /// Receiving side: the Data frames opened, over every session (published as the
    /// sender's are, at most every [`WIRE_EVERY`](send::WIRE_EVERY)).
    received_wire: Wire,
    /// The connection is down: since when, and why.
    down: Option<(Instant, String)>,
    /// Attempts to connect again in this outage.
    tries: u64,
    /// Sending side: a confirmation was asked for when this much was confirmed, and has
    /// not come since.
    awaits_count: Option<u64>,
    /// The link gave up: every later call fails so.
    failed: Option<(io::ErrorKind, String)>,
    /// The run is over: the tending thread ends.
    over: bool,
}

impl Session {
    fn failure(&self) -> Option<io::Error> {
        self.failed.as_ref().map(|(kind, why)| io::Error::new(*kind, why.clone()))
    }
}

impl Link {
    /// The `role` end of a stream, to a peer known as `name`, not yet connected.
    pub fn new(role: Role, secure: bool, name: String, resume: Resume, log: Arc<Log>) -> Arc<Link> {
        Arc::new(Link {
            role,
            secure,
            name,
            resume,
            log,
            socket: OnceLock::new(),
            session: Mutex::new(Session::default()),
            changed: Condvar::new(),
            meter: OnceLock::new(),
            keep: OnceLock::new(),
            tending: Mutex::new(None),
            confirmer: OnceLock::new(),
            asked: Mutex::new(None),
            told: AtomicU64::new(0),
            several: OnceLock::new(),
            compress_setting: Mutex::new(Compress::None),
        })
    }

    /// Compresses the frames it sends as `setting` says (a sender's; the receiver takes what
    /// each frame says). Before the run: before it is established, or once its first
    /// connection says what the receiver takes (none, from an older one).
    pub fn compress(&self, setting: Compress) {
        self.lock().compressor = Some(Compressor::new(setting, Some(Arc::clone(&self.log))));
        *self.compress_setting.lock().unwrap_or_else(PoisonError::into_inner) = setting;
    }

    /// What each frame's payload becomes, for a connection's own compressor.
    fn compress_setting(&self) -> Compress {
        *self.compress_setting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The peer's address, as the user gave it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether bytes go through the secure channel (not `--insecure`).
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// Whether a dropped connection is resumed: a secure link, with `--reconnect-for` above 0.
    pub fn resumes(&self) -> bool {
        self.secure && !self.resume.within.is_zero() && self.several.get().is_none()
    }

    /// The first connection's socket: a plain peer's, read, written and spliced as a pipe.
    ///
    /// # Panics
    /// Before the link is established: the run starts only after.
    pub fn socket(&self) -> &Socket {
        self.socket.get().expect("the link is established before the run")
    }

    fn lock(&self) -> MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session, unless another thread holds it for longer than `patience`: one of the
    /// run's that never ended may hold it for ever, so the last words after a run do not wait
    /// for it (a tending round holds it for microseconds).
    fn lock_within(&self, patience: Duration) -> Option<MutexGuard<'_, Session>> {
        let until = Instant::now() + patience;
        loop {
            match self.session.try_lock() {
                Ok(session) => return Some(session),
                Err(TryLockError::Poisoned(poisoned)) => return Some(poisoned.into_inner()),
                Err(TryLockError::WouldBlock) if Instant::now() >= until => return None,
                Err(TryLockError::WouldBlock) => thread::sleep(Duration::from_millis(1)),
            }
        }
    }

    /// Makes this output reader `index` of `meter`: what its bytes mean ([`Delivery`]), and
    /// where what its receiver confirms, and its outages, are published.
    pub fn report_to(&self, meter: &Arc<Meter>, index: usize) {
        let delivery = if self.secure { Delivery::Confirmed } else { Delivery::Unconfirmed };
        meter.set_delivery(index, delivery);
        let _ = self.meter.set((Arc::clone(meter), Peer::Output(index)));
    }

    /// Makes this input's outages published in `meter`.
    pub fn report_input_to(&self, meter: &Arc<Meter>) {
        let _ = self.meter.set((Arc::clone(meter), Peer::Input));
    }

    fn publish(&self, what: impl Fn(&Meter, Peer)) {
        if let Some((meter, peer)) = self.meter.get() {
            what(meter, *peer);
        }
    }

    /// The connection dropped, for `error`: it is let go, and said so. An error when it
    /// cannot come back (plain TCP, `--reconnect-for 0`, or a failure that is no drop: data
    /// altered, the receiver stopped).
    fn dropped(&self, session: &mut Session, error: io::Error) -> io::Result<()> {
        if !self.resumes() || !is_drop(&error) || session.over {
            return Err(error);
        }
        let Some(mut channel) = session.channel.take() else { return Ok(()) };
        channel.abandon();
        let sending = self.role == Role::Sender;
        let place = if sending {
            session.sent = channel.sent();
            session.reached = channel.reached();
            session.confirmed = session.confirmed.max(channel.confirmed());
            format!("{} delivered", byte_count(session.confirmed))
        } else {
            session.resume_at = channel.handed_out();
            session.ended |= channel.ended();
            format!("{} received", byte_count(session.resume_at))
        };
        let why = describe(&error);
        let (next, waits) = match sending {
            true => ("connecting again", self.resume.within),
            false => ("waiting for the sender to come back", self.resume.receiver_waits()),
        };
        self.log.warn(format_args!(
            "{}: connection dropped ({why}) after {place}; {next} for up to {}",
            self.name,
            duration(waits)
        ));
        session.down = Some((Instant::now(), why));
        session.tries = 0;
        self.publish(|meter, peer| meter.connection_down(peer));
        self.changed.notify_all();
        Ok(())
    }

    /// Waits, until the run's `stop`, for the session to come back, or for the link to give
    /// up: at the end of `--reconnect-for`, which the receiving side decides here (the
    /// sending side's tending thread decides as it tries).
    fn await_session<'a>(
        &'a self,
        mut session: MutexGuard<'a, Session>,
        stop: &Stop,
    ) -> io::Result<MutexGuard<'a, Session>> {
        while session.channel.is_none() && session.failed.is_none() {
            stop.check()?;
            let Some((since, why)) = session.down.clone() else {
                return Err(io::Error::other("the link was never established"));
            };
            let deadline = since + self.resume.receiver_waits();
            let now = Instant::now();
            if now >= deadline && self.role == Role::Receiver {
                session.failed = Some((
                    io::ErrorKind::TimedOut,
                    format!(
                        "the sender did not come back within {} after the connection dropped \
                         ({why})",
                        duration(self.resume.receiver_waits())
                    ),
                ));
                break;
            }
            let step = deadline.saturating_duration_since(now).min(Duration::from_millis(100));
            let step = step.max(Duration::from_millis(10));
            session = self
                .changed
                .wait_timeout(session, step)
                .map_or_else(|e| e.into_inner().0, |(guard, _)| guard);
        }
        Ok(session)
    }

    /// Fits a connection's socket to this end's side of the stream, whichever side connected:
    /// a sender's gets the widest send buffer, a receiver's its window open from the start.
    /// Every connection the link takes, first or back after a drop, one of several or alone.
    pub(super) fn fit(&self, socket: &Socket) {
        match self.role {
            Role::Sender => socket.widen_send_buffer(),
            Role::Receiver => socket.open_receive_window(),
        }
    }

    /// Establishes the link on its first connection: its socket (fitted, [`Link::fit`]), and
    /// the session over it (none over plain TCP).
    pub(super) fn establish(&self, socket: Arc<Socket>, channel: Option<Channel>) {
        self.fit(&socket);
        assert!(self.socket.set(socket).is_ok(), "a link is established once");
        let mut session = self.lock();
        if let Some(mut channel) = channel {
            channel.set_silence(self.resume.silence());
            session.stream = channel.stream();
            session.channel = Some(channel);
        }
    }

    /// The run is over: the tending thread ends, and is joined (for 5 s at most). Not
    /// waiting for the session: a thread of the run that never ended may hold it.
    pub fn close(&self) {
        if let Some(several) = self.several.get() {
            Link::close_several(several);
        }
        if let Some(mut session) = self.lock_within(ABORT_PATIENCE) {
            session.over = true;
        }
        self.changed.notify_all();
        let tending = self.tending.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some((thread, stop)) = tending {
            stop.request();
            stop.join(thread, Duration::from_secs(5));
        }
    }

    /// Gives up the link for good, for `why`: every later call fails so, and the output,
    /// even one waiting for data, stops at once.
    fn give_up(&self, session: &mut Session, kind: io::ErrorKind, why: String) {
        session.failed = Some((kind, why));
        if let Some(keep) = self.keep.get() {
            keep.stop_reader();
        }
        self.changed.notify_all();
    }

    /// The reason the link gave up, if it did.
    pub fn failure(&self) -> Option<io::Error> {
        let several = self.several.get().and_then(|several| several.failure());
        several.or_else(|| self.lock().failure())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backlog::{Front, Gates, Space, backlog};
    use crate::net::channel::{Frame, tests::session};
    use crate::net::socket;
    use crate::net::wire::Cipher;
    use crate::stop::wait_for;
    use rustix::event::PollFlags;

    /// A sender whose buffer one piece fills (`-m 1M`: the backlog hands its reader 1 MiB)
    /// asks for the word that lets it go as it sends that piece: the piece counts, though
    /// the reader passes it only once written. Counted before, the buffer never looked
    /// pressed, nothing asked, and the receiver confirmed at its own round: 50 ms a MiB.
    #[test]
    fn a_write_that_fills_the_buffer_asks_for_the_word() {
        let (near, far) = socket::pair();
        let (sender, mut receiver) = session(Cipher::AesGcm, near, far);
        let log = Arc::new(Log::new(true, false));
        let link = Link::new(Role::Sender, true, "peer".into(), Resume::default(), log.clone());
        link.establish(Arc::clone(sender.socket()), Some(sender));
        let capacity = 1 << 20;
        let meter = Arc::new(Meter::new(capacity as u64, 1));
        let (mut producer, mut readers) =
            backlog(capacity, 1, Gates::default(), None, meter, log).unwrap();
        let mut reader = readers.pop().unwrap();
        link.keep_until_confirmed(reader.keep());
        let mut filled = 0;
        while filled < capacity {
            let Some(Space::Memory(mut space)) = producer.reserve().unwrap() else {
                panic!("memory, for a reader that is there")
            };
            let n = space.as_mut_slice().len().min(capacity - filled);
            space.commit(n);
            filled += n;
        }
        let stop = Stop::default();
        thread::scope(|scope| {
            let receiving = scope.spawn(|| {
                let mut buf = vec![0u8; capacity];
                let mut got = 0;
                while got < capacity {
                    got += receiver.receive(&mut buf[got..], &stop).unwrap();
                }
                // The ask follows the piece: opened with it, or still to come.
                let until = Instant::now() + Duration::from_secs(30);
                let socket = Arc::clone(receiver.socket());
                loop {
                    if let Some(upto) = receiver.take_asked() {
                        return Some(upto);
                    }
                    match receiver.open_next(&mut []).unwrap() {
                        Some(Frame::Heartbeat) => return Some(receiver.handed_out()),
                        Some(other) => panic!("a heartbeat, not {other:?}"),
                        // Within a generous time: no ask is a timeout, not a hang.
                        None if wait_for(socket.fd(), PollFlags::IN, &stop, Some(until))
                            .is_err() =>
                        {
                            return None;
                        }
                        None => receiver.read_sealed_now().unwrap(),
                    };
                }
            });
            // As an output does: write what is in front, then pass it.
            let mut passed = 0;
            while passed < capacity {
                let Some(Front::Memory(piece)) = reader.front() else { panic!("bytes ahead") };
                let n = link.write(piece.as_slice(), &stop).unwrap();
                reader.consume(n);
                passed += n;
            }
            let asked = receiving.join().unwrap();
            assert_eq!(asked, Some(capacity as u64), "asked, once the buffer was sent");
        });
    }

    #[test]
    fn an_abort_waits_out_a_tending_round_that_holds_the_session() {
        let (near, far) = socket::pair();
        let (sender, mut receiver) = session(Cipher::AesGcm, near, far);
        let log = Arc::new(Log::new(true, false));
        let link = Link::new(Role::Sender, true, "peer".into(), Resume::default(), log);
        link.establish(Arc::clone(sender.socket()), Some(sender));
        let (held, release) = (std::sync::Barrier::new(2), Duration::from_millis(100));
        thread::scope(|scope| {
            scope.spawn(|| {
                let _round = link.lock();
                held.wait();
                thread::sleep(release);
            });
            held.wait();
            link.abort("stopped by SIGINT");
        });
        let mut buf = [0u8; 64];
        // Within a generous time: an Abort that never came is a timeout, not a hang.
        let until = Some(Instant::now() + Duration::from_secs(30));
        let heard = receiver.receive_until(&mut buf, &Stop::default(), until);
        let error = heard.expect_err("the Abort, not data or an end");
        assert!(error.to_string().contains("stopped by SIGINT"), "{error}");
    }
}
