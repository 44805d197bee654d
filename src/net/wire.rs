//! What goes over the wire: the preamble, the Noise handshake, and the frames of the stream.
//!
//! ```text
//! sender (initiator)                              receiver (responder)
//!   preamble  "accelN4" + cipher ('A' AES-GCM, 'C' ChaCha20-Poly1305)  ->
//!   msg 1     len(u16) + Noise NNpsk0 -> psk, e   payload Hello         ->
//!                              <-  preamble, then len + msg 2 (e, ee; payload Welcome)
//!                                  or len 0: the key is wrong (unauthenticated, only a hint)
//!   frame     Start (offset 0): the key confirmed, the sender is the one ->
//!                              <-  on a reconnection only: frame Resume carrying the offset
//!                                  the receiver has, where the sender goes on
//!   frames    Data or Zstd ..., then End carrying the byte count           ->
//!                              <-  frames Delivered carrying the bytes the receiver's
//!                                  outputs took, as they take them (at most every 50 ms)
//!                              <-  frame Ack carrying the byte count, once its outputs
//!                                  took every byte
//!   both ways: Heartbeat (sender) and Delivered (receiver) when a side has sent nothing
//!   for the heartbeat interval, so that a silent path is noticed at both ends
//! ```
//!
//! A stream outlives its connections ([`super::Link`]): when one drops, the sender connects
//! again with a Hello naming the same stream and the first offset it still holds; the receiver
//! takes it back only once the new session is confirmed (its Start frame opened, so neither a
//! stranger nor a replayed handshake can take a stream over), and answers with Resume, the
//! offset of the first byte it does not have. A Hello for another stream gets the Welcome
//! [`BUSY`] and is dropped. A receiver still waiting for its first sender takes a Hello that
//! goes on from byte 0 with a stream it never had as that stream beginning (the sender's
//! first session was cut before its Start came) and answers Resume 0; from further on, the
//! Welcome [`UNKNOWN_STREAM`]. Every connection has its own ephemeral keys. The sender closes
//! the connection only once it has the Ack, which the receiver waits for.
//!
//! What the receiver confirms is what its outputs took: written to a file or pipe (and with
//! `--sync`, for the Ack, flushed to stable storage), or, for a relay's `--to`, confirmed by
//! the next receiver in turn (sent, with `--insecure`). Never what only sits in its memory:
//! the sender's "delivered" is exactly what the receiver passed on, which a resumed stream
//! can start from. A Delivered count only grows; the Ack says the stream ended whole.
//! Version 1 (`accelN1`) had no Delivered frames and sent the Ack as soon as the End arrived;
//! version 2 had no heartbeats and could not resume; version 3 had no Zstd frames. A peer of
//! another version is refused at the preamble, before the handshake, with words that say so.
//!
//! Version 6 (`accelN6`, and `accelN7` for version 5's several connections) is version 4
//! whose compressed frames keep the session's history: a Zstd frame starts a zstd frame
//! (and the receiver's context afresh), and the ZstdMore frames after it go on with it, each
//! flushed so that it decompresses on arrival (see `compress`). Only a sender that
//! compresses speaks it; an older receiver refuses it at the preamble, and the sender says
//! so.
//!
//! Version 5 (`accelN5`) is version 4 with one stream over several connections
//! (`--streams N`, N above 1), and only such a sender speaks it: with one connection the
//! wire is version 4's, byte for byte. Each connection has its own handshake, bound to the
//! version 5 preamble: its Hello is version 4's followed by a [`Join`] (the connection's
//! index, the connections proposed), and the Welcome is the status followed by the
//! receiver's terms (its window, the connections it takes, at most [`MOST_STREAMS`]). The
//! first connection (index 0) starts the stream; a further one must name it, else it is
//! dropped as any stranger. Data frames then come on any connection, each at its own offset,
//! and the receiver puts them back in order; Delivered goes on every connection, with a
//! [`Credit`] as its payload (how far the receiver took the stream in, in order, and how far
//! the sender may go), the End and the Ack on every one. A receiver of version 4 answers the version 5 preamble with its
//! own and an empty message, which the sender reads as "does not take several streams".
//!
//! Every message after the preamble is a Noise message (at most 65535 bytes) behind its length
//! as a big-endian u16, the framing the Noise specification suggests for TCP. The preamble is
//! also the Noise prologue, so the protocol version and the cipher are authenticated too.
//!
//! A frame is two Noise transport messages: its payload, then its trailer, `kind (u8) ‖
//! offset (u64, big-endian)`. The offset is the stream offset of the payload's first byte
//! (Data, and Zstd, whose payload is one zstd frame that decompresses to the stream bytes:
//! offsets count stream bytes, never compressed ones; see `compress`), the stream's length (End, Ack), the bytes the receiver's outputs took
//! (Delivered), the bytes the receiver has (Resume), or the bytes sent so far (Heartbeat;
//! Abort, whose payload says why); Start's is 0. Both messages are authenticated and their nonces run in sequence, so a trailer belongs to
//! the payload just before it. Two messages rather than `payload ‖ trailer` in one let the
//! sender seal the payload straight from the buffer into the outgoing batch, and the receiver
//! open it straight into its own, with no copy on either side; the second message costs 27
//! bytes and a tiny AES-GCM call per 64 KiB. Offsets are what lets a dropped connection be
//! resumed without losing or repeating a byte: the Hello names the stream and the first
//! offset the sender still holds, and the Resume frame where it goes on.
//!
//! Both sides rekey (Noise `Rekey`) after every [`REKEY_EVERY`] messages in each direction,
//! which keeps each key well inside AES-GCM's safe limits however long the stream.

