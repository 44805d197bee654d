//! A link's receiving side (an input's): the stream read through the session without
//! holding it while the socket is waited for, the confirmations said to the sender, the Ack
//! until the sender has it, and a sender that connects again taken back.

use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;

use super::send::WIRE_EVERY;
use super::{Link, Session};
use crate::backlog::Owned;
use crate::meter::{Peer, Wire};
use crate::net::channel::Channel;
use crate::stop::{Stop, wait_for};
use crate::words::{byte_count, describe, span};

impl Link {
    /// Whether the input's bytes come in buffers of their own, to be moved into its backlog
    /// as they are ([`read_moved`](Link::read_moved)) rather than copied into memory given:
    /// over several connections, whose threads open each frame where it came.
    pub fn moves(&self) -> bool {
        self.secure && self.several.get().is_some()
    }

    /// Where the link [`moves`](Link::moves) its bytes: the next in order, in the buffers
    /// they were opened into, as many as have come and fit `most` bytes, appended to `into`;
    /// how many bytes (0 at the end of the stream), waited for until the run's `stop`.
    /// `None` for a link whose bytes are read into memory given ([`read`](Link::read)).
    pub fn read_moved(
        &self,
        most: usize,
        into: &mut Vec<Owned>,
        stop: &Stop,
    ) -> Option<io::Result<usize>> {
        let several = self.several.get().filter(|_| self.secure)?;
        Some(self.take_several(several, most, into, stop))
    }

    /// Reads what has arrived, up to `buf.len()` (0 at the end of the stream): through the
    /// session, or from the plain socket, until the run's `stop`. The session is not held
    /// while waiting for the socket, so that confirmations go out meanwhile. A dropped
    /// connection is waited for, while it may come back.
    pub fn read(&self, buf: &mut [u8], stop: &Stop) -> io::Result<usize> {
        if !self.secure {
            return self.socket().read(buf, stop, None);
        }
        if let Some(several) = self.several.get() {
            return self.read_several(several, buf, stop);
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
            let (came, ended) = (channel.take_wire(), channel.ended());
            // The sender asks for a confirmation when its buffer fills with unconfirmed
            // bytes; often its last word before it waits.
            if let (Some(upto), Some(confirmer)) = (channel.take_asked(), self.confirmer.get()) {
                let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
                *asked = Some(asked.map_or(upto, |before| before.max(upto)));
                confirmer.unpark();
            }
            // The end of the stream, or a failure: the counts are final (as far as they go).
            let last = match &received {
                Ok(n) => *n == 0,
                Err(error) => error.kind() != io::ErrorKind::TimedOut,
            };
            self.publish_received(&mut session, &came, last);
            match received {
                Err(error) if error.kind() == io::ErrorKind::TimedOut => {
                    session = self.await_sender(session, stop)?;
                }
                Ok(n) => {
                    session.ended |= ended;
                    return Ok(n);
                }
                Err(error) => self.dropped(&mut session, error)?,
            }
        }
    }

    /// Adds the frames `came` off the wire to the run's, and publishes them at most every
    /// [`WIRE_EVERY`] unless `now`.
    fn publish_received(&self, session: &mut Session, came: &Wire, now: bool) {
        session.received_wire.add(came);
        let due = session.wire_published.is_none_or(|at| at.elapsed() >= WIRE_EVERY);
        if let (true, Some((meter, Peer::Input))) = (now || due, self.meter.get()) {
            meter.input_wire(session.received_wire.clone());
            session.wire_published = Some(Instant::now());
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
        if let Some(several) = self.several.get() {
            return self.acknowledge_several(several, stop);
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

    /// Whether the sender asked for a confirmation since the last call (receiving side):
    /// the stream offset its word must reach (every byte the sender had sent when it asked,
    /// which the input may not have handed to the backlog yet).
    pub fn take_asked(&self) -> Option<u64> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    /// Wakes `confirmer` when the sender asks for a confirmation (receiving side).
    pub fn confirm_with(&self, confirmer: thread::Thread) {
        let _ = self.confirmer.set(confirmer);
    }

    /// Tells the sender that the outputs have taken `count` bytes (receiving side); also the
    /// receiver's heartbeat. Nothing while the connection is down.
    pub fn deliver(&self, count: u64) -> io::Result<bool> {
        if let Some(several) = self.several.get() {
            return self.deliver_several(several, count);
        }
        let told = match self.lock().channel.as_mut() {
            Some(channel) => channel.deliver(count)?,
            None => false,
        };
        if told {
            self.told.store(count, Relaxed);
        }
        Ok(told)
    }

    /// Over several connections: whether the credit the sender was last given has grown,
    /// the outputs having taken `taken` bytes (receiving side). Never over one.
    pub fn more_credit(&self, taken: u64) -> bool {
        self.several.get().is_some_and(|several| self.more_credit_several(several, taken))
    }

    /// Over several connections: the stream bytes the input took in, in order (receiving
    /// side); 0 over one, where the count is what the outputs took.
    pub fn received_in_order(&self) -> u64 {
        self.several.get().map_or(0, |several| several.taken_in())
    }

    /// Whether this side has sent nothing for a heartbeat.
    pub fn quiet(&self) -> bool {
        if let Some(several) = self.several.get() {
            return self.quiet_several(several);
        }
        let session = self.lock();
        session.channel.as_ref().is_some_and(|channel| channel.quiet_for() >= self.resume.heartbeat)
    }

    /// The sender is back, in a new session it has proved: the stream goes on there, from
    /// the first byte not yet handed out. A session still in use is let go (the sender saw
    /// the drop first).
    pub(super) fn take_back(&self, mut channel: Channel) {
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
        self.fit(channel.socket());
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
            span(outage)
        ));
        self.changed.notify_all();
    }
}
