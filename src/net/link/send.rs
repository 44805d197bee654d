//! A link's sending side (an output's): the stream written through the session, the
//! receiver's confirmations published, and the End confirmed by its Ack; while the session is
//! up, the tending's round (confirmations, heartbeats, a silent receiver); once a connection
//! is back, where the stream goes on, heard from the receiver and told to the output
//! ([`Resumed`]).

use std::io;
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use rustix::event::PollFlags;

use super::{Link, Resumed, Session};
use crate::backlog::{Keep, Lent};
use crate::meter::Peer;
use crate::net::channel::Channel;
use crate::net::closed_by_peer;
use crate::net::compress::Compressor;
use crate::net::wire::Hello;
use crate::stop::{Stop, wait_for};
use crate::words::{byte_count, describe, span};

/// How often, at most, an output's counts on the wire are published: the watcher's tick is
/// no faster.
pub(super) const WIRE_EVERY: Duration = Duration::from_millis(100);

impl Link {
    /// Keeps the output's bytes in the backlog until the receiver confirms them, so that a
    /// dropped connection can go on: with `keep`, the reader's hold.
    pub fn keep_until_confirmed(&self, keep: Keep) {
        let _ = self.keep.set(keep);
    }

    /// Publishes what the receiver confirmed, and whether the Ack is awaited; lets the backlog
    /// go of it.
    pub(super) fn heard(&self, confirmed: u64, awaiting: bool) {
        if let Some((meter, Peer::Output(index))) = self.meter.get() {
            meter.confirmed(*index, confirmed, awaiting);
        }
        if let Some(keep) = self.keep.get() {
            keep.release(confirmed);
        }
    }

    /// Writes some of `bytes` (at least a byte), lent by the backlog, as [`Link::write`]
    /// does. Over several connections, the dispatcher's units hold the bytes lent rather than
    /// copies of them, and each connection's thread seals them straight from the backlog.
    pub fn write_lent(&self, bytes: &Lent, stop: &Stop) -> io::Result<usize> {
        match self.several.get().filter(|_| self.secure) {
            Some(several) => self.write_several(several, bytes.as_slice(), Some(bytes), stop),
            None => self.write(bytes.as_slice(), stop),
        }
    }