use snow::params::NoiseParams;

use super::key::Key;

/// Bytes of preamble.
pub const PREAMBLE_LEN: usize = 8;

/// The preamble's fixed part: who we are, and the protocol's version.
const MAGIC: &[u8; 7] = b"accelN4";

/// The preamble's fixed part of version 5: version 4, and one stream over several
/// connections (`--streams N`, N above 1). Only such a sender says it: with one connection,
/// the wire is version 4's, byte for byte; a receiver of version 4 refuses this one at the
/// preamble, and the sender says that it takes one connection only.
const SEVERAL: &[u8; 7] = b"accelN5";

/// The preamble's fixed part of version 6: version 4 whose compressed frames keep the
/// session's history ([`Kind::ZstdMore`]). Only a sender that compresses says it (and
/// version 7 for several connections): with `--compress none`, the wire is version 4's (or
/// 5's), byte for byte. A receiver of version 4 or 5 refuses it at the preamble (it answers
/// with its own): the sender says that the receiver is too old for a level asked for, and
/// with `--compress auto` connects again without compression (see `dial`).
const HISTORY: &[u8; 7] = b"accelN6";

/// Version 5's several connections, each with version 6's compressed history.
const SEVERAL_HISTORY: &[u8; 7] = b"accelN7";

/// What a preamble says of the protocol beyond its cipher: which versions' frames the
/// session carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Version {
    /// One of a stream's several connections (version 5, or 7).
    pub several: bool,
    /// Compressed frames go on from the one before, within a session (version 6, or 7).
    pub history: bool,
}

impl Version {
    fn magic(self) -> &'static [u8; 7] {
        match (self.several, self.history) {
            (false, false) => MAGIC,
            (true, false) => SEVERAL,
            (false, true) => HISTORY,
            (true, true) => SEVERAL_HISTORY,
        }
    }
}

/// The most connections one stream takes (`--streams`), at either end.
pub const MOST_STREAMS: u8 = 16;

/// The Welcome that refuses a Hello for another stream: this receiver is busy with its own.
pub const BUSY: u64 = u64::MAX;

/// The Welcome that refuses a reconnection for a stream this receiver never had (it is not
/// the receiver the stream started with: restarted, or another).
pub const UNKNOWN_STREAM: u64 = u64::MAX - 1;

/// The longest Noise message.
pub const MAX_MESSAGE: usize = 65535;

/// A Noise message's authentication tag.
pub const TAG: usize = 16;

/// A frame's trailer: kind and offset.
pub const TRAILER: usize = 9;

/// The most payload one frame carries.
pub const MAX_PAYLOAD: usize = MAX_MESSAGE - TAG;

