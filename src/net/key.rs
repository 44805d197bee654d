//! Key files: the secret both ends of a transfer share.
//!
//! `accel --generate key K` writes 32 random bytes from the system's generator as one line,
//! `accel-key-v1:` and 64 hex digits, into a new file `K` made readable by its owner only: it
//! is created with `O_EXCL` and mode 0600, so nobody else can have it open, and an existing
//! file is refused. `accel --generate key > K` is refused when `K` is a file (or a named
//! FIFO) that its group or others may open, or someone else's: the shell created it before
//! accel ran (0644 under umask 022), and whoever opened it in that moment keeps a handle that
//! reads the key once it is written; no `chmod` afterwards takes that handle away. Anonymous
//! pipes and terminals are the user's own choice (`accel --generate key | ssh host 'cat > K'`)
//! and are written.
//!
//! `--key-file K`, or the file the environment variable [`ENV`] names, is read when accel
//! starts; as ssh does with a private key, a key file is refused when its group or others may
//! read or write it (anyone who can read it can receive the stream, and send one in its
//! place), or when it belongs to another user than the one running accel (or root): its
//! owner could change the key, or read it.
//!
//! The key's bytes, and the text they are read from or written as, are zeroed when dropped
//! ([`zeroize`]); the key cannot be cloned.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use zeroize::{Zeroize, Zeroizing};

use crate::words::describe;

/// The environment variable that names the key file when `--key-file` is not given.
pub const ENV: &str = "ACCEL_KEY_FILE";

/// What a key file starts with: the format, and its version.
const PREFIX: &str = "accel-key-v1:";

/// Bytes of key: a Noise pre-shared key is 32 bytes.
pub const LEN: usize = 32;

/// The shared secret, zeroed when dropped.
#[derive(PartialEq, Eq)]
pub struct Key([u8; LEN]);

impl Drop for Key {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the bytes: a Debug print can end up in a log.
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A fresh key from the system's random generator.
    pub fn generate() -> io::Result<Key> {
        let mut key = Key([0u8; LEN]);
        super::cipher::fill_random(&mut key.0)?;
        Ok(key)
    }

    /// The key file's text: one line.
    pub fn to_line(&self) -> Zeroizing<String> {
        // Into buffers of their final size, zeroed when dropped: nothing grows, so no copy of
        // the key is left behind.
        let mut digits = Zeroizing::new([0u8; 2 * LEN]);
        hex::encode_to_slice(self.0.as_slice(), &mut *digits).expect("space for two digits a byte");
        let mut line = Zeroizing::new(String::with_capacity(PREFIX.len() + 2 * LEN + 1));
        line.push_str(PREFIX);
        line.push_str(std::str::from_utf8(&*digits).expect("hex digits"));
        line.push('\n');
        line
    }

    /// The key in a key file's text: the prefix, then 64 hex digits.
    pub fn from_text(text: &str) -> Option<Key> {
        let digits = text.trim().strip_prefix(PREFIX)?;
        let mut key = Key([0u8; LEN]);
        hex::decode_to_slice(digits, &mut key.0).ok()?;
        Some(key)
    }

    /// The 32 bytes, for the Noise handshake.
    pub fn bytes(&self) -> &[u8; LEN] {
        &self.0
    }

    /// Reads the key file at `path`, refusing one that others may read or change; the error
    /// says what to do, as `--key-file K: ...` would end.
    pub fn read(path: &Path) -> Result<Key, String> {
        let mut file = File::open(path).map_err(|e| describe(&e))?;
        // The file opened, not the path again: what is checked is what is read.
        let meta = file.metadata().map_err(|e| describe(&e))?;
        if meta.is_dir() {
            return Err("is a directory".into());
        }
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me && meta.uid() != 0 {
            return Err(format!(
                "owned by user {}, who could change the key or read it; a key file must be \
                 yours (or root's), as ssh wants of a private key: copy it to a file of your own",
                meta.uid()
            ));
        }
        let mode = meta.permissions().mode() & 0o777;
        if meta.is_file() && mode & 0o077 != 0 {
            return Err(format!(
                "permissions {mode:04o} are too open: whoever can read the key can receive \
                 the stream or send another; chmod 600 {}",
                path.display()
            ));
        }
        // Space for all it may read: a String that grows leaves copies behind, unzeroed.
        let mut text = Zeroizing::new(String::with_capacity(1024));
        // A key file is one short line; more is not a key file (and not worth reading).
        Read::by_ref(&mut file)
            .take(1024)
            .read_to_string(&mut text)
            .map_err(|_| not_a_key_file(path))?;
        Key::from_text(&text).ok_or_else(|| not_a_key_file(path))
    }
}

