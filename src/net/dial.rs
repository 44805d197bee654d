//! Connecting to the peer again: each try's addresses and patience ([`Dialer`]), and the
//! pauses between tries.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::address::Address;
use super::channel::Channel;
use super::handshake::{self, Failure, Opening};
use super::key::Key;
use super::link::Resume;
use super::seconds;
use super::socket;
use super::wire::Hello;
use crate::stop::Stop;
use crate::words::describe;

/// The pause before the first attempt to connect again: a reset on a path that is still up
/// (the common case: a NAT or a firewall dropped its state) is over at once. Then pauses of
/// 1 s, doubling to the longest; each counts from the start of the try before.
pub(super) const FIRST_PAUSE: Duration = Duration::from_millis(200);
pub(super) const SECOND_PAUSE: Duration = Duration::from_secs(1);
pub(super) const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// What a sender needs to connect again: the receiver's name (resolved again each time:
/// its address may have changed), the key, and the stream.
pub(super) struct Dialer {
    pub address: Address,
    pub key: Arc<Key>,
    pub stream: [u8; 16],
}

/// Why an attempt to connect again failed: worth another try, or not.
pub(super) enum Dial {
    Again(String),
    Fatal(String),
}

impl Dialer {
    /// One attempt: connects to each of the receiver's addresses in turn, handshakes, and
    /// hears where the stream goes on (between `kept` and `reached`); each address within
    /// `resume`'s [`Resume::try_patience`].
    pub(super) fn dial(
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

/// `pause`, give or take a quarter, so that senders cut off together do not all come back
/// at the same instant.
pub(super) fn jittered(pause: Duration) -> Duration {
    let mut byte = [0u8; 1];
    let _ = super::cipher::fill_random(&mut byte);
    // 0.75 to 1.25 times.
    pause.mul_f64(0.75 + f64::from(byte[0]) / 510.0)
}