/// A sealed trailer message.
pub const SEALED_TRAILER: usize = TRAILER + TAG;

/// The most bytes one frame takes on the wire: two messages, each behind its length.
pub const MAX_FRAME: usize = 2 + MAX_MESSAGE + 2 + SEALED_TRAILER;

/// Messages in one direction under one key; then both sides rekey. Messages are counted, and
/// a frame is two (its payload, its trailer): 2^16 messages are 2^15 full frames, just under
/// 2 GiB of stream, about 2^27 AES blocks. TLS 1.3 lets an AES-GCM key seal 2^24.5 records of
/// 16 KiB (RFC 8446, §5.5), 2^34.5 blocks: this stays far inside that.
pub const REKEY_EVERY: u64 = 1 << 16;

/// The symmetric cipher of a session, chosen by the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    /// AES-256-GCM: fastest where the CPU has AES instructions.
    AesGcm,
    /// ChaCha20-Poly1305: fastest without them.
    ChaChaPoly,
}

impl Cipher {
    /// The cipher this machine runs fastest.
    pub fn fastest_here() -> Cipher {
        if crate::sys::has_aes_instructions() { Cipher::AesGcm } else { Cipher::ChaChaPoly }
    }

    fn letter(self) -> u8 {
        match self {
            Cipher::AesGcm => b'A',
            Cipher::ChaChaPoly => b'C',
        }
    }

    /// Its name in a Noise protocol name.
    pub fn noise_name(self) -> &'static str {
        match self {
            Cipher::AesGcm => "AESGCM",
            Cipher::ChaChaPoly => "ChaChaPoly",
        }
    }
}

/// The preamble a side sends first, naming the cipher (version 4).
pub fn preamble(cipher: Cipher) -> [u8; PREAMBLE_LEN] {
    preamble_of(cipher, Version::default())
}

/// The preamble of a session of `version`.
pub fn preamble_of(cipher: Cipher, version: Version) -> [u8; PREAMBLE_LEN] {
    let mut bytes = [0u8; PREAMBLE_LEN];
    bytes[..MAGIC.len()].copy_from_slice(version.magic());
    bytes[MAGIC.len()] = cipher.letter();
    bytes
}

/// What a received preamble says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preamble {
    /// This protocol, of this version, with this cipher.
    Accel(Cipher, Version),
    /// accel, but another version of the protocol (or a cipher this one does not know).
    OtherVersion,
    /// Not accel at all.
    Foreign,
}

/// Reads a preamble (of [`PREAMBLE_LEN`] bytes, or the first of them).
pub fn read_preamble(bytes: &[u8]) -> Preamble {
    let known = bytes.len().min(MAGIC.len() - 1);
    if bytes[..known] != MAGIC[..known] {
        return Preamble::Foreign;
    }
    if bytes.len() < PREAMBLE_LEN {
        return Preamble::OtherVersion;
    }
    let versions = [(false, false), (true, false), (false, true), (true, true)]
        .map(|(several, history)| Version { several, history });
    let magic = &bytes[..MAGIC.len()];
    let Some(version) = versions.into_iter().find(|version| magic == version.magic()) else {
        return Preamble::OtherVersion;
    };
    let cipher = match bytes[MAGIC.len()] {
        b'A' => Cipher::AesGcm,
        b'C' => Cipher::ChaChaPoly,
        _ => return Preamble::OtherVersion,
    };
    Preamble::Accel(cipher, version)
}

/// The Noise handshake for `cipher` with `key`, bound to the preamble: the sender's side
/// (`initiator`) or the receiver's.
pub fn handshake(cipher: Cipher, key: &Key, initiator: bool) -> snow::HandshakeState {
    handshake_of(cipher, key, initiator, Version::default())
}

/// [`handshake`], bound to the preamble of `version`.
pub fn handshake_of(
    cipher: Cipher,
    key: &Key,
    initiator: bool,
    version: Version,
) -> snow::HandshakeState {
    let name = format!("Noise_NNpsk0_25519_{}_SHA256", cipher.noise_name());
    let params: NoiseParams = name.parse().expect("a valid Noise protocol name");
    let prologue = preamble_of(cipher, version);
    let builder = snow::Builder::with_resolver(params, super::cipher::resolver())
        .psk(0, key.bytes())
        .and_then(|b| b.prologue(&prologue))
        .expect("a 32-byte key and a prologue");
    let state = if initiator { builder.build_initiator() } else { builder.build_responder() };
    state.expect("the resolver has every primitive")
}

