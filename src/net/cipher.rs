//! The session's primitives for `snow`: AES-256-GCM and ChaCha20-Poly1305 from `aws-lc-rs`,
//! and the kernel's random generator (`getrandom(2)`); X25519 and SHA-256 from snow's own
//! default resolver
//! (used by the handshake only, so their speed does not matter).
//!
//! Why not snow's resolvers: snow hands a cipher a plaintext and a separate output buffer.
//! Its `ring` resolver copies the plaintext into the output and seals it there, because ring
//! seals only in place; opening, it copies the ciphertext out first for the same reason. On
//! a stream, those two copies were a seventh of the CPU of a transfer. aws-lc-rs seals and
//! opens from one buffer into another, so nothing is copied, and its AES-GCM uses the wide
//! (AVX-512) AES instructions where the CPU has them: on the machine we measure on, 64 KiB
//! messages seal at 12.3 GB/s against ring's 8.1.
//!
//! This is an adapter and nothing more: the construction (the AEAD, its key, the nonce the
//! Noise specification defines for each cipher) is aws-lc-rs's and the Noise state machine
//! (nonce counting, rekeying) is snow's. The tests check it against snow's own RustCrypto
//! ciphers byte for byte.
//!
//! Why the kernel's random bytes, not aws-lc's generator: aws-lc seeds its own at its first
//! use in each process, from jitterentropy, which costs 20 ms of CPU on an idle machine and
//! measured 130 to 410 ms on this loaded 2-vCPU one (`accel --generate key`, a fresh process
//! each). A remote accel started through ssh made its first random bytes for its answer to
//! the handshake, on the path to the stream's first byte. getrandom(2) is what aws-lc seeds
//! from too, and what `ring`'s and snow's own generators read.

use std::io;

use aws_lc_rs::aead::{self, Aad, LessSafeKey, Nonce, UnboundKey};
use snow::params::{CipherChoice, DHChoice, HashChoice};
use snow::resolvers::{CryptoResolver, DefaultResolver, FallbackResolver};
use snow::types::{Cipher, Dh, Hash, Random};

/// A Noise cipher's key.
const KEY: usize = 32;

/// An AEAD tag.
const TAG: usize = 16;

/// The resolver a session is built with.
pub fn resolver() -> Box<dyn CryptoResolver + Send> {
    Box::new(FallbackResolver::new(Box::new(AwsLc), Box::new(DefaultResolver)))
}

/// Fills `bytes` from the system's random generator, `getrandom(2)` (key files, stream
/// names, the handshake's ephemeral keys): it waits only until the kernel's generator is
/// seeded, once after boot.
#[cfg(target_os = "linux")]
pub fn fill_random(bytes: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < bytes.len() {
        let flags = rustix::rand::GetRandomFlags::empty();
        match rustix::rand::getrandom(&mut bytes[filled..], flags) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => {
                let error = io::Error::from(error);
                return Err(io::Error::other(format!(
                    "the system's random generator failed: {error}"
                )));
            }
        }
    }
    Ok(())
}

/// Fills `bytes` from the system's random generator, aws-lc's (rustix offers getrandom(2)
/// on Linux only).
#[cfg(not(target_os = "linux"))]
pub fn fill_random(bytes: &mut [u8]) -> io::Result<()> {
    use aws_lc_rs::rand::{SecureRandom, SystemRandom};
    SystemRandom::new()
        .fill(bytes)
        .map_err(|_| io::Error::other("the system's random generator failed"))
}

/// The part of the session aws-lc-rs provides, the ciphers, and the kernel's random bytes.
struct AwsLc;

impl CryptoResolver for AwsLc {
    fn resolve_rng(&self) -> Option<Box<dyn Random>> {
        Some(Box::new(SystemRng))
    }

    fn resolve_dh(&self, _choice: &DHChoice) -> Option<Box<dyn Dh>> {
        None
    }

    fn resolve_hash(&self, _choice: &HashChoice) -> Option<Box<dyn Hash>> {
        None
    }

    fn resolve_cipher(&self, choice: &CipherChoice) -> Option<Box<dyn Cipher>> {
        match choice {
            CipherChoice::AESGCM => Some(Box::new(Aead::new(Algorithm::AesGcm))),
            CipherChoice::ChaChaPoly => Some(Box::new(Aead::new(Algorithm::ChaChaPoly))),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }
}

/// snow's random generator (ephemeral keys): the system's, through aws-lc-rs.
struct SystemRng;

impl Random for SystemRng {
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), snow::Error> {
        fill_random(dest).map_err(|_| snow::Error::Rng)
    }
}

/// The two ciphers Noise names, as the specification encodes their nonces.
#[derive(Clone, Copy)]
enum Algorithm {
    /// "AESGCM": the 64-bit counter big-endian, after four zero bytes.
    AesGcm,
    /// "ChaChaPoly": the counter little-endian, after four zero bytes.
    ChaChaPoly,
}

impl Algorithm {
    fn aead(self) -> &'static aead::Algorithm {
        match self {
            Algorithm::AesGcm => &aead::AES_256_GCM,
            Algorithm::ChaChaPoly => &aead::CHACHA20_POLY1305,
        }
    }

    fn nonce(self, counter: u64) -> Nonce {
        let mut bytes = [0u8; 12];
        bytes[4..].copy_from_slice(&match self {
            Algorithm::AesGcm => counter.to_be_bytes(),
            Algorithm::ChaChaPoly => counter.to_le_bytes(),
        });
        Nonce::assume_unique_for_key(bytes)
    }
}

