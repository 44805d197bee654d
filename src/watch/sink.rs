//! Where progress is written: stderr, or the descriptor of `--progress-fd`, which accel was
//! handed and does not own; and what the terminal there says (its size, whether accel's job
//! holds it).

use std::io::{self, Write};
use std::os::fd::{BorrowedFd, RawFd};

use super::report;

/// Where progress is written: stderr, or the descriptor of `--progress-fd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sink(pub(super) Option<RawFd>);

impl Sink {
    pub(super) fn fd(&self) -> BorrowedFd<'static> {
        // SAFETY: stderr, or a descriptor checked open at the start and never closed by accel.
        unsafe { BorrowedFd::borrow_raw(self.0.unwrap_or(libc::STDERR_FILENO)) }
    }

    pub(super) fn is_stderr(&self) -> bool {
        self.0.is_none_or(|fd| fd == libc::STDERR_FILENO)
    }

    /// Runs `write` on a writer of this descriptor: stderr's own, locked, so that the text
    /// does not interleave with accel's other messages.
    pub(super) fn with<R>(&self, write: impl FnOnce(&mut dyn Write) -> R) -> R {
        match self.0 {
            Some(fd) if !self.is_stderr() => write(&mut FdWriter(fd)),
            _ => write(&mut io::stderr().lock()),
        }
    }

    /// Writes `text` whole, ignoring errors: a display that fails must not end the run.
    pub(super) fn put(&self, text: &str) {
        self.with(|out| {
            let _ = out.write_all(text.as_bytes());
            let _ = out.flush();
        });
    }
}

/// Writes straight to a descriptor accel does not own.
struct FdWriter(RawFd);

impl Write for FdWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        // SAFETY: as for `Sink::fd`.
        let fd = unsafe { BorrowedFd::borrow_raw(self.0) };
        Ok(rustix::io::write(fd, bytes)?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether accel's process group holds stderr's terminal (it is not a background job).
pub(super) fn in_foreground() -> bool {
    let stderr = rustix::stdio::stderr();
    rustix::termios::tcgetpgrp(stderr).is_ok_and(|group| group == rustix::process::getpgrp())
}

/// `text` for the descriptor `fd`: on a terminal, its long lines broken between words to its
/// width, so that the terminal does not cut a number in two; elsewhere as it is.
pub(super) fn fitted(text: &str, fd: BorrowedFd<'_>) -> String {
    if rustix::termios::isatty(fd) {
        report::wrap(text, terminal_size(fd).0)
    } else {
        text.to_owned()
    }
}

/// The width and height of the terminal `fd`; 80 by 24 where it does not say.
pub(super) fn terminal_size(fd: BorrowedFd<'_>) -> (usize, usize) {
    match rustix::termios::tcgetwinsize(fd) {
        Ok(size) if size.ws_col > 0 && size.ws_row > 0 => {
            // The last column stays free, so that the terminal never wraps the line.
            (usize::from(size.ws_col) - 1, usize::from(size.ws_row))
        }
        _ => (79, 24),
    }
}