/// What the sender says in the handshake: which stream, and where it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    /// A random name for the stream, for a reconnection to tell it from another.
    pub stream: [u8; 16],
    /// The first byte the sender still holds: 0, or on a reconnection the first byte the
    /// receiver has not confirmed.
    pub offset: u64,
    /// A reconnection: the stream goes on, where the receiver's Resume frame says.
    pub resuming: bool,
}

impl Hello {
    /// Its encoding, as the first handshake message's payload.
    pub fn encode(&self) -> [u8; 25] {
        let mut bytes = [0u8; 25];
        bytes[..16].copy_from_slice(&self.stream);
        bytes[16..24].copy_from_slice(&self.offset.to_be_bytes());
        bytes[24] = u8::from(self.resuming);
        bytes
    }

    /// The Hello in a payload, if it is one.
    pub fn decode(bytes: &[u8]) -> Option<Hello> {
        let bytes: &[u8; 25] = bytes.try_into().ok()?;
        let offset = u64::from_be_bytes(bytes[16..24].try_into().ok()?);
        let resuming = match bytes[24] {
            0 => false,
            1 => true,
            _ => return None,
        };
        Some(Hello { stream: bytes[..16].try_into().ok()?, offset, resuming })
    }
}

/// Which of a stream's several connections a session is (version 5): told in the Hello
/// after its version 4 part, and answered in the Welcome with the receiver's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Join {
    /// This connection's place among them, from 0.
    pub index: u8,
    /// How many the sender proposes (in the Hello), or the receiver takes (in the Welcome).
    pub streams: u8,
    /// The most stream bytes the sender may have beyond what the receiver took in, in
    /// order: the receiver's reorder hold (0 in the Hello; the receiver's, a quarter of its
    /// `-m`, in the Welcome). The sender's first credit, until a Delivered frame gives one
    /// ([`Credit`]).
    pub window: u64,
}

impl Join {
    /// The Hello of a joining connection: `hello`'s, then its index and the streams proposed.
    pub fn encode_hello(&self, hello: &Hello) -> [u8; 27] {
        let mut bytes = [0u8; 27];
        bytes[..25].copy_from_slice(&hello.encode());
        bytes[25] = self.index;
        bytes[26] = self.streams;
        bytes
    }

    /// The Hello and the Join in a joining connection's payload, if they are.
    pub fn decode_hello(bytes: &[u8]) -> Option<(Hello, Join)> {
        let (hello, join) = bytes.split_at_checked(25)?;
        let &[index, streams] = join else { return None };
        let join = Join { index, streams, window: 0 };
        (index < streams && streams >= 2).then_some(())?;
        Some((Hello::decode(hello)?, join))
    }

    /// The Welcome to a joining connection: `status` (0, or why it is refused), the window,
    /// and the streams the receiver takes.
    pub fn encode_welcome(&self, status: u64) -> [u8; 17] {
        let mut bytes = [0u8; 17];
        bytes[..8].copy_from_slice(&status.to_be_bytes());
        bytes[8..16].copy_from_slice(&self.window.to_be_bytes());
        bytes[16] = self.streams;
        bytes
    }

    /// The status and the receiver's terms in a joining connection's Welcome; this
    /// connection's `index`.
    pub fn decode_welcome(bytes: &[u8], index: u8) -> Option<(u64, Join)> {
        let bytes: &[u8; 17] = bytes.try_into().ok()?;
        let status = u64::from_be_bytes(bytes[..8].try_into().ok()?);
        let window = u64::from_be_bytes(bytes[8..16].try_into().ok()?);
        Some((status, Join { index, streams: bytes[16], window }))
    }
}

