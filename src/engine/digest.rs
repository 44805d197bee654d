//! Stream hashes (`--hash`): each is one more reader of the backlog, on a thread of its own, so
//! that a hash slower than the outputs holds the producer as a slow output would (and the
//! report names it), and one faster costs them nothing.
//!
//! The digests come from well-kept implementations: RustCrypto's `sha2`, `sha1` and `md-5`
//! (SHA-NI and AVX2 where the CPU has them, detected at run time) and the `blake3` crate
//! (AVX-512, AVX2 or SSE4.1, likewise).

use std::fmt;

use super::fault::test_panic;
use super::spill;
use crate::backlog::{Front, Reader};
use crate::stop::Stop;

/// A hash algorithm `--hash` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// MD5 (as `md5sum`): for checking against old lists, not against tampering.
    Md5,
    /// SHA-1 (as `sha1sum`): likewise.
    Sha1,
    /// SHA-224.
    Sha224,
    /// SHA-256 (as `sha256sum`).
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512 (as `sha512sum`).
    Sha512,
    /// BLAKE3 (as `b3sum`): the fastest here.
    Blake3,
}

impl Algorithm {
    /// Every algorithm, in the order `--help` lists them.
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Sha256,
        Algorithm::Sha512,
        Algorithm::Blake3,
        Algorithm::Md5,
        Algorithm::Sha1,
        Algorithm::Sha224,
        Algorithm::Sha384,
    ];

    /// Its name as typed and shown: `sha256`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Md5 => "md5",
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha224 => "sha224",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha384 => "sha384",
            Algorithm::Sha512 => "sha512",
            Algorithm::Blake3 => "blake3",
        }
    }

    /// The algorithm named `name` (`sha256`, `SHA-256`, `md5`...), if any.
    pub fn named(name: &str) -> Option<Algorithm> {
        let plain: String =
            name.chars().filter(|c| *c != '-' && *c != '_').collect::<String>().to_lowercase();
        Algorithm::ALL.into_iter().find(|a| a.name() == plain)
    }

    fn hasher(self) -> Hasher {
        use sha2::Digest as _;
        match self {
            Algorithm::Md5 => Hasher::Md5(md5::Md5::new()),
            Algorithm::Sha1 => Hasher::Sha1(sha1::Sha1::new()),
            Algorithm::Sha224 => Hasher::Sha224(sha2::Sha224::new()),
            Algorithm::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Algorithm::Sha384 => Hasher::Sha384(sha2::Sha384::new()),
            Algorithm::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
            Algorithm::Blake3 => Hasher::Blake3(Box::new(blake3::Hasher::new())),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A finished hash of the whole stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    /// Which hash.
    pub algorithm: Algorithm,
    /// The digest in lower-case hex, as `sha256sum` prints it.
    pub hex: String,
}

enum Hasher {
    Md5(md5::Md5),
    Sha1(sha1::Sha1),
    Sha224(sha2::Sha224),
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
    Blake3(Box<blake3::Hasher>),
}

impl Hasher {
    fn update(&mut self, bytes: &[u8]) {
        use sha2::Digest as _;
        match self {
            Hasher::Md5(h) => h.update(bytes),
            Hasher::Sha1(h) => h.update(bytes),
            Hasher::Sha224(h) => h.update(bytes),
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha384(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
            Hasher::Blake3(h) => {
                h.update(bytes);
            }
        }
    }

    fn hex(self) -> String {
        use sha2::Digest as _;
        let bytes: Vec<u8> = match self {
            Hasher::Md5(h) => h.finalize().to_vec(),
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Sha224(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha384(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
            Hasher::Blake3(h) => return h.finalize().to_hex().to_string(),
        };
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Hashes everything `reader` is given; `None` when the run was stopped before the input's
/// end (a hash of part of a stream would only mislead).
pub fn hash(algorithm: Algorithm, mut reader: Reader, stop: &Stop) -> Option<Digest> {
    let mut hasher = algorithm.hasher();
    let mut scratch = Vec::new();
    let mut taken = 0;
    while let Some(front) = reader.front() {
        let n = match front {
            Front::Memory(filled) => {
                hasher.update(filled.as_slice());
                filled.as_slice().len()
            }
            Front::Spill(range) => {
                // A disk error here is told by the outputs, which read the same bytes.
                let bytes = spill::read_back(&range, range.len(), &mut scratch).ok()?;
                hasher.update(bytes);
                bytes.len()
            }
            Front::Pipe(..) => {
                unreachable!("a backlog with a hash has several readers, so holds no pipes")
            }
        };
        reader.consume(n);
        taken += n as u64;
        test_panic("hash", taken);
    }
    (!stop.requested()).then(|| Digest { algorithm, hex: hasher.hex() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(algorithm: Algorithm, bytes: &[u8]) -> String {
        let mut hasher = algorithm.hasher();
        hasher.update(bytes);
        hasher.hex()
    }

    #[test]
    fn known_answers() {
        // The digests of "abc" from the standards (FIPS 180-4, RFC 1321) and BLAKE3's
        // reference implementation.
        let abc = [
            (Algorithm::Md5, "900150983cd24fb0d6963f7d28e17f72"),
            (Algorithm::Sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (Algorithm::Sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (Algorithm::Blake3, "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"),
        ];
        for (algorithm, hex) in abc {
            assert_eq!(of(algorithm, b"abc"), hex, "{algorithm}");
        }
    }

    #[test]
    fn names_as_typed() {
        assert_eq!(Algorithm::named("sha256"), Some(Algorithm::Sha256));
        assert_eq!(Algorithm::named("SHA-512"), Some(Algorithm::Sha512));
        assert_eq!(Algorithm::named("MD5"), Some(Algorithm::Md5));
        assert_eq!(Algorithm::named("crc32"), None);
        for algorithm in Algorithm::ALL {
            assert_eq!(Algorithm::named(algorithm.name()), Some(algorithm));
        }
    }
}
