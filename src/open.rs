//! Opening what `-i` and `-o` name, before anything is read: the input file; output files
//! without clobbering one that exists (unless `-f` or `-a`); devices, FIFOs and sockets as
//! they are.
//!
//! A refusal names the path and the cause, and how to get past it where there is a way
//! (`accel: -o out.img: the file exists; -f overwrites it, -a appends to it`).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::endpoint::{Endpoint, describe};
use crate::stop::Stop;

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

/// Why a path could not be opened; shown as `accel: -o PATH: <why>`.
#[derive(Debug, thiserror::Error)]
#[error("{option} {}: {why}", path.display())]
pub struct OpenError {
    option: &'static str,
    path: PathBuf,
    why: String,
}

impl OpenError {
    fn new(option: &'static str, path: &Path, why: impl Into<String>) -> OpenError {
        OpenError { option, path: path.to_owned(), why: why.into() }
    }
}

/// Opens `path` for `-i`: a file to read, not a directory.
pub fn input(path: &Path, stop: &Arc<Stop>) -> Result<Endpoint, OpenError> {
    let fail = |why: String| OpenError::new("-i", path, why);
    let file = File::open(path).map_err(|e| fail(describe(&e)))?;
    if file.metadata().map_err(|e| fail(describe(&e)))?.is_dir() {
        return Err(fail("is a directory".into()));
    }
    Endpoint::opened(file.into(), &path.to_string_lossy(), stop).map_err(|e| fail(describe(&e)))
}

/// The outputs `-o` names, opened in order; should one fail, the files created for the ones
/// before are removed again, so that a refused command line leaves nothing behind.
pub fn outputs(
    paths: &[PathBuf],
    existing: Existing,
    stop: &Arc<Stop>,
) -> Result<Vec<Endpoint>, OpenError> {
    let mut opened = Vec::new();
    let mut created = Vec::new();
    for path in paths {
        match output(path, existing, stop) {
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
        // FIFOs and devices as they are: no creating, no truncating (`-o /dev/nst0`).
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
