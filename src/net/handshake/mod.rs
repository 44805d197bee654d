//! Establishing a session: the side that connects speaks first ([`connect`]: the preamble
//! and the first Noise message, which carries the Hello, made before it connects), and the
//! side that listens answers ([`accept`]: it handshakes with every connection that comes,
//! and takes the first that proves it holds the key). Today the sender connects and the
//! receiver listens; what the Hello says (which stream, and whether it goes on) is the
//! sender's either way.
//!
//! Noise NNpsk0 authenticates the connecting side's first message against the key, but a
//! recorded first message can be replayed; so it counts as authenticated only once its Start
//! frame, sealed with the keys of this very session, has been opened. Only then does the run
//! begin, so no byte from an unauthenticated peer is ever written.

mod accept;
mod connect;

pub use accept::{Lobby, Stranger, Terms, accept_sender};
pub use connect::{Ahead, Failure, Opening, initiate};

/// The wrong key, in the words both ends use.
pub const WRONG_KEY: &str = "authentication failed: the peers do not share a key";

/// A name for a new stream: random.
pub fn new_stream() -> Result<[u8; 16], String> {
    let mut stream = [0u8; 16];
    crate::net::cipher::fill_random(&mut stream).map_err(|error| error.to_string())?;
    Ok(stream)
}

#[cfg(test)]
mod tests;
