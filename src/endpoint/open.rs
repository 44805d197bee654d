//! Opening what `-i`, FILE operands and `-o` name, before anything is read: the input files;
//! output files without clobbering one that exists (unless `-f` or `-a`); devices, FIFOs and
//! sockets as they are.
//!
//! A refusal names the path and the cause, and how to get past it where there is a way
//! (`accel: -o out.img: the file exists; -f overwrites it, -a appends to it`).
//!
//! A FIFO is opened as `cat > FIFO` opens it: the open waits for a reader. With
//! `--stall-timeout`, no longer than that: the run has not started, but nothing moves.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};

use crate::endpoint::Endpoint;
use crate::endpoint::files::Files;
use crate::stop::Stop;
use crate::words::describe;

/// What `-o` does to a regular file that exists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Existing {
    /// Refuse it (the default): a typo must not cost a file.
    #[default]
    Refuse,
    /// `-f`: truncate and overwrite it.
    Overwrite,
    /// `-a`: append to it.
    Append,
}

/// Why a path could not be opened; shown as `accel: -o PATH: <why>` (`accel: PATH: <why>` for
/// a FILE operand).
#[derive(Debug)]
pub struct OpenError {
    /// `-i`, `-o`, or empty for a FILE operand.
    option: &'static str,
    path: PathBuf,
    why: String,
    stalled: bool,
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.option.is_empty() {
            write!(f, "{} ", self.option)?;
        }
        write!(f, "{}: {}", self.path.display(), self.why)
    }
}

impl std::error::Error for OpenError {}

impl OpenError {
    fn new(option: &'static str, path: &Path, why: impl Into<String>) -> OpenError {
        OpenError { option, path: path.to_owned(), why: why.into(), stalled: false }
    }

    /// Whether nothing came to open it within `--stall-timeout` (a FIFO's reader): status 4,
    /// not a usage error.
    pub fn stalled(&self) -> bool {
        self.stalled
    }
}

/// How often a FIFO with no reader is tried again, under `--stall-timeout`.
const FIFO_RETRY: Duration = Duration::from_millis(20);

/// Opens `path` for `-i`: a file to read, not a directory.
pub fn input(path: &Path, stop: &Arc<Stop>) -> Result<Endpoint, OpenError> {
    opened_input("-i", path, stop)
}

/// Opens the FILE operands `paths` (`-` is stdin) to read in turn: one as `-i` opens it, or
/// several, each checked now ([`Files`]).
pub fn files(paths: &[PathBuf], stop: &Arc<Stop>) -> Result<Endpoint, OpenError> {
    match paths {
        [one] if one.as_os_str() == "-" => {
            Endpoint::stdin(stop).map_err(|e| OpenError::new("", one, describe(&e)))
        }
        [one] => opened_input("", one, stop),
        several => {
            let (files, shape) =
                Files::open(several, stop).map_err(|(path, why)| OpenError::new("", &path, why))?;
            Ok(Endpoint::files(files, shape, stop))
        }
    }
}

/// Opens `path` to read, named by `option` (`-i`, or none for a FILE operand) in a refusal.
fn opened_input(
    option: &'static str,
    path: &Path,
    stop: &Arc<Stop>,
) -> Result<Endpoint, OpenError> {
    let fail = |why: String| OpenError::new(option, path, why);
    let file = File::open(path).map_err(|e| {
        // `pv -i 0.5` is an interval: say so where the number was taken for a file.
        let seconds = path.to_str().is_some_and(|text| text.parse::<f64>().is_ok());
        let habit = if option == "-i" && seconds { "; pv's -i SEC is --interval here" } else { "" };
        fail(format!("{}{habit}", describe(&e)))
    })?;
    if file.metadata().map_err(|e| fail(describe(&e)))?.is_dir() {
        return Err(fail("is a directory".into()));
    }
    Endpoint::opened(file.into(), &path.to_string_lossy(), stop).map_err(|e| fail(describe(&e)))
}

