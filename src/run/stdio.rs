//! The standard descriptors as accel found them.
//!
//! Rust's runtime quietly reopens a closed fd 0, 1 or 2 on `/dev/null` before `main`, which
//! would turn `accel >&-` into silent data loss. accel takes over `main` (see `main.rs`) and does
//! the check itself: a closed stdin or stdout is an error the user hears about, while the slot is
//! still filled with `/dev/null` so that no descriptor accel opens later can land on 0, 1 or 2.

use std::os::fd::IntoRawFd;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// Which of stdin, stdout and stderr were closed when accel started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Closed {
    /// fd 0 was closed.
    pub stdin: bool,
    /// fd 1 was closed.
    pub stdout: bool,
    /// fd 2 was closed (messages then go nowhere, as with any Unix tool).
    pub stderr: bool,
}

/// Finds which standard descriptors are closed and parks `/dev/null` in their slots.
///
/// Call first thing in `main`, before anything opens a descriptor.
pub fn claim() -> Closed {
    let mut closed = [false; 3];
    for (fd, closed) in closed.iter_mut().enumerate() {
        if crate::sys::check_open(fd as i32) == Err(Errno::BADF) {
            *closed = true;
            // open() takes the lowest free number, which is this one: the lower ones are open.
            if let Ok(null) = rustix::fs::open("/dev/null", OFlags::RDWR, Mode::empty()) {
                let _ = null.into_raw_fd();
            }
        }
    }
    Closed { stdin: closed[0], stdout: closed[1], stderr: closed[2] }
}
