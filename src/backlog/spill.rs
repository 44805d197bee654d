//! Spilling beyond RAM (`--spill DIR`): when the memory buffer is full, further input goes to
//! an unnamed file in DIR and is read back in order after what is in memory.
//!
//! - The file is `O_TMPFILE`: no name leads to it, so nothing is left behind, even after a
//!   crash (elsewhere: a fresh name unlinked at once).
//! - Space is reserved (`fallocate`) a step at a time before any byte is read into it, so a
//!   full disk means "spill no more, hold the producer", never a byte read and then lost.
//! - Offsets only grow while anything is spilled, and a window is given back (a hole punched)
//!   once every reader has passed all of it: the file never holds more disk than the backlog
//!   and one window, and pages still referenced from a pipe (spliced out) keep their bytes,
//!   since whole pages leave the file untouched. When nothing is spilled, the file is emptied
//!   and offsets start again at 0.
//! - The page cache is not flooded: a window is written back as soon as it is full and
//!   dropped from the cache once it is on disk; pages read back go with their hole.
//! - A write-back that fails is never silent zeros: a page whose write failed may leave the
//!   cache, and the reserved space it would be read back from holds zeros. So each window
//!   is checked on disk before it is dropped, a read back of bytes not yet checked first asks
//!   whether a write-back failed since, and once one has, the bytes not yet checked on disk
//!   are not read back: the reader fails (`read back ...`, status 7) and the producer spills
//!   no more.
//! - The file is the backlog's store, not an endpoint: it writes the bytes the producer
//!   staged in memory and reads bytes back into memory a reader hands it, and hands out a
//!   [`FileRange`] where the engine splices (a pipe input into the file, the file into a pipe
//!   output: see `engine/spill.rs`).

use std::fs;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use rustix::io::Errno;

use crate::sys;
use crate::words::describe;

/// The spill file is cut into windows of this much, a segment of the backlog each: the
/// granularity in which disk is given back and the page cache is written and dropped.
pub const WINDOW: u64 = 8 << 20;

/// Space is reserved (`fallocate`) this much at a time: little more than a read ahead of what
/// was read, since a reservation is held while the input waits for data.
pub const STEP: u64 = 1 << 20;

/// Without `--spill-size`, spilling stops short of leaving the file system with less than this
/// share of its space free.
const FREE_SHARE: u64 = 20; // one twentieth: 5 %

/// A stretch of the spill file, to splice into or out of: `len` bytes of `fd` from `offset`.
#[derive(Debug, Clone, Copy)]
pub struct FileRange<'a> {
    /// The spill file.
    pub fd: BorrowedFd<'a>,
    /// Where the stretch begins.
    pub offset: u64,
    /// How long it is.
    pub len: usize,
}

/// The spill file of a run.
#[derive(Debug)]
pub struct SpillFile {
    fd: OwnedFd,
    dir: PathBuf,
    /// The most disk it may hold (`--spill-size`); `None`: as much as leaves 5 % free.
    budget: Option<u64>,
    written: Mutex<WriteBack>,
}

/// What is known of the spill file's write-back.
#[derive(Debug, Default)]
struct WriteBack {
    /// Every window below this offset was checked on disk (and dropped from the cache).
    confirmed: u64,
    /// A write-back failed (the error number): from this offset on, spilled bytes cannot be
    /// trusted to read back. The kernel says only that some write-back of the file failed
    /// since the last look, so this is where the windows not yet checked begin.
    lost: Option<(u64, i32)>,
}

impl SpillFile {
    /// Makes the spill file in `dir`, checking before anything is read that spilling there is
    /// safe: the directory exists and is writable, and its file system makes unnamed files,
    /// reserves space and gives it back. Says why not, in words.
    pub fn create(dir: &Path, budget: Option<u64>) -> Result<SpillFile, String> {
        match fs::metadata(dir) {
            Ok(meta) if !meta.is_dir() => return Err("not a directory".into()),
            Ok(_) => {}
            Err(error) => return Err(describe(&error)),
        }
        let fd = sys::spill_file(dir).map_err(|error| match error.raw_os_error() {
            Some(libc::EOPNOTSUPP) | Some(libc::EISDIR) => format!(
                "its file system cannot make unnamed files (O_TMPFILE): {}",
                describe(&error)
            ),
            _ => describe(&error),
        })?;
        let page = rustix::param::page_size() as u64;
        sys::reserve_space(fd.as_fd(), 0, page).map_err(|error| {
            format!("its file system cannot reserve space (fallocate): {}", describe(&error))
        })?;
        sys::punch_hole(fd.as_fd(), 0, page).map_err(|error| {
            format!("its file system cannot give space back (punch a hole): {}", describe(&error))
        })?;
        Ok(SpillFile { fd, dir: dir.to_owned(), budget, written: Mutex::default() })
    }

