//! Several inputs read in turn, as `cat` and `pv` read their FILE operands (`accel a b c`,
//! `-` for stdin): to the engine, one input whose descriptor is the current file's.
//!
//! The engine reads and splices a descriptor it takes from the endpoint at every call, and
//! knows nothing of files. So the sequence keeps one descriptor number for the whole run, and
//! when a file ends, opens the next and puts it at that number (`dup2`, [`sys::replace`]): the
//! number stays open throughout, so nothing else can land on it, and whoever reads it next
//! reads the next file. A read (or splice) that returns 0 asks the endpoint whether that is the
//! end of the input ([`Files::next`]); only the last file's end is.
//!
//! Every operand is checked before a byte is read, as `-i` is: one that does not exist, is a
//! directory or cannot be read is refused at the start (status 2), where pv and cat say it
//! when they reach it, skip it, and exit with an error after writing the others: a stream
//! with a file missing from its middle is rarely what a pipeline wants. Regular files are
//! opened to check them and closed again (the first stays open): a thousand operands need not
//! hold a thousand descriptors. The others (FIFOs, devices) are only looked at, since opening
//! a FIFO waits for its writer, and closing it again could cost that writer a SIGPIPE. Each is
//! opened when it is reached, as cat opens it; one that has gone since the start fails the
//! input there (status 1), what came before it delivered.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rustix::fs::{Access, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::endpoint::FdKind;
use crate::stop::Stop;
use crate::sys;
use crate::words::describe;

/// FILE operands read in turn.
#[derive(Debug)]
pub struct Files {
    /// The current file's descriptor, at the same number for the whole run.
    slot: OwnedFd,
    members: Vec<Member>,
    /// The member being read.
    at: Mutex<usize>,
}

/// One operand, as checked at the start.
#[derive(Debug)]
struct Member {
    /// As given; `-` is stdin.
    path: PathBuf,
    /// Its size, when it is a regular file (stdin: what is left of it).
    size: Option<u64>,
    /// Device and inode, when it is a regular file.
    id: Option<(u64, u64)>,
}

/// What the operands are, taken together: how the engine may treat them.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// `File` when every one is a regular file (they may be spliced); `Other` otherwise,
    /// which the engine reads, whatever each turns out to be.
    pub kind: FdKind,
    /// The bytes there are to read, when every one is a regular file: pv's size for the
    /// percent done and the ETA.
    pub size: Option<u64>,
}

impl Files {
    /// Checks every one of `paths` (`-` is stdin), and opens the first; or says which
    /// cannot be read, and why.
    pub fn open(paths: &[PathBuf], stop: &Stop) -> Result<(Files, Shape), (PathBuf, String)> {
        let mut members = Vec::with_capacity(paths.len());
        let mut slot = None;
        for path in paths {
            let fail = |error: io::Error| (path.clone(), describe(&error));
            let (member, opened) = Member::check(path, slot.is_none(), stop).map_err(fail)?;
            slot = slot.or(opened);
            members.push(member);
        }
        let slot = slot.ok_or_else(|| (PathBuf::new(), "no file to read".to_owned()))?;
        let regular = members.iter().all(|member| member.size.is_some());
        let shape = Shape {
            kind: if regular { FdKind::File } else { FdKind::Other },
            size: members.iter().map(|member| member.size).sum(),
        };
        Ok((Files { slot, members, at: Mutex::new(0) }, shape))
    }

