//! A secure link's own thread: it tends the session (a sender's: confirmations, heartbeats,
//! a silent receiver noticed) and gets the connection back when it drops (a sender connects
//! again, a receiver takes its sender back).

use std::io;
use std::os::fd::OwnedFd;
use std::sync::{Arc, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::PollFlags;

use super::{Link, outage_words};
use crate::net::address::Address;
use crate::net::closed_by_peer;
use crate::net::dial::{Dial, Dialer, FIRST_PAUSE, LONGEST_PAUSE, SECOND_PAUSE, jittered};
use crate::net::handshake;
use crate::net::key::Key;
use crate::stop::{Stop, wait_for};
use crate::words::{byte_count, describe, duration};

impl Link {
    /// Starts tending the link (a secure one): for a sender, `dialer` connects again; for a
    /// receiver, `listening` takes the sender back.
    pub(in crate::net) fn tend(self: &Arc<Link>, way: Way) -> io::Result<()> {
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
}

/// How a link gets its connection back.
pub(in crate::net) enum Way {
    /// A sender connects again.
    Dial(Dialer),
    /// A receiver takes its sender back.
    Listen(Listening),
}

/// What a receiver needs to take its sender back: the listening sockets, and the key.
pub(in crate::net) struct Listening {
    pub(in crate::net) address: Address,
    pub(in crate::net) listeners: Vec<OwnedFd>,
    pub(in crate::net) key: Arc<Key>,
    /// Connections dropped so far in the run.
    pub(in crate::net) dropped: usize,
}