    /// The directory spilled into, for messages.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reserves `len` bytes at `offset` for spilled bytes, with `held` bytes spilled already;
    /// `false` when the budget, the free-space margin or the disk says no.
    pub fn reserve(&self, offset: u64, len: u64, held: u64) -> io::Result<bool> {
        match self.budget {
            Some(budget) if held + len > budget => return Ok(false),
            Some(_) => {}
            None => {
                let fs = rustix::fs::fstatvfs(&self.fd)?;
                let (free, total) = (fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize);
                if free < len + total / FREE_SHARE {
                    return Ok(false);
                }
            }
        }
        match sys::reserve_space(self.fd.as_fd(), offset, len) {
            Ok(()) => Ok(true),
            Err(error) if matches!(error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)) => {
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }

    /// The stretch of `len` bytes at `offset`, to splice into or out of.
    pub(super) fn range(&self, offset: u64, len: usize) -> FileRange<'_> {
        FileRange { fd: self.fd.as_fd(), offset, len }
    }

    /// Reads spilled bytes at `offset` into `buf`: all of it, or an error (a spilled range is
    /// never short of what was committed, nor read back where a write-back failed: looked at
    /// before and after, since a page of a failed write can leave the cache meanwhile).
    pub(super) fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let Some(last) = (buf.len() as u64).checked_sub(1) else { return Ok(0) };
        self.readable(offset + last, 1)?;
        let mut done = 0;
        while done < buf.len() {
            match rustix::io::pread(&self.fd, &mut buf[done..], offset + done as u64) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(error) => return Err(error.into()),
            }
        }
        self.readable(offset + last, 1)?;
        Ok(done)
    }

    /// How many of `len` spilled bytes at `offset` may be read back: all of them, or those
    /// before the point from which a failed write-back lost them; the error when `offset`
    /// is past that point. For bytes not yet checked on disk, asks the kernel first whether
    /// a write-back failed since the last look (a system call that waits for nothing);
    /// windows checked on disk are read from there, whatever fails later.
    pub(super) fn readable(&self, offset: u64, len: usize) -> io::Result<usize> {
        let unchecked = offset + len as u64 > self.lock().confirmed;
        if unchecked && let Err(error) = sys::writeback_error(self.fd.as_fd()) {
            self.lose(&error);
        }
        match self.lock().lost {
            Some((from, errno)) if offset >= from => Err(io::Error::other(format!(
                "written back with an error ({})",
                describe(&io::Error::from_raw_os_error(errno))
            ))),
            Some((from, _)) => Ok(len.min((from - offset) as usize)),
            None => Ok(len),
        }
    }

    /// A write-back failed with `error`: what was not yet checked on disk is lost.
    fn lose(&self, error: &io::Error) {
        let mut written = self.lock();
        let from = written.lost.map_or(written.confirmed, |(from, _)| from.min(written.confirmed));
        written.lost = Some((from, error.raw_os_error().unwrap_or(libc::EIO)));
    }

    /// The error of a failed write-back, once one is known (by
    /// [`window_full`](Self::window_full) or a read back).
    pub fn writeback_failure(&self) -> Option<io::Error> {
        self.lock().lost.map(|(_, errno)| io::Error::from_raw_os_error(errno))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WriteBack> {
        self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes all of `bytes` into the file at `offset` (space reserved for them).
    pub(super) fn write_at(&self, bytes: &[u8], offset: u64) -> io::Result<()> {
        let mut done = 0;
        while done < bytes.len() {
            match rustix::io::pwrite(&self.fd, &bytes[done..], offset + done as u64) {
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// A window at `offset` is full: start writing it to disk, and drop the one before from
    /// the page cache once it is checked written (`sync_file_range` waiting for it, which
    /// reports a failed write-back; no `fdatasync`: a spill need not survive a crash, only be
    /// read back). A failed write-back is returned, and what was not yet checked on disk is
    /// not read back from then on.
    pub fn window_full(&self, offset: u64) -> io::Result<()> {
        let fd = self.fd.as_fd();
        let checked = sys::start_writeback(fd, offset, WINDOW).and_then(|()| {
            let Some(before) = offset.checked_sub(WINDOW) else { return Ok(()) };
            sys::drop_written(fd, before, WINDOW)?;
            self.lock().confirmed = offset;
            Ok(())
        });
        checked.inspect_err(|error| self.lose(error))
    }

    /// Every reader has passed the window at `offset`: its disk goes back.
    ///
    /// Only ever a whole window, aligned: punching part of a page, or part of a large folio,
    /// zeroes the rest of it in place, and a pipe an output was spliced into may still refer
    /// to those very pages (the consumer would read zeros where the stream was).
    pub fn release_window(&self, offset: u64) {
        debug_assert_eq!(offset % WINDOW, 0);
        let _ = sys::punch_hole(self.fd.as_fd(), offset, WINDOW);
    }

    /// Nothing is spilled: the file is emptied, and offsets may start again at 0.
    pub fn empty(&self) {
        let _ = rustix::fs::ftruncate(&self.fd, 0);
        self.lock().confirmed = 0;
    }
}