/// One direction's cipher: snow counts the nonces, this seals and opens.
struct Aead {
    algorithm: Algorithm,
    key: LessSafeKey,
}

impl Aead {
    fn new(algorithm: Algorithm) -> Aead {
        Aead { algorithm, key: key(algorithm, &[0; KEY]) }
    }
}

fn key(algorithm: Algorithm, bytes: &[u8; KEY]) -> LessSafeKey {
    LessSafeKey::new(UnboundKey::new(algorithm.aead(), bytes).expect("a 32-byte key"))
}

impl Cipher for Aead {
    fn name(&self) -> &'static str {
        match self.algorithm {
            Algorithm::AesGcm => "AESGCM",
            Algorithm::ChaChaPoly => "ChaChaPoly",
        }
    }

    fn set(&mut self, key_bytes: &[u8; KEY]) {
        self.key = key(self.algorithm, key_bytes);
    }

    fn encrypt(&self, nonce: u64, authtext: &[u8], plaintext: &[u8], out: &mut [u8]) -> usize {
        let (ciphertext, rest) = out.split_at_mut(plaintext.len());
        self.key
            .seal_out_of_place_scatter(
                self.algorithm.nonce(nonce),
                Aad::from(authtext),
                plaintext,
                ciphertext,
                &[],
                &mut rest[..TAG],
            )
            .expect("buffers of the right lengths");
        plaintext.len() + TAG
    }

    fn decrypt(
        &self,
        nonce: u64,
        authtext: &[u8],
        ciphertext: &[u8],
        out: &mut [u8],
    ) -> Result<usize, snow::Error> {
        let Some(len) = ciphertext.len().checked_sub(TAG).filter(|&len| len <= out.len()) else {
            return Err(snow::Error::Decrypt);
        };
        let (sealed, tag) = ciphertext.split_at(len);
        self.key
            .open_separate_gather(
                self.algorithm.nonce(nonce),
                Aad::from(authtext),
                sealed,
                tag,
                &mut out[..len],
            )
            .map_err(|_| snow::Error::Decrypt)?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// snow's own RustCrypto ciphers, the reference.
    fn reference(algorithm: Algorithm) -> Box<dyn Cipher> {
        let choice = match algorithm {
            Algorithm::AesGcm => CipherChoice::AESGCM,
            Algorithm::ChaChaPoly => CipherChoice::ChaChaPoly,
        };
        DefaultResolver.resolve_cipher(&choice).expect("snow's reference cipher")
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn seals_as_snows_own_ciphers_do_and_opens_what_they_seal() {
        for algorithm in [Algorithm::AesGcm, Algorithm::ChaChaPoly] {
            let mut ours = Aead::new(algorithm);
            let mut theirs = reference(algorithm);
            assert_eq!(ours.name(), theirs.name());
            let key: [u8; KEY] = pattern(KEY, 7).try_into().unwrap();
            ours.set(&key);
            theirs.set(&key);
            // Nonces whose bytes differ in order (big- against little-endian), lengths
            // around the AES block and the largest Noise message.
            for (nonce, len) in [(0, 0), (1, 1), (0x0102_0304_0506_0708, 15), (255, 16)]
                .into_iter()
                .chain([(256, 17), (u64::MAX - 1, 1000), (1 << 40, 65535 - TAG)])
            {
                let (plaintext, ad) = (pattern(len, nonce as u8), pattern(nonce as usize % 40, 3));
                let mut sealed = vec![0u8; len + TAG + 5];
                let mut expected = vec![0u8; len + TAG + 5];
                assert_eq!(ours.encrypt(nonce, &ad, &plaintext, &mut sealed), len + TAG);
                assert_eq!(theirs.encrypt(nonce, &ad, &plaintext, &mut expected), len + TAG);
                assert_eq!(sealed, expected, "sealed at nonce {nonce}, {len} bytes");

                let mut opened = vec![0u8; len];
                assert_eq!(ours.decrypt(nonce, &ad, &expected[..len + TAG], &mut opened), Ok(len));
                assert_eq!(opened, plaintext);
                assert_eq!(theirs.decrypt(nonce, &ad, &sealed[..len + TAG], &mut opened), Ok(len));

                // Any other nonce, other associated data or a flipped bit fails.
                let mut opened = vec![0u8; len];
                let wrong = ours.decrypt(nonce ^ 1, &ad, &sealed[..len + TAG], &mut opened);
                assert!(wrong.is_err());
                assert!(ours.decrypt(nonce, b"other", &sealed[..len + TAG], &mut opened).is_err());
                sealed[len / 2] ^= 1;
                assert!(ours.decrypt(nonce, &ad, &sealed[..len + TAG], &mut opened).is_err());
            }
        }
    }

    #[test]
    fn rekeys_as_snows_own_ciphers_do() {
        for algorithm in [Algorithm::AesGcm, Algorithm::ChaChaPoly] {
            let mut ours = Aead::new(algorithm);
            let mut theirs = reference(algorithm);
            ours.set(&[9; KEY]);
            theirs.set(&[9; KEY]);
            ours.rekey();
            theirs.rekey();
            let (mut a, mut b) = ([0u8; 4 + TAG], [0u8; 4 + TAG]);
            ours.encrypt(5, &[], b"data", &mut a);
            theirs.encrypt(5, &[], b"data", &mut b);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn a_message_too_short_or_too_long_for_its_buffer_is_refused() {
        let ours = Aead::new(Algorithm::AesGcm);
        assert!(ours.decrypt(0, &[], &[0; TAG - 1], &mut [0; 64]).is_err());
        assert!(ours.decrypt(0, &[], &[0; TAG + 10], &mut [0; 9]).is_err());
    }
}