/// What a receiver over several connections (version 5) adds to each Delivered frame, as
/// its payload: how far it has taken the stream in, in order, and how far the sender may
/// go. The Delivered count itself stays what the outputs took, which the sender's backlog
/// keeps until (a resume goes on from it, and it is the sender's "delivered"); the credit is
/// only the window's: a stalled consumer fills the receiver's buffer up to its `-m`, as with
/// one connection, instead of a quarter of it. A version 4 Delivered frame has no payload,
/// and a sender that knows no credit ignores it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Credit {
    /// The stream bytes the receiver's input has taken into its buffer, in order: the
    /// sender's units below need not be sent again, whatever connection drops.
    pub received: u64,
    /// The stream offset the sender may queue up to: at most a window beyond `received`
    /// (the reorder map's bound), and at most the receiver's `-m` beyond what its outputs
    /// took (its buffer and the map together).
    pub limit: u64,
}

impl Credit {
    /// The bytes of a Delivered frame's payload.
    pub const LEN: usize = 16;

    /// Its encoding, as a Delivered frame's payload.
    pub fn encode(&self) -> [u8; Credit::LEN] {
        let mut bytes = [0u8; Credit::LEN];
        bytes[..8].copy_from_slice(&self.received.to_be_bytes());
        bytes[8..].copy_from_slice(&self.limit.to_be_bytes());
        bytes
    }

    /// The credit in a Delivered frame's payload, if it has one.
    pub fn decode(bytes: &[u8]) -> Option<Credit> {
        let bytes: &[u8; Credit::LEN] = bytes.try_into().ok()?;
        let received = u64::from_be_bytes(bytes[..8].try_into().ok()?);
        let limit = u64::from_be_bytes(bytes[8..].try_into().ok()?);
        Some(Credit { received, limit })
    }

    /// The furthest of both, each count on its own (they come on several connections, in
    /// any order).
    pub fn max(self, other: Credit) -> Credit {
        Credit { received: self.received.max(other.received), limit: self.limit.max(other.limit) }
    }
}

/// A frame's kind, in its trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Stream bytes at `offset`.
    Data = 0,
    /// The sender's first frame: it holds the session's keys (the handshake is confirmed).
    Start = 1,
    /// The stream ended after `offset` bytes.
    End = 2,
    /// The sender stops after `offset` bytes; the payload says why.
    Abort = 3,
    /// The stream ended whole: the receiver's outputs took all `offset` bytes.
    Ack = 4,
    /// The receiver's outputs have taken the first `offset` bytes (during the stream); sent
    /// again, unchanged, as the receiver's heartbeat.
    Delivered = 5,
    /// The sender is there, and has sent `offset` bytes: its heartbeat.
    Heartbeat = 6,
    /// On a reconnection: the receiver has the first `offset` bytes; the sender goes on there.
    Resume = 7,
    /// Stream bytes at `offset`, the payload the start of a zstd frame (`--compress`): the
    /// receiver's zstd context starts afresh. In version 4 the whole frame; in version 6,
    /// continued by the [`ZstdMore`](Kind::ZstdMore) frames that follow it.
    Zstd = 8,
    /// Stream bytes at `offset`, the payload the next part of the zstd frame that the
    /// session's last Zstd frame started (version 6): it may refer to any stream byte since.
    ZstdMore = 9,
}

impl Kind {
    fn from_byte(byte: u8) -> Option<Kind> {
        Some(match byte {
            0 => Kind::Data,
            1 => Kind::Start,
            2 => Kind::End,
            3 => Kind::Abort,
            4 => Kind::Ack,
            5 => Kind::Delivered,
            6 => Kind::Heartbeat,
            7 => Kind::Resume,
            8 => Kind::Zstd,
            9 => Kind::ZstdMore,
            _ => return None,
        })
    }
}

/// The trailer of a frame of `kind` at `offset`.
pub fn trailer(kind: Kind, offset: u64) -> [u8; TRAILER] {
    let mut bytes = [0u8; TRAILER];
    bytes[0] = kind as u8;
    bytes[1..].copy_from_slice(&offset.to_be_bytes());
    bytes
}

