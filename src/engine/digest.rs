//! Stream hashes (`--hash`): each is one more reader of the backlog, on a thread of its own, so
//! that a hash slower than the outputs holds the producer as a slow output would (and the
//! report names it), and one faster costs them nothing.
//!
//! The digests come from well-kept implementations: RustCrypto's `sha2`, `sha1` and `md-5`
//! (SHA-NI and AVX2 where the CPU has them, detected at run time) and the `blake3` crate
//! (AVX-512, AVX2 or SSE4.1, likewise), all behind the `digest` crate's [`DynDigest`] (blake3
//! through its `traits-preview` feature). blake3 compiles C and assembly, so it is behind the
//! `blake3` feature (on for the program): the library alone has the others.

use std::fmt;

use digest::DynDigest;

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
    #[cfg(feature = "blake3")]
    Blake3,
}

impl Algorithm {
    /// Every algorithm, in the order `--help` lists them.
    pub const ALL: &[Algorithm] = &[
        Algorithm::Sha256,
        Algorithm::Sha512,
        #[cfg(feature = "blake3")]
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
            #[cfg(feature = "blake3")]
            Algorithm::Blake3 => "blake3",
        }
    }

    /// The names of them all, in the order `--help` lists them.
    pub fn names() -> Vec<&'static str> {
        Algorithm::ALL.iter().map(|a| a.name()).collect()
    }

    /// The algorithm named `name` (`sha256`, `SHA-256`, `md5`...), if any.
    pub fn named(name: &str) -> Option<Algorithm> {
        let plain: String =
            name.chars().filter(|c| *c != '-' && *c != '_').collect::<String>().to_lowercase();
        Algorithm::ALL.iter().copied().find(|a| a.name() == plain)
    }

    /// A fresh hasher for the algorithm.
    fn hasher(self) -> Box<dyn DynDigest> {
        match self {
            Algorithm::Md5 => Box::new(md5::Md5::default()),
            Algorithm::Sha1 => Box::new(sha1::Sha1::default()),
            Algorithm::Sha224 => Box::new(sha2::Sha224::default()),
            Algorithm::Sha256 => Box::new(sha2::Sha256::default()),
            Algorithm::Sha384 => Box::new(sha2::Sha384::default()),
            Algorithm::Sha512 => Box::new(sha2::Sha512::default()),
            #[cfg(feature = "blake3")]
            Algorithm::Blake3 => Box::new(blake3::Hasher::new()),
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
    (!stop.requested()).then(|| Digest { algorithm, hex: hex::encode(hasher.finalize()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(algorithm: Algorithm, bytes: &[u8]) -> String {
        let mut hasher = algorithm.hasher();
        hasher.update(bytes);
        hex::encode(hasher.finalize())
    }

    #[test]
    fn known_answers() {
        // The digests of "abc" from the standards (FIPS 180-4, RFC 1321) and BLAKE3's
        // reference implementation.
        let abc = [
            (Algorithm::Md5, "900150983cd24fb0d6963f7d28e17f72"),
            (Algorithm::Sha1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
            (Algorithm::Sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            #[cfg(feature = "blake3")]
            (Algorithm::Blake3, "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"),
            (Algorithm::Sha224, "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"),
            (
                Algorithm::Sha384,
                "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed\
                 8086072ba1e7cc2358baeca134c825a7",
            ),
            (
                Algorithm::Sha512,
                "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a\
                 2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f",
            ),
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
        for &algorithm in Algorithm::ALL {
            assert_eq!(Algorithm::named(algorithm.name()), Some(algorithm));
        }
    }
}