/// The outputs `-o` names, opened in order; should one fail, the files created for the ones
/// before are removed again, so that a refused command line leaves nothing behind. A FIFO's
/// reader is waited for at most `patience` (`--stall-timeout`), when given.
pub fn outputs(
    paths: &[PathBuf],
    existing: Existing,
    stop: &Arc<Stop>,
    patience: Option<Duration>,
) -> Result<Vec<Endpoint>, OpenError> {
    let mut opened = Vec::new();
    let mut created = Vec::new();
    for path in paths {
        match output(path, existing, stop, patience) {
            Ok((endpoint, new)) => {
                if new {
                    created.push(path);
                }
                opened.push(endpoint);
            }
            Err(error) => {
                for path in created {
                    let _ = std::fs::remove_file(path);
                }
                return Err(error);
            }
        }
    }
    Ok(opened)
}

/// Opens `path` for `-o`; also says whether the file was created here.
fn output(
    path: &Path,
    existing: Existing,
    stop: &Arc<Stop>,
    patience: Option<Duration>,
) -> Result<(Endpoint, bool), OpenError> {
    let fail = |why: String| OpenError::new("-o", path, why);
    let (fd, created): (OwnedFd, bool) = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => return Err(fail("is a directory".into())),
        Ok(meta) if meta.is_file() => {
            let mut options = OpenOptions::new();
            match existing {
                Existing::Refuse => {
                    return Err(fail("the file exists; -f overwrites it, -a appends to it".into()));
                }
                Existing::Overwrite => options.write(true).truncate(true),
                Existing::Append => options.append(true),
            };
            (options.open(path).map_err(|e| fail(describe(&e)))?.into(), false)
        }
        // A socket is written by connecting to it; open(2) would refuse.
        Ok(meta) if meta.file_type().is_socket() => {
            (UnixStream::connect(path).map_err(|e| fail(describe(&e)))?.into(), false)
        }
        Ok(meta) if meta.file_type().is_fifo() => (fifo(path, patience)?, false),
        // Devices as they are: no creating, no truncating (`-o /dev/nst0`).
        Ok(_) => {
            let file = OpenOptions::new().write(true).open(path);
            (file.map_err(|e| fail(describe(&e)))?.into(), false)
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            // Created only if it still does not exist: nothing made meanwhile is clobbered.
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .append(existing == Existing::Append)
                .mode(0o666)
                .open(path);
            (file.map_err(|e| fail(describe(&e)))?.into(), true)
        }
        Err(error) => return Err(fail(describe(&error))),
    };
    let endpoint =
        Endpoint::opened(fd, &path.to_string_lossy(), stop).map_err(|e| fail(describe(&e)))?;
    Ok((endpoint, created))
}

/// Opens the FIFO `path` to write once a reader has it open: waiting for ever, as `cat`
/// does, or at most `patience`. Then the open is tried without blocking (ENXIO while no one
/// reads) until it succeeds, and the flag is cleared again: the descriptor is accel's own.
/// Signals end the wait by their default action (accel's handlers come later).
fn fifo(path: &Path, patience: Option<Duration>) -> Result<OwnedFd, OpenError> {
    let fail = |error: io::Error| OpenError::new("-o", path, describe(&error));
    let Some(patience) = patience else {
        return Ok(OpenOptions::new().write(true).open(path).map_err(fail)?.into());
    };
    let began = Instant::now();
    loop {
        match OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(path) {
            Ok(file) => {
                let fd = OwnedFd::from(file);
                let flags = fcntl_getfl(&fd).map_err(|e| fail(e.into()))?;
                fcntl_setfl(&fd, flags - OFlags::NONBLOCK).map_err(|e| fail(e.into()))?;
                return Ok(fd);
            }
            Err(error) if error.raw_os_error() != Some(libc::ENXIO) => return Err(fail(error)),
            Err(_) if began.elapsed() >= patience => {
                let why = format!(
                    "stalled: no reader opened it for {}; nothing was read",
                    crate::words::duration(patience)
                );
                return Err(OpenError { stalled: true, ..OpenError::new("-o", path, why) });
            }
            Err(_) => std::thread::sleep(FIFO_RETRY),
        }
    }
}
