//! A secure link's own thread: it tends the session while it is up, and gets the
//! connection back when it drops.
//!
//! Which side connected is not which side sends. The side that connected connects again,
//! with pauses ([`Reconnect::Dial`]); the side that listened goes on listening, and takes back
//! the peer that proves it holds the key and names the same stream ([`Reconnect::Listen`]).
//! What each end of the stream does with a connection that is back (the sender hears where
//! the stream goes on, the receiver says it) is in `send.rs` and `receive.rs`. Today the
//! sender connects and the receiver listens.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::Link;
use crate::net::address::Address;
use crate::net::dial::{Dialer, Missed, Pauses};
use crate::net::handshake;
use crate::net::key::Key;
use crate::stop::Stop;
use crate::words::duration;

/// The pause after the listening side failed to accept (out of descriptors, say): no spin,
/// and well within a sender's tries.
const LISTEN_AGAIN: Duration = Duration::from_secs(1);

/// How a link gets its connection back.
pub(in crate::net) enum Reconnect {
    /// This side connected: it connects again.
    Dial(Dialer),
    /// This side listened: it takes its peer back.
    Listen(Listening),
}

/// What the side that listened needs to take its peer back: the listening sockets, and the
/// key.
pub(in crate::net) struct Listening {
    pub(in crate::net) address: Address,
    pub(in crate::net) listeners: Vec<OwnedFd>,
    pub(in crate::net) key: Arc<Key>,
    /// Connections dropped so far in the run.
    pub(in crate::net) dropped: usize,
}

impl Link {
    /// Starts tending the link (a secure one), getting its connection back by `reconnect`.
    pub(in crate::net) fn tend(self: &Arc<Link>, reconnect: Reconnect) -> io::Result<()> {
        if !self.secure {
            return Ok(());
        }
        let stop = Arc::new(Stop::default());
        let (link, own) = (Arc::clone(self), Arc::clone(&stop));
        let thread =
            thread::Builder::new().name("accel-link".into()).spawn(move || match reconnect {
                Reconnect::Dial(dialer) => link.tend_dialing(&dialer, &own),
                Reconnect::Listen(listening) => link.tend_listening(listening, &own),
            })?;
        *self.tending.lock().unwrap_or_else(PoisonError::into_inner) = Some((thread, stop));
        Ok(())
    }

    /// The tending of a link that connected (a sender's): its session while it is up
    /// ([`Link::tend_sending`]), and a dropped connection made again.
    fn tend_dialing(&self, dialer: &Dialer, stop: &Stop) {
        loop {
            let session = self.lock();
            if session.over || session.failed.is_some() {
                return;
            }
            let goes_on = if session.channel.is_some() {
                self.tend_sending(session, stop)
            } else {
                drop(session);
                self.redial(dialer, stop)
            };
            if !goes_on {
                return;
            }
        }
    }

    /// Connects again, at the [`Pauses`] after the drop, a try given up on after
    /// [`Resume::try_patience`](super::Resume::try_patience); the last try at the end of
    /// `--reconnect-for`. Until the connection is back (`true`), or `--reconnect-for` is over
    /// or the run is (`false`).
    fn redial(&self, dialer: &Dialer, stop: &Stop) -> bool {
        let (since, _) = self.lock().down.clone().expect("down");
        let deadline = since + self.resume.within;
        let mut pauses = Pauses::after(since);
        loop {
            let now = Instant::now();
            if stop.sleep(pauses.due().min(deadline).saturating_duration_since(now)).is_err()
                || self.lock().over
            {
                return false;
            }
            pauses.trying();
            let tries = {
                let mut session = self.lock();
                session.tries += 1;
                session.tries
            };
            self.publish(|meter, peer| meter.reconnecting(peer, tries));
            let (hello, reached) = self.hello_again();
            let settle = |channel: &mut _, deadline| {
                self.hear_where_to_go_on(channel, hello.offset, reached, stop, deadline)
            };
            match dialer.again(hello, None, self.resume.try_patience(), stop, settle) {
                Ok((channel, at)) => return self.go_on_sending(channel, at, tries),
                Err(Missed::Final(reason)) => {
                    self.give_up(&mut self.lock(), io::ErrorKind::ConnectionRefused, reason);
                    return false;
                }
                Err(Missed::Refused(why) | Missed::Again(why)) => {
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

    /// The tending of a link that listened (a receiver's): waits for the peer to connect
    /// again, and takes it back.
    fn tend_listening(&self, mut listening: Listening, stop: &Stop) {
        let stream = self.lock().stream;
        loop {
            let key = Some(listening.key.as_ref());
            let found = handshake::accept_sender(
                &listening.listeners,
                key,
                handshake::Terms { stream: Some(stream), window: 0 },
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
                    if stop.sleep(LISTEN_AGAIN).is_err() {
                        return;
                    }
                }
            }
        }
    }
}