    /// The current file's descriptor.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.slot.as_fd()
    }

    /// How the sequence is known: the operands as given, the first few and the last.
    pub fn name(&self) -> String {
        let name = Member::name;
        match self.members.as_slice() {
            [] => String::new(),
            few @ ([_] | [_, _] | [_, _, _]) => few.iter().map(name).collect::<Vec<_>>().join(", "),
            [first, second, .., last] => format!(
                "{}, {} ... {} ({} files)",
                name(first),
                name(second),
                name(last),
                self.members.len()
            ),
        }
    }

    /// The current file has ended (a read or splice of it returned 0): makes the next one
    /// current, opening it; `false` when there is none, the end of the input. A file that can
    /// no longer be opened fails the input, named.
    pub fn next(&self, stop: &Stop) -> io::Result<bool> {
        let mut at = self.at.lock().unwrap_or_else(PoisonError::into_inner);
        if *at + 1 >= self.members.len() {
            return Ok(false);
        }
        *at += 1;
        let member = &self.members[*at];
        let named = |error: io::Error| {
            io::Error::new(error.kind(), format!("{}: {}", member.name(), describe(&error)))
        };
        let fd = member.open(stop).map_err(named)?;
        sys::replace(fd.as_fd(), self.slot.as_fd()).map_err(named)?;
        Ok(true)
    }

    /// The bytes left to read, when every file is a regular file: the rest of the current
    /// one and all of those after it.
    pub fn remaining(&self) -> Option<u64> {
        let at = *self.at.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.members[at].size?;
        let offset = rustix::fs::seek(self.fd(), rustix::fs::SeekFrom::Current(0)).ok()?;
        let later: Option<u64> = self.members[at + 1..].iter().map(|member| member.size).sum();
        Some(current.saturating_sub(offset) + later?)
    }

    /// The operand, among the files still to be read (with bytes in them), that is the
    /// regular file `id`: reading it would read what is written to it.
    pub fn holds(&self, id: (u64, u64)) -> Option<String> {
        let at = *self.at.lock().unwrap_or_else(PoisonError::into_inner);
        let member = self.members[at..]
            .iter()
            .find(|member| member.id == Some(id) && member.size != Some(0))?;
        Some(member.name())
    }
}

impl Member {
    /// As the user knows it: the path, or `stdin` for `-`.
    fn name(&self) -> String {
        match self.path.as_os_str() {
            dash if dash == "-" => "stdin".to_owned(),
            path => Path::new(path).to_string_lossy().into_owned(),
        }
    }

    /// Checks the operand `path` before anything is read: it exists, is no directory, and
    /// can be read. Opens it when `first` (it is read first), or to check a regular file.
    fn check(path: &Path, first: bool, stop: &Stop) -> io::Result<(Member, Option<OwnedFd>)> {
        let stdin = path.as_os_str() == "-";
        let stat = if stdin {
            rustix::fs::fstat(rustix::stdio::stdin())?
        } else {
            rustix::fs::stat(path)?
        };
        let kind = FileType::from_raw_mode(stat.st_mode);
        if kind == FileType::Directory {
            return Err(io::Error::from(io::ErrorKind::IsADirectory));
        }
        let regular = kind == FileType::RegularFile;
        let opened = if first || (regular && !stdin) {
            Some(Member::open_path(path, stop)?)
        } else {
            if !stdin {
                rustix::fs::access(path, Access::READ_OK)?;
            }
            None
        };
        let size = match regular {
            false => None,
            // Stdin may have been read from already: what is left of it.
            true if stdin => {
                let offset =
                    rustix::fs::seek(rustix::stdio::stdin(), rustix::fs::SeekFrom::Current(0))?;
                Some((stat.st_size as u64).saturating_sub(offset))
            }
            true => Some(stat.st_size as u64),
        };
        let id = regular.then_some((stat.st_dev as u64, stat.st_ino as u64));
        let member = Member { path: path.to_owned(), size, id };
        Ok((member, opened.filter(|_| first)))
    }

    /// Opens the file, now that it is reached.
    fn open(&self, stop: &Stop) -> io::Result<OwnedFd> {
        Member::open_path(&self.path, stop)
    }

    /// Opens `path` to read (`-`: stdin's description, shared), waiting for a FIFO's writer
    /// as `cat` does, unless the run is over first.
    fn open_path(path: &Path, stop: &Stop) -> io::Result<OwnedFd> {
        if path.as_os_str() == "-" {
            return Ok(rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stdin(), 0)?);
        }
        loop {
            match rustix::fs::open(path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) {
                Err(Errno::INTR) => stop.check()?,
                result => return Ok(result?),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_by_the_first_few_and_the_last() {
        let named = |paths: &[&str]| {
            let members = paths
                .iter()
                .map(|path| Member { path: path.into(), size: None, id: None })
                .collect();
            let slot = rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stderr(), 0).unwrap();
            Files { slot, members, at: Mutex::new(0) }.name()
        };
        assert_eq!(named(&["a"]), "a");
        assert_eq!(named(&["a", "-", "c"]), "a, stdin, c");
        assert_eq!(named(&["a", "b", "c", "d", "e"]), "a, b ... e (5 files)");
    }
}