fn not_a_key_file(path: &Path) -> String {
    format!("not an accel key file; make one with: accel --generate key {}", path.display())
}

/// Why `--generate key` wrote no key: the whole message, for `accel: ` to prefix.
#[derive(Debug)]
pub enum NotWritten {
    /// The file named, or stdout, may not hold a key (status 2).
    Refused(String),
    /// Writing it failed (status 3).
    Failed(String),
}

/// `accel --generate key [FILE]`: a new key into a new `file`, or to stdout when that is
/// safe (see the module's comment).
pub fn generate(file: Option<&Path>) -> Result<(), NotWritten> {
    let key = Key::generate().map_err(|e| NotWritten::Failed(format!("--generate key: {e}")))?;
    let line = key.to_line();
    let Some(path) = file else {
        refuse_open_stdout().map_err(NotWritten::Refused)?;
        let mut stdout = io::stdout().lock();
        return stdout
            .write_all(line.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| NotWritten::Failed(format!("--generate key: {}", describe(&e))));
    };
    let what = format!("--generate key {}", path.display());
    let mut created =
        std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(
            |e| {
                NotWritten::Refused(match e.kind() {
                    io::ErrorKind::AlreadyExists => format!(
                        "{what}: it exists, and a key goes only into a new file, which nobody else \
                     can have open; remove it first, or name another"
                    ),
                    _ => format!("{what}: {}", describe(&e)),
                })
            },
        )?;
    created.write_all(line.as_bytes()).and_then(|()| created.sync_all()).map_err(|e| {
        // Half a key file is no key file: the next try must not find it in the way.
        let _ = std::fs::remove_file(path);
        NotWritten::Failed(format!("{what}: {}", describe(&e)))
    })
}

/// Refuses a stdout that is a file or a named FIFO which its group or others may open, or
/// another user's: someone may have opened it before accel ran, and would read the key.
fn refuse_open_stdout() -> Result<(), String> {
    use rustix::fs::FileType;
    let stat = rustix::fs::fstat(rustix::stdio::stdout())
        .map_err(|e| format!("--generate key: stdout: {}", describe(&e.into())))?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile && kind != FileType::Fifo {
        return Ok(());
    }
    let mode = stat.st_mode & 0o777;
    let owner = stat.st_uid;
    let why = if owner != rustix::process::geteuid().as_raw() {
        format!("belongs to user {owner}")
    } else if mode & 0o077 != 0 {
        format!("has permissions {mode:04o}")
    } else {
        // An anonymous pipe is 0600 and the user's own; so is a file made under umask 077.
        return Ok(());
    };
    // Its name, where the system says it (Linux); only to word the advice.
    let name = std::fs::read_link("/proc/self/fd/1")
        .ok()
        .filter(|name| name.is_absolute())
        .map(|name| name.display().to_string());
    let (it, advice) = match &name {
        Some(name) => (format!("{name}, which"), format!("rm {name}; accel --generate key {name}")),
        None => ("a file that".to_owned(), "accel --generate key FILE".to_owned()),
    };
    Err(format!(
        "--generate key: stdout is {it} {why}: whoever opened it before accel ran could read \
         the key, so none was written; instead type: {advice}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_key_survives_its_file_and_others_do_not_read_it() {
        let key = Key::generate().unwrap();
        assert_ne!(key, Key::generate().unwrap(), "two keys differ");
        assert_eq!(Key::from_text(&key.to_line()).as_ref(), Some(&key));
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