/// A trailer's kind and offset.
pub fn read_trailer(trailer: &[u8]) -> Option<(Kind, u64)> {
    let (kind, offset) = trailer.split_first()?;
    Some((Kind::from_byte(*kind)?, u64::from_be_bytes(offset.try_into().ok()?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preambles_say_who_is_speaking() {
        for cipher in [Cipher::AesGcm, Cipher::ChaChaPoly] {
            assert_eq!(
                read_preamble(&preamble(cipher)),
                Preamble::Accel(cipher, Version::default())
            );
            for several in [false, true] {
                for history in [false, true] {
                    let version = Version { several, history };
                    let read = read_preamble(&preamble_of(cipher, version));
                    assert_eq!(read, Preamble::Accel(cipher, version));
                }
            }
        }
        assert_eq!(read_preamble(b"SSH-2.0-"), Preamble::Foreign);
        assert_eq!(read_preamble(b"GET / HT"), Preamble::Foreign);
        let several = Version { several: true, history: false };
        assert_eq!(read_preamble(b"accelN5A"), Preamble::Accel(Cipher::AesGcm, several));
        let history = Version { several: false, history: true };
        assert_eq!(read_preamble(b"accelN6C"), Preamble::Accel(Cipher::ChaChaPoly, history));
        assert_eq!(read_preamble(b"accelN8A"), Preamble::OtherVersion);
        assert_eq!(read_preamble(b"accelN7X"), Preamble::OtherVersion);
        assert_eq!(read_preamble(b"accelN5X"), Preamble::OtherVersion);
        assert_eq!(read_preamble(b"accelN3A"), Preamble::OtherVersion);
        assert_eq!(read_preamble(b"accelN2A"), Preamble::OtherVersion);
        assert_eq!(read_preamble(b"accelN1A"), Preamble::OtherVersion);
        assert_eq!(read_preamble(b"accelN4X"), Preamble::OtherVersion);
        // A prefix of accel's own is not yet foreign.
        assert_eq!(read_preamble(b"acc"), Preamble::OtherVersion);
        assert_eq!(read_preamble(b"x"), Preamble::Foreign);
    }

    #[test]
    fn frames_and_hellos_round_trip() {
        assert_eq!(read_trailer(&trailer(Kind::Data, 1 << 40)), Some((Kind::Data, 1 << 40)));
        assert_eq!(read_trailer(&trailer(Kind::End, 5)), Some((Kind::End, 5)));
        assert_eq!(read_trailer(&trailer(Kind::Delivered, 7)), Some((Kind::Delivered, 7)));
        assert_eq!(read_trailer(&trailer(Kind::Heartbeat, 8)), Some((Kind::Heartbeat, 8)));
        assert_eq!(read_trailer(&trailer(Kind::Resume, 9)), Some((Kind::Resume, 9)));
        assert_eq!(read_trailer(&trailer(Kind::Zstd, 10)), Some((Kind::Zstd, 10)));
        assert_eq!(read_trailer(&trailer(Kind::ZstdMore, 11)), Some((Kind::ZstdMore, 11)));
        assert_eq!(read_trailer(b"short"), None);
        let mut unknown = trailer(Kind::Ack, 1);
        unknown[0] = 99;
        assert_eq!(read_trailer(&unknown), None);
        for resuming in [false, true] {
            let hello = Hello { stream: [3; 16], offset: 42, resuming };
            assert_eq!(Hello::decode(&hello.encode()), Some(hello));
        }
        assert_eq!(Hello::decode(&[0; 24]), None);
        assert_eq!(Hello::decode(&[2; 25]), None);
        let hello = Hello { stream: [4; 16], offset: 0, resuming: false };
        let join = Join { index: 3, streams: 4, window: 0 };
        assert_eq!(Join::decode_hello(&join.encode_hello(&hello)), Some((hello, join)));
        // Index past the count, or a single stream: not a joining Hello.
        let mut wrong = join.encode_hello(&hello);
        wrong[25] = 4;
        assert_eq!(Join::decode_hello(&wrong), None);
        let terms = Join { index: 0, streams: 8, window: 1 << 26 };
        let welcome = terms.encode_welcome(BUSY);
        assert_eq!(Join::decode_welcome(&welcome, 0), Some((BUSY, terms)));
    }

    #[test]
    fn the_payload_fills_a_noise_message() {
        assert_eq!(MAX_PAYLOAD + TAG, 65535);
        assert_eq!(MAX_FRAME, 2 + 65535 + 2 + 25);
    }
}
