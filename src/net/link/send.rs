//! A link's sending side (an output's): the stream written through the session, the
//! receiver's confirmations published, and the End confirmed by its Ack; a new session
//! heard from where the stream goes on ([`Resumed`]).

use std::io;

use super::{Link, Resumed, Session};
use crate::backlog::Keep;
use crate::meter::Peer;
use crate::net::closed_by_peer;
use crate::stop::Stop;

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
}