    /// Writes some of `buf` (at least a byte): through the session, or to the plain socket,
    /// until the run's `stop`. Once a dropped connection is back, a [`Resumed`] error says
    /// where the stream goes on.
    pub fn write(&self, buf: &[u8], stop: &Stop) -> io::Result<usize> {
        if !self.secure {
            return self.socket().write(buf, stop).map_err(|e| closed_by_peer(e, "the receiver"));
        }
        if let Some(several) = self.several.get() {
            return self.write_several(several, buf, None, stop);
        }
        let mut session = self.lock();
        loop {
            if let Some(error) = self.check_writing(&mut session) {
                return Err(error);
            }
            let awaits_count = session.awaits_count;
            let parts = &mut *session;
            let Some(channel) = parts.channel.as_mut() else {
                session = self.await_session(session, stop)?;
                continue;
            };
            let compressor = parts.compressor.get_or_insert_with(Compressor::none);
            compressor.held(self.keep.get().is_some_and(|keep| keep.pressing(0)));
            let sent = channel.send(buf, stop, compressor);
            self.heard(channel.confirmed(), false);
            self.publish_wire(&parts.compressor, &mut parts.wire_published, false);
            match sent {
                Ok(n) => {
                    // The buffer fills with what the receiver has not confirmed: ask for the
                    // word now rather than at its next round (50 ms), which on a fast link
                    // would leave the buffer full and the input waiting. Once per word.
                    let confirmed = channel.confirmed();
                    if awaits_count.is_some_and(|since| confirmed > since) {
                        session.awaits_count = None;
                    }
                    let pressing = self.keep.get().is_some_and(|keep| keep.pressing(n));
                    if session.awaits_count.is_none() && pressing {
                        session.awaits_count = Some(confirmed);
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

    /// Publishes what its frames took on the wire, at most every [`WIRE_EVERY`] unless
    /// `now`.
    /// (The session's compressor and when it was last published, apart from its channel.)
    fn publish_wire(
        &self,
        compressor: &Option<Compressor>,
        published: &mut Option<Instant>,
        now: bool,
    ) {
        let Some(compressor) = compressor else { return };
        let due = published.is_none_or(|at| at.elapsed() >= WIRE_EVERY);
        if let (true, Some((meter, Peer::Output(index)))) = (now || due, self.meter.get()) {
            meter.wire(*index, compressor.wire());
            *published = Some(Instant::now());
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
        if let Some(several) = self.several.get() {
            return self.end_several(several, stop);
        }
        let mut session = self.lock();
        // Every byte was sent: what the frames took on the wire is final.
        let parts = &mut *session;
        self.publish_wire(&parts.compressor, &mut parts.wire_published, true);
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

    /// After the run, for a stream that did not end whole: tells the peer it stops here, and
    /// `why`. Best effort, whether or not the run's stop was requested; nothing over plain
    /// TCP, which has no frames, nor while a thread that never ended holds the session past
    /// [`ABORT_PATIENCE`](super::ABORT_PATIENCE) (the tending thread holds it for a round,
    /// which must not cost the peer its Abort).
    pub fn abort(&self, why: &str) {
        if let Some(several) = self.several.get() {
            return Link::abort_several(several, why);
        }
        if let Some(mut session) = self.lock_within(super::ABORT_PATIENCE) {
            let parts = &mut *session;
            self.publish_wire(&parts.compressor, &mut parts.wire_published, true);
            if let Some(channel) = session.channel.as_mut() {
                channel.abort(why);
            }
        }
    }

    /// One round of a sender's tending, while its session is up: takes in the receiver's
    /// confirmations (so that the backlog lets go of what was confirmed while the output has
    /// nothing to send), says it is there when it has sent nothing for a heartbeat, and
    /// notices a receiver silent for [`SILENT_BEATS`](super::SILENT_BEATS) of them (a drop).
    /// Then waits, not holding the session, until the receiver says something or the next
    /// heartbeat or silence is due. `false` once the link gave up, or the tending's `stop`.
    pub(super) fn tend_sending(&self, mut session: MutexGuard<'_, Session>, stop: &Stop) -> bool {
        let Some(channel) = session.channel.as_mut() else { return true };
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
                return false;
            }
            return true;
        }
        drop(session);
        if let Err(error) = wait_for(socket.fd(), PollFlags::IN, stop, Some(wake)) {
            if error.kind() == io::ErrorKind::Interrupted {
                return false;
            }
        }
        true
    }

    /// What a sender says when it connects again (its Hello): the same stream, from the first
    /// byte the receiver has not confirmed; and the furthest byte it sealed, past which the
    /// receiver cannot have anything.
    pub(super) fn hello_again(&self) -> (Hello, u64) {
        let session = self.lock();
        let hello = Hello { stream: session.stream, offset: session.confirmed, resuming: true };
        (hello, session.reached)
    }

    /// In a new session: the receiver's word of where the stream goes on (a byte between
    /// `kept` and `reached`), waited for until `deadline`.
    pub(super) fn hear_where_to_go_on(
        &self,
        channel: &mut Channel,
        kept: u64,
        reached: u64,
        stop: &Stop,
        deadline: Instant,
    ) -> io::Result<u64> {
        channel.set_silence(self.resume.silence());
        channel.await_resume(kept, reached, stop, deadline)
    }

    /// The connection is back after `tries`, in `channel`, and the stream goes on at `at`:
    /// the output is sent back there, even while it waits for data (its buffer full of what
    /// was not confirmed). `false` if it cannot be (the link gives up).
    pub(super) fn go_on_sending(&self, channel: Channel, at: u64, tries: u64) -> bool {
        let mut session = self.lock();
        if let Err(error) = self.keep.get().map_or(Ok(()), |keep| keep.go_on_from(at)) {
            self.give_up(&mut session, io::ErrorKind::InvalidData, describe(&error));
            return false;
        }
        self.fit(channel.socket());
        let outage = session.down.take().map_or(Duration::ZERO, |(s, _)| s.elapsed());
        let resent = session.sent.saturating_sub(at);
        session.channel = Some(channel);
        session.generation += 1;
        session.resume_at = at;
        self.publish(|meter, peer| meter.reconnected(peer, resent));
        self.log.warn(format_args!(
            "{}: connected again after {} ({}); resuming at byte {at} ({} sent again)",
            self.name,
            span(outage),
            if tries == 1 { "1 try".into() } else { format!("{tries} tries") },
            byte_count(resent)
        ));
        self.changed.notify_all();
        true
    }
}
