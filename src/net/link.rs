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

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustix::event::PollFlags;

use super::address::Address;
use super::channel::Channel;
use super::handshake::{self, Failure, Opening};
use super::key::Key;
use super::socket::{self, Socket};
use super::wire::Hello;
use super::{closed_by_peer, is_drop, seconds};
use crate::backlog::Keep;
use crate::log::Log;
use crate::meter::{Delivery, Meter, Peer};
use crate::stop::{Stop, wait_for};
use crate::words::{byte_count, describe, duration};

/// Heartbeats a peer may miss before the path counts as dead.
pub const SILENT_BEATS: u32 = 4;

/// The pause before the first attempt to connect again: a reset on a path that is still up
/// (the common case: a NAT or a firewall dropped its state) is over at once. Then pauses of
/// 1 s, doubling to the longest; each counts from the start of the try before.
const FIRST_PAUSE: Duration = Duration::from_millis(200);
const SECOND_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

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

/// A network peer: its name, and its session once established.
pub struct Link {
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
    /// the sender asks; and whether it asked.
    confirmer: OnceLock<thread::Thread>,
    asked: AtomicBool,
    /// The last count a receiver told its sender, told again in each new session.
    told: AtomicU64,
}

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link").field("name", &self.name).field("secure", &self.secure).finish()
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
    /// The connection is down: since when, and why.
    down: Option<(Instant, String)>,
    /// Attempts to connect again in this outage.
    tries: u64,
    /// Sending side: a confirmation was asked for when this much was confirmed, and has
    /// not come since.
    asked: Option<u64>,
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
    /// A peer known as `name`, not yet connected.
    pub fn new(secure: bool, name: String, resume: Resume, log: Arc<Log>) -> Arc<Link> {
        Arc::new(Link {
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
            asked: AtomicBool::new(false),
            told: AtomicU64::new(0),
        })
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
        self.secure && !self.resume.within.is_zero()
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

    /// Keeps the output's bytes in the backlog until the receiver confirms them, so that a
    /// dropped connection can go on: with `keep`, the reader's hold.
    pub fn keep_until_confirmed(&self, keep: Keep) {
        let _ = self.keep.set(keep);
    }

    /// Publishes what the receiver confirmed, and whether the Ack is awaited; lets the backlog
    /// go of it.
    fn heard(&self, confirmed: u64, awaiting: bool) {
        if let Some((meter, Peer::Output(index))) = self.meter.get() {
            meter.confirmed(*index, confirmed, awaiting);
        }
        if let Some(keep) = self.keep.get() {
            keep.release(confirmed);
        }
    }

    fn publish(&self, what: impl Fn(&Meter, Peer)) {
        if let Some((meter, peer)) = self.meter.get() {
            what(meter, *peer);
        }
    }

    /// Reads what has arrived, up to `buf.len()` (0 at the end of the stream): through the
    /// session, or from the plain socket, until the run's `stop`. The session is not held
    /// while waiting for the socket, so that confirmations go out meanwhile. A dropped
    /// connection is waited for, while it may come back.
    pub fn read(&self, buf: &mut [u8], stop: &Stop) -> io::Result<usize> {
        if !self.secure {
            return self.socket().read(buf, stop, None);
        }
        let mut session = self.lock();
        loop {
            if let Some(error) = session.failure() {
                return Err(error);
            }
            let Some(channel) = session.channel.as_mut() else {
                session = self.await_session(session, stop)?;
                continue;
            };
            let received = channel.receive_until(buf, stop, Some(Instant::now()));
            // The sender asks for a confirmation when its buffer fills with unconfirmed
            // bytes; often its last word before it waits.
            if let (true, Some(confirmer)) = (channel.take_asked(), self.confirmer.get()) {
                self.asked.store(true, Relaxed);
                confirmer.unpark();
            }
            match received {
                Err(error) if error.kind() == io::ErrorKind::TimedOut => {
                    session = self.await_sender(session, stop)?;
                }
                Ok(n) => {
                    session.ended |= channel.ended();
                    return Ok(n);
                }
                Err(error) => self.dropped(&mut session, error)?,
            }
        }
    }

    /// Writes some of `buf` (at least a byte): through the session, or to the plain socket,
    /// until the run's `stop`. Once a dropped connection is back, a [`Resumed`] error says
    /// where the stream goes on.
    pub fn write(&self, buf: &[u8], stop: &Stop) -> io::Result<usize> {
        if !self.secure {
            return self.socket().write(buf, stop).map_err(|e| closed_by_peer(e, "the receiver"));
        }
        let mut session = self.lock();
        loop {
            if let Some(error) = self.check_writing(&mut session) {
                return Err(error);
            }
            let asked = session.asked;
            let Some(channel) = session.channel.as_mut() else {
                session = self.await_session(session, stop)?;
                continue;
            };
            let sent = channel.send(buf, stop);
            self.heard(channel.confirmed(), false);
            match sent {
                Ok(n) => {
                    // The buffer fills with what the receiver has not confirmed: ask for the
                    // word now rather than at its next round (50 ms), which on a fast link
                    // would leave the buffer full and the input waiting. Once per word.
                    let confirmed = channel.confirmed();
                    if asked.is_some_and(|asked| confirmed > asked) {
                        session.asked = None;
                    }
                    let pressing = self.keep.get().is_some_and(Keep::pressing);
                    if session.asked.is_none() && pressing {
                        session.asked = Some(confirmed);
                        let asked = session.channel.as_mut().map_or(Ok(()), |c| c.ask(stop));
                        // The bytes went; the connection's failure is a drop like any other,
                        // met again at the next write.
                        if let Err(error) = asked {
                            self.dropped(&mut session, error)?;
                        }
                    }
                    return Ok(n);
                }
                Err(error) => self.dropped(&mut session, error)?,
            }
        }
    }

    /// What the output must hear before it writes on: the link gave up, or a new session
    /// goes on from elsewhere ([`Resumed`]).
    fn check_writing(&self, session: &mut Session) -> Option<io::Error> {
        if let Some(error) = session.failure() {
            return Some(error);
        }
        if session.writing != session.generation && session.channel.is_some() {
            session.writing = session.generation;
            return Some(io::Error::other(Resumed { at: session.resume_at }));
        }
        None
    }

    /// An output's end, once it has sent every byte of a stream that ended cleanly: the End
    /// frame, then the receiver's confirmations until its Ack, published as they come. Until
    /// the run's `stop`, which a stall or a signal requests. Nothing to do over plain TCP.
    pub fn end_stream(&self, stop: &Stop) -> io::Result<()> {
        if !self.secure {
            return Ok(());
        }
        let mut session = self.lock();
        loop {
            if let Some(error) = self.check_writing(&mut session) {
                return Err(error);
            }
            let Some(channel) = session.channel.as_mut() else {
                session = self.await_session(session, stop)?;
                continue;
            };
            match channel
                .end_stream(stop, &mut |confirmed, awaiting| self.heard(confirmed, awaiting))
            {
                Ok(()) => {
                    // The stream is over, and whole: nothing is left to tend, and the
                    // receiver, which waits for the connection to close, may go.
                    channel.socket().shut_down();
                    session.over = true;
                    return Ok(());
                }
                Err(error) => self.dropped(&mut session, error)?,
            }
        }
    }

    /// The receiver's last word, once its outputs have taken every byte: the Ack of the End
    /// (see [`Channel::acknowledge_end`]). When the stream resumes dropped connections, until
    /// the sender has closed the connection, which it does once it has the Ack, and not
    /// before: a connection that drops first (the Ack may be lost with it) is a drop like
    /// any other, waited for as long, and the Ack is said again in the new session. The
    /// session is not held while waiting, so that the sender can be taken back meanwhile.
    /// An error when the sender did not come back: it may not know that every byte arrived.
    pub fn acknowledge_end(&self, stop: &Stop) -> io::Result<()> {
        if !self.secure {
            return Ok(());
        }
        let mut session = self.lock();
        // The session the Ack was said in: a new one hears it again.
        let mut said_in = None;
        loop {
            if let Some(error) = session.failure() {
                return Err(error);
            }
            let generation = session.generation;
            let Some(channel) = session.channel.as_mut() else {
                session = self.await_session(session, stop)?;
                continue;
            };
            if said_in != Some(generation) {
                if let Err(error) = channel.acknowledge_end() {
                    self.dropped(&mut session, error)?;
                    continue;
                }
                said_in = Some(generation);
            }
            if !self.resumes() {
                return Ok(());
            }
            match channel.closed_now() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(error) => {
                    self.dropped(&mut session, error)?;
                    continue;
                }
            }
            session = self.await_sender(session, stop)?;
        }
    }

    /// Waits until the sender's socket has something to read, not holding the session
    /// meanwhile (the sender may come back in a new one); the session again. A sender silent
    /// for four heartbeats is a drop.
    fn await_sender<'a>(
        &'a self,
        session: MutexGuard<'a, Session>,
        stop: &Stop,
    ) -> io::Result<MutexGuard<'a, Session>> {
        let generation = session.generation;
        let Some(channel) = session.channel.as_ref() else { return Ok(session) };
        let (socket, silent_at) = (Arc::clone(channel.socket()), channel.silent_at());
        drop(session);
        let waited = wait_for(socket.fd(), PollFlags::IN, stop, silent_at);
        let mut session = self.lock();
        match waited {
            Err(error) if error.kind() == io::ErrorKind::TimedOut => {
                let silence = session.channel.as_ref().map(|c| c.silence_error("the sender"));
                if let (true, Some(silence)) = (session.generation == generation, silence) {
                    self.dropped(&mut session, silence)?;
                }
            }
            waited => waited?,
        }
        Ok(session)
    }

    /// After the run, for a stream that did not end whole: tells the peer it stops here, and
    /// `why`. Best effort, whether or not the run's stop was requested; nothing over plain
    /// TCP, which has no frames, nor while a thread that never ended holds the session.
    pub fn abort(&self, why: &str) {
        if let Ok(mut session) = self.session.try_lock() {
            if let Some(channel) = session.channel.as_mut() {
                channel.abort(why);
            }
        }
    }

    /// Whether the sender asked for a confirmation since the last call (receiving side).
    pub fn take_asked(&self) -> bool {
        self.asked.swap(false, Relaxed)
    }

    /// Wakes `confirmer` when the sender asks for a confirmation (receiving side).
    pub fn confirm_with(&self, confirmer: thread::Thread) {
        let _ = self.confirmer.set(confirmer);
    }

    /// Tells the sender that the outputs have taken `count` bytes (receiving side); also the
    /// receiver's heartbeat. Nothing while the connection is down.
    pub fn deliver(&self, count: u64) -> io::Result<bool> {
        let told = match self.lock().channel.as_mut() {
            Some(channel) => channel.deliver(count)?,
            None => false,
        };
        if told {
            self.told.store(count, Relaxed);
        }
        Ok(told)
    }

    /// Whether this side has sent nothing for a heartbeat.
    pub fn quiet(&self) -> bool {
        let session = self.lock();
        session.channel.as_ref().is_some_and(|channel| channel.quiet_for() >= self.resume.heartbeat)
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
        let sending = self.keep.get().is_some();
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
            if now >= deadline && self.keep.get().is_none() {
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

    /// Establishes the link on its first connection, to the stream `stream`.
    pub(super) fn establish(&self, socket: Arc<Socket>, channel: Option<Channel>) {
        assert!(self.socket.set(socket).is_ok(), "a link is established once");
        let mut session = self.lock();
        if let Some(mut channel) = channel {
            channel.set_silence(self.resume.silence());
            session.stream = channel.stream();
            session.channel = Some(channel);
        }
    }

    /// Starts tending the link (a secure one): for a sender, `dialer` connects again; for a
    /// receiver, `listening` takes the sender back.
    pub(super) fn tend(self: &Arc<Link>, way: Way) -> io::Result<()> {
        if !self.secure {
            return Ok(());
        }
        let stop = Arc::new(Stop::default());
        let (link, own) = (Arc::clone(self), Arc::clone(&stop));
        let thread = thread::Builder::new().name("accel-link".into()).spawn(move || match way {
            Way::Dial(dialer) => link.tend_sending(&dialer, &own),
            Way::Listen(listening) => link.tend_receiving(listening, &own),
        })?;
        *self.tending.lock().unwrap_or_else(PoisonError::into_inner) = Some((thread, stop));
        Ok(())
    }

    /// The run is over: the tending thread ends, and is joined (for 5 s at most). Not
    /// waiting for the session: a thread of the run that never ended may hold it.
    pub fn close(&self) {
        if let Ok(mut session) = self.session.try_lock() {
            session.over = true;
        }
        self.changed.notify_all();
        let tending = self.tending.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some((thread, stop)) = tending {
            stop.request();
            stop.join(thread, Duration::from_secs(5));
        }
    }

    /// A sender's tending: confirmations, heartbeats, a silent receiver noticed, and a
    /// dropped connection restored.
    fn tend_sending(&self, dialer: &Dialer, stop: &Stop) {
        loop {
            let mut session = self.lock();
            if session.over || session.failed.is_some() {
                return;
            }
            let Some(channel) = session.channel.as_mut() else {
                drop(session);
                if !self.restore(dialer, stop) {
                    return;
                }
                continue;
            };
            let heartbeat = self.resume.heartbeat;
            let tended = channel.take_confirmations_now().and_then(|()| {
                if channel.silent_at().is_some_and(|at| at <= Instant::now()) {
                    return Err(channel.silence_error("the receiver"));
                }
                if channel.quiet_for() >= heartbeat { channel.heartbeat() } else { Ok(()) }
            });
            self.heard(channel.confirmed(), false);
            let socket = Arc::clone(channel.socket());
            let beat = Instant::now() + heartbeat.saturating_sub(channel.quiet_for());
            let wake = channel.silent_at().map_or(beat, |at| at.min(beat));
            if let Err(error) = tended {
                let error = closed_by_peer(error, "the receiver");
                if let Err(error) = self.dropped(&mut session, error) {
                    if let Some(channel) = session.channel.as_mut() {
                        channel.abandon();
                    }
                    self.give_up(&mut session, error.kind(), describe(&error));
                    return;
                }
                continue;
            }
            drop(session);
            if let Err(error) = wait_for(socket.fd(), PollFlags::IN, stop, Some(wake)) {
                if error.kind() == io::ErrorKind::Interrupted {
                    return;
                }
            }
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
        self.lock().failure()
    }

    /// Connects again, 0.2 s after the drop, then with pauses that double from 1 s to 30 s
    /// (with jitter), each counted from the start of the try before (a try that waited for
    /// its answer is followed at once); a try given up on after [`Resume::try_patience`];
    /// the last try at the end of `--reconnect-for`. Until the connection is back (`true`),
    /// or `--reconnect-for` is over or the run is (`false`).
    fn restore(&self, dialer: &Dialer, stop: &Stop) -> bool {
        let (since, _) = self.lock().down.clone().expect("down");
        let deadline = since + self.resume.within;
        let mut pause = FIRST_PAUSE;
        let mut next = since + jittered(pause);
        loop {
            let now = Instant::now();
            if stop.sleep(next.min(deadline).saturating_duration_since(now)).is_err()
                || self.lock().over
            {
                return false;
            }
            pause =
                if pause < SECOND_PAUSE { SECOND_PAUSE } else { (pause * 2).min(LONGEST_PAUSE) };
            next = Instant::now() + jittered(pause);
            let (kept, reached, tries) = {
                let mut session = self.lock();
                session.tries += 1;
                (session.confirmed, session.reached, session.tries)
            };
            self.publish(|meter, peer| meter.reconnecting(peer, tries));
            match dialer.dial(kept, reached, &self.resume, stop) {
                Ok((channel, at)) => {
                    let mut session = self.lock();
                    // The output goes on there at its next look for data, even if it waits
                    // for data now (its buffer full of what was not confirmed).
                    if let Err(error) = self.keep.get().map_or(Ok(()), |keep| keep.go_on_from(at)) {
                        self.give_up(&mut session, io::ErrorKind::InvalidData, describe(&error));
                        return false;
                    }
                    let outage = session.down.take().map_or(Duration::ZERO, |(s, _)| s.elapsed());
                    let resent = session.sent.saturating_sub(at);
                    session.channel = Some(channel);
                    session.generation += 1;
                    session.resume_at = at;
                    self.publish(|meter, peer| meter.reconnected(peer, resent));
                    self.log.warn(format_args!(
                        "{}: connected again after {} ({}); resuming at byte {at} ({} sent \
                         again)",
                        self.name,
                        outage_words(outage),
                        if tries == 1 { "1 try".into() } else { format!("{tries} tries") },
                        byte_count(resent)
                    ));
                    self.changed.notify_all();
                    return true;
                }
                Err(Dial::Fatal(reason)) => {
                    self.give_up(&mut self.lock(), io::ErrorKind::ConnectionRefused, reason);
                    return false;
                }
                Err(Dial::Again(why)) => {
                    self.log.debug(format_args!("{}: try {tries}: {why}", self.name));
                    // The try that ended at or past the deadline was the last: it says why.
                    if Instant::now() >= deadline {
                        let why = format!(
                            "the connection could not be restored within {} ({why})",
                            duration(self.resume.within)
                        );
                        self.give_up(&mut self.lock(), io::ErrorKind::TimedOut, why);
                        return false;
                    }
                }
            }
        }
    }

    /// A receiver's tending: waits for the sender to connect again, and takes it back.
    fn tend_receiving(&self, mut listening: Listening, stop: &Stop) {
        let stream = self.lock().stream;
        loop {
            let key = Some(listening.key.as_ref());
            let found = handshake::accept_sender(
                &listening.listeners,
                key,
                Some(stream),
                None,
                &mut listening.dropped,
                &self.log,
                stop,
            );
            match found {
                Ok((_, Some(channel))) => self.take_back(channel),
                Ok((_, None)) => {}
                Err(_) if stop.requested() || self.lock().over => return,
                Err(why) => {
                    self.log.warn(format_args!("{}: {why}", listening.address));
                    if stop.sleep(SECOND_PAUSE).is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// The sender is back, in a new session it has proved: the stream goes on there, from
    /// the first byte not yet handed out. A session still in use is let go (the sender saw
    /// the drop first).
    fn take_back(&self, mut channel: Channel) {
        let mut session = self.lock();
        if session.over {
            return;
        }
        if let Some(mut old) = session.channel.take() {
            old.abandon();
            session.resume_at = old.handed_out();
            session.ended |= old.ended();
            self.log.warn(format_args!(
                "{}: connection dropped (the sender connected again) after {} received",
                self.name,
                byte_count(session.resume_at)
            ));
            session.down = Some((Instant::now(), "the sender connected again".into()));
            self.publish(|meter, peer| meter.connection_down(peer));
        }
        channel.set_silence(self.resume.silence());
        let (at, ended) = (session.resume_at, session.ended);
        if let Err(error) = channel.resume_from(at, ended) {
            self.log.warn(format_args!(
                "{}: the sender connected again, but went: {}",
                self.name,
                describe(&error)
            ));
            return;
        }
        // What the outputs took is said again: the sender heard nothing since the drop.
        let _ = channel.deliver(self.told.load(Relaxed));
        let peer = channel.socket().peer();
        let outage = session.down.take().map_or(Duration::ZERO, |(since, _)| since.elapsed());
        session.channel = Some(channel);
        session.generation += 1;
        self.publish(|meter, peer| meter.reconnected(peer, 0));
        self.log.warn(format_args!(
            "{}: the sender is back (from {peer}) after {}; resuming at byte {at}",
            self.name,
            outage_words(outage)
        ));
        self.changed.notify_all();
    }
}

/// How a link gets its connection back.
pub(super) enum Way {
    /// A sender connects again.
    Dial(Dialer),
    /// A receiver takes its sender back.
    Listen(Listening),
}

/// What a sender needs to connect again: the receiver's name (resolved again each time:
/// its address may have changed), the key, and the stream.
pub(super) struct Dialer {
    pub address: Address,
    pub key: Arc<Key>,
    pub stream: [u8; 16],
}

/// What a receiver needs to take its sender back: the listening sockets, and the key.
pub(super) struct Listening {
    pub address: Address,
    pub listeners: Vec<OwnedFd>,
    pub key: Arc<Key>,
    /// Connections dropped so far in the run.
    pub dropped: usize,
}

/// Why an attempt to connect again failed: worth another try, or not.
enum Dial {
    Again(String),
    Fatal(String),
}

impl Dialer {
    /// One attempt: connects to each of the receiver's addresses in turn, handshakes, and
    /// hears where the stream goes on (between `kept` and `reached`); each address within
    /// `resume`'s [`Resume::try_patience`].
    fn dial(
        &self,
        kept: u64,
        reached: u64,
        resume: &Resume,
        stop: &Stop,
    ) -> Result<(Channel, u64), Dial> {
        let addresses: Vec<SocketAddr> =
            self.address.resolve().map_err(|e| Dial::Again(describe(&e)))?;
        let patience = resume.try_patience();
        let mut failures = Vec::new();
        for address in addresses {
            let deadline = Instant::now() + patience;
            // Whether it connects, handshakes or says where to go on, the same words.
            let no_answer = || format!("{address}: no answer within {}", seconds(patience));
            let hello = Hello { stream: self.stream, offset: kept, resuming: true };
            let opening = Opening::new(&self.key, hello);
            let socket = match socket::connect(address, stop, deadline) {
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
            // The receiver answered before: no word of a listener that never answers.
            let mut channel = match handshake::initiate(opening, socket, stop, deadline, None) {
                Ok(channel) => channel,
                Err(failure) if failure.is_final() => return Err(Dial::Fatal(failure.to_string())),
                Err(Failure::NoAnswer) => {
                    failures.push(no_answer());
                    continue;
                }
                Err(failure) => {
                    failures.push(format!("{address}: {failure}"));
                    continue;
                }
            };
            channel.set_silence(resume.silence());
            match channel.await_resume(kept, reached, stop, deadline) {
                Ok(at) => return Ok((channel, at)),
                Err(error) if error.kind() == io::ErrorKind::InvalidData => {
                    return Err(Dial::Fatal(describe(&error)));
                }
                Err(error) if error.kind() == io::ErrorKind::TimedOut => failures.push(no_answer()),
                Err(error) => failures.push(format!("{address}: {}", describe(&error))),
            }
        }
        Err(Dial::Again(failures.join("; ")))
    }
}

/// How long an outage lasted: `0.8 s`, `12.0 s`, `0:03:20`.
fn outage_words(outage: Duration) -> String {
    if outage < Duration::from_secs(60) {
        format!("{:.1} s", outage.as_secs_f64())
    } else {
        duration(outage)
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
