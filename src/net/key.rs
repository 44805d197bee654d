//! Key files: the secret both ends of a transfer share.
//!
//! `accel --generate key > K` writes 32 random bytes from the system's generator as one line,
//! `accel-key-v1:` and 64 hex digits, and makes `K` readable by its owner only (when stdout is
//! a regular file, it is `fchmod`ed to 0600 before the key is written). `--key-file K`, or the
//! file the environment variable [`ENV`] names, is read when accel starts; a key file that
//! its group or others may read or write is refused, as ssh refuses such a private key: anyone
//! who can read it can receive the stream, and send one in its place.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::endpoint::describe;

/// The environment variable that names the key file when `--key-file` is not given.
pub const ENV: &str = "ACCEL_KEY_FILE";

/// What a key file starts with: the format, and its version.
const PREFIX: &str = "accel-key-v1:";

/// Bytes of key: a Noise pre-shared key is 32 bytes.
pub const LEN: usize = 32;

/// The shared secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Key([u8; LEN]);

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the bytes: a Debug print can end up in a log.
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A fresh key from the system's random generator.
    pub fn generate() -> io::Result<Key> {
        let mut bytes = [0u8; LEN];
        super::cipher::fill_random(&mut bytes)?;
        Ok(Key(bytes))
    }

    /// The key file's text: one line.
    pub fn to_line(&self) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        format!("{PREFIX}{hex}\n")
    }

    /// The key in a key file's text.
    pub fn from_text(text: &str) -> Option<Key> {
        let hex = text.trim().strip_prefix(PREFIX)?.as_bytes();
        if hex.len() != 2 * LEN {
            return None;
        }
        let mut bytes = [0u8; LEN];
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks(2)) {
            *byte = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
        }
        Some(Key(bytes))
    }

    /// The 32 bytes, for the Noise handshake.
    pub fn bytes(&self) -> &[u8; LEN] {
        &self.0
    }

    /// Reads the key file at `path`, refusing one that others may read; the error says what
    /// to do, as `--key-file K: ...` would end.
    pub fn read(path: &Path) -> Result<Key, String> {
        let mut file = File::open(path).map_err(|e| describe(&e))?;
        // The file opened, not the path again: what is checked is what is read.
        let meta = file.metadata().map_err(|e| describe(&e))?;
        if meta.is_dir() {
            return Err("is a directory".into());
        }
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_file() && mode & 0o077 != 0 {
            return Err(format!(
                "permissions {mode:04o} are too open: whoever can read the key can receive \
                 the stream or send another; chmod 600 {}",
                path.display()
            ));
        }
        let mut text = String::new();
        // A key file is one short line; more is not a key file (and not worth reading).
        file.by_ref().take(1024).read_to_string(&mut text).map_err(|_| not_a_key_file(path))?;
        Key::from_text(&text).ok_or_else(|| not_a_key_file(path))
    }
}

fn not_a_key_file(path: &Path) -> String {
    format!("not an accel key file; make one with: accel --generate key > {}", path.display())
}

/// Makes stdout readable and writable by its owner only when it is a regular file, so that
/// `accel --generate key > K` leaves no moment when others may read the key. Anything else
/// (a terminal, a pipe) is left as it is.
pub fn protect_stdout() -> io::Result<()> {
    let stdout = rustix::stdio::stdout();
    let stat = rustix::fs::fstat(stdout)?;
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) == rustix::fs::FileType::RegularFile {
        rustix::fs::fchmod(stdout, rustix::fs::Mode::from_raw_mode(0o600))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_key_survives_its_file_and_others_do_not_read_it() {
        let key = Key::generate().unwrap();
        assert_ne!(key, Key::generate().unwrap(), "two keys differ");
        assert_eq!(Key::from_text(&key.to_line()), Some(key.clone()));
        assert_eq!(format!("{key:?}"), "Key(..)");
        let dir = std::env::temp_dir().join(format!("accel-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k");
        let mut file = File::create(&path).unwrap();
        file.write_all(key.to_line().as_bytes()).unwrap();
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o640)).unwrap();
        let refused = Key::read(&path).unwrap_err();
        assert!(refused.starts_with("permissions 0640 are too open"), "{refused}");
        assert!(refused.ends_with(&format!("chmod 600 {}", path.display())), "{refused}");
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o600)).unwrap();
        assert_eq!(Key::read(&path).unwrap(), key);
        std::fs::write(&path, "hunter2\n").unwrap();
        assert!(Key::read(&path).unwrap_err().starts_with("not an accel key file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn malformed_keys_are_not_keys() {
        let line = Key::generate().unwrap().to_line();
        assert!(Key::from_text(&line[..line.len() - 3]).is_none(), "short");
        assert!(Key::from_text(&line.replace("accel-key-v1", "accel-key-v2")).is_none());
        assert!(Key::from_text(&format!("{PREFIX}{}", "zz".repeat(LEN))).is_none());
    }
}
