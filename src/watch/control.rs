//! Talking to a running accel from another shell (`accel -R PID -r 5M`, `accel -R PID`), as
//! `pv -R PID -L RATE` does, but so that only its own user (or root) can.
//!
//! Every accel listens on a Unix socket, `accel/PID.sock` under `$XDG_RUNTIME_DIR` (or
//! `/tmp/accel-UID/` where that is unset), in a directory only its user may enter (0700,
//! checked: a directory someone else made, or made open, is not used) and with the socket
//! itself 0600; and it answers only a peer whose credentials say the same user or root.
//! Several accels run side by side, each at its own PID. The client trusts no more than the
//! server: the directory and the socket must be its user's, and the listener (`SO_PEERCRED`)
//! its user and process PID; what the peer says is printed with control characters shown as
//! `?`.
//!
//! The socket goes when accel ends, however it ends ([`remove_socket`]: when the run is over,
//! and in the signal thread before a signal ends accel); one left by an accel that could not
//! remove it (`kill -9`) is cleared by the next accel to start: a socket nobody listens on is
//! stale, whatever process now has its number.
//!
//! The protocol is a line from the client: `rate N`, `input-rate N` (bytes per second, 0 for
//! no limit) or `report`; the answer is `ok` and the limit replaced, or the report so far, or
//! `error: why`. The watcher
//! looks for a first client at each tick (twice a second) without waiting; that client
//! starts a thread of the socket's own, which serves it and every later one, so that a client
//! slow to ask or to read holds only that thread, never the watcher and its stall watchdog.

use std::fs;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use crate::engine::pace::Limits;
use crate::size::Bytes;
use crate::sys;
use crate::words::describe;
use crate::words::printable;

/// How long a client may take to send its line, or to read the answer.
const PATIENCE: Duration = Duration::from_secs(2);

/// The most of an answer the client reads: a report is a few lines.
const MOST_ANSWER: u64 = 64 << 10;

/// The socket this process listens on, until it is removed.
static SOCKET: Mutex<Option<PathBuf>> = Mutex::new(None);

/// What a client asks of a running accel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Set the output rate limit (bytes per second; 0: none).
    Rate(u64),
    /// Set the input rate limit.
    InputRate(u64),
    /// Send the report so far.
    Report,
}

/// The directory of this user's accels: control sockets, and the files of terminals shared
/// by several (see `watch::board`). `$XDG_RUNTIME_DIR/accel`, or `/tmp/accel-UID` where that
/// is unset or not a directory.
fn directory() -> Option<PathBuf> {
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    match runtime.filter(|dir| dir.is_absolute() && dir.is_dir()) {
        Some(runtime) => Some(runtime.join("accel")),
        None => {
            Some(std::env::temp_dir().join(format!("accel-{}", rustix::process::getuid().as_raw())))
        }
    }
}

/// [`directory`], made (0700) if missing, and checked that only this user may enter it.
pub fn private_directory() -> io::Result<PathBuf> {
    let dir = directory().ok_or_else(|| io::Error::other("no directory for it"))?;
    safe_directory(&dir)?;
    Ok(dir)
}

/// Removes this process's control socket, if it has one: called however accel ends (when the
/// run is over, before its status is returned, and before a signal that ends accel is
/// re-raised).
pub fn remove_socket() {
    let path = SOCKET.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(path) = path {
        let _ = fs::remove_file(path);
    }
}

/// The listening end of a running accel's control socket; removed when dropped.
#[derive(Debug)]
pub struct Control {
    listener: UnixListener,
    /// The control thread serves it: the watcher need not look.
    served: AtomicBool,
}

impl Control {
    /// Listens at this process's socket, after clearing stale ones. Fails, saying why, where
    /// the directory is not safe.
    pub fn listen() -> io::Result<Control> {
        let dir = private_directory()?;
        clear_stale(&dir);
        let pid = std::process::id();
        let path = dir.join(format!("{pid}.sock"));
        // Bound under a name that no other accel clears, and moved to its place once it
        // listens: between bind and listen a connection is refused, which says "stale". A
        // socket at the place is stale: this process is the one of that number now.
        let bound = dir.join(format!(".{pid}.new"));
        let _ = fs::remove_file(&bound);
        let listener = UnixListener::bind(&bound)?;
        let placed = fs::set_permissions(&bound, fs::Permissions::from_mode(0o600))
            .and_then(|()| fs::rename(&bound, &path));
        if let Err(error) = placed {
            let _ = fs::remove_file(&bound);
            return Err(error);
        }
        *SOCKET.lock().unwrap_or_else(PoisonError::into_inner) = Some(path);
        // Not blocking until the control thread takes it, so that the watcher only looks.
        listener.set_nonblocking(true)?;
        Ok(Control { listener, served: AtomicBool::new(false) })
    }

    /// Looks for a client, without waiting: the first one starts the control thread, which
    /// answers it and every later one until the process ends, giving each [`PATIENCE`] to
    /// ask and to read; a slow client holds only that thread, never the caller (the watcher
    /// and its stall watchdog). `report` makes what gives the report so far. No thread is
    /// spent unless someone asks; without one to spare, the client goes unanswered and the
    /// next one tries again.
    pub fn look<R: Fn() -> String + Send + 'static>(
        &self,
        limits: &Arc<Limits>,
        report: impl FnOnce() -> R,
    ) {
        if self.served.load(Relaxed) {
            return;
        }
        let Ok((first, _)) = self.listener.accept() else { return };
        let Ok(listener) = self.listener.try_clone() else { return };
        let (limits, report) = (Arc::clone(limits), report());
        let started = thread::Builder::new().name("accel-control".into()).spawn(move || {
            let _ = answer(first, &limits, &report);
            if listener.set_nonblocking(false).is_err() {
                return;
            }
            loop {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = answer(stream, &limits, &report);
                    }
                    // Out of descriptors, say: the next client may fare better, a moment on.
                    Err(_) => thread::sleep(PATIENCE / 20),
                }
            }
        });
        self.served.store(started.is_ok(), Relaxed);
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        remove_socket();
    }
}

/// Makes `dir` (0700) if missing, and checks that only this user may enter it.
fn safe_directory(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    match not_private(dir, &fs::symlink_metadata(dir)?) {
        Some(why) => Err(io::Error::other(why)),
        None => Ok(()),
    }
}

/// Why `dir`, of metadata `meta`, is not a directory only this user may enter; `None` if it
/// is one.
fn not_private(dir: &Path, meta: &fs::Metadata) -> Option<String> {
    let uid = rustix::process::getuid().as_raw();
    let private = meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0;
    (!private).then(|| format!("{} is not a directory only this user may enter", dir.display()))
}

/// Removes the sockets in `dir` that nobody listens on: left by accels that ended without
/// removing theirs (`kill -9`). Whether a process of that number runs says nothing (numbers
/// are taken again); a refused connection says the listener is gone.
fn clear_stale(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let is_socket_name = name
            .to_str()
            .and_then(|name| name.strip_suffix(".sock"))
            .is_some_and(|pid| pid.parse::<u32>().is_ok());
        let is_socket = entry.file_type().is_ok_and(|kind| kind.is_socket());
        if is_socket_name && is_socket && nobody_listens(&entry.path()) {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Whether a connection to the socket at `path` is refused. Not blocking: a listener whose
/// queue is full (it is busy, so alive) would hold a blocking connect.
fn nobody_listens(path: &Path) -> bool {
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};
    let Ok(address) = SocketAddrUnix::new(path) else { return false };
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let Ok(socket) = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)
    else {
        return false;
    };
    rustix::net::connect(&socket, &address) == Err(rustix::io::Errno::CONNREFUSED)
}

/// Serves one client: its credentials, its line, the answer.
fn answer(stream: UnixStream, limits: &Limits, report: &impl Fn() -> String) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(PATIENCE))?;
    stream.set_write_timeout(Some(PATIENCE))?;
    let mut writer = stream.try_clone()?;
    let peer = sys::peer(&stream)?.uid;
    let own = rustix::process::getuid().as_raw();
    if peer != own && peer != 0 {
        return writeln!(writer, "error: only user {own} (or root) may talk to this accel");
    }
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    match parse(line.trim()) {
        // The limit it replaced, so that the client can say what it changed.
        Some(Request::Rate(rate)) => writeln!(writer, "ok\n{}", limits.output.swap(rate, Relaxed)),
        Some(Request::InputRate(rate)) => {
            writeln!(writer, "ok\n{}", limits.input.swap(rate, Relaxed))
        }
        Some(Request::Report) => write!(writer, "ok\n{}", report()),
        None => writeln!(writer, "error: not a request: {:?}", line.trim()),
    }
}

fn parse(line: &str) -> Option<Request> {
    let (verb, value) = line.split_once(' ').unwrap_or((line, ""));
    match verb {
        "rate" => value.parse().ok().map(Request::Rate),
        "input-rate" => value.parse().ok().map(Request::InputRate),
        "report" if value.is_empty() => Some(Request::Report),
        _ => None,
    }
}

/// Why a client's request did not get through; shown as `accel: -R PID: <why>`.
#[derive(Debug, thiserror::Error)]
#[error("-R {pid}: {why}")]
pub struct ClientError {
    pid: u32,
    why: String,
}

/// Sends `requests` to the accel running as `pid`, in order; what to print: for each limit
/// changed, a line saying from what to what (`rate limit of 4242: 10 MiB/s → none`), for a
/// report, the report, its control characters shown as `?`.
///
/// Refused, before a byte is sent, where what it finds is not this user's: the directory
/// (another user may have made `/tmp/accel-UID` first), the socket, or the listener, which
/// must also be process `pid`.
pub fn ask(pid: u32, requests: &[Request]) -> Result<String, ClientError> {
    let fail = |why: String| ClientError { pid, why };
    let distrust = |why: String| fail(format!("{why}; not talking to it"));
    let dir = directory().ok_or_else(|| fail("no control directory".into()))?;
    let path = dir.join(format!("{pid}.sock"));
    let absent = || {
        fail(format!(
            "no accel of this user runs as process {pid} (no socket at {})",
            path.display()
        ))
    };
    let own = rustix::process::getuid().as_raw();
    let metadata = |at: &Path| match fs::symlink_metadata(at) {
        Ok(meta) => Ok(meta),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Err(absent()),
        Err(error) => Err(fail(format!("{}: {}", at.display(), describe(&error)))),
    };
    if let Some(why) = not_private(&dir, &metadata(&dir)?) {
        return Err(distrust(why));
    }
    let socket = metadata(&path)?;
    if !socket.file_type().is_socket() || socket.uid() != own {
        return Err(distrust(format!("{} is not a socket of this user", path.display())));
    }
    let mut text = String::new();
    for request in requests {
        let mut stream = UnixStream::connect(&path).map_err(|error| match error.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => absent(),
            _ => fail(format!("{}: {}", path.display(), describe(&error))),
        })?;
        let peer = sys::peer(&stream).map_err(|e| fail(describe(&e)))?;
        if peer.uid != own {
            return Err(distrust(format!("the socket's listener is user {}, not {own}", peer.uid)));
        }
        if let Some(listener) = peer.pid.filter(|&listener| listener != pid) {
            return Err(distrust(format!(
                "the socket's listener is process {listener}, not {pid}"
            )));
        }
        stream.set_read_timeout(Some(PATIENCE)).map_err(|e| fail(describe(&e)))?;
        stream.set_write_timeout(Some(PATIENCE)).map_err(|e| fail(describe(&e)))?;
        let line = match request {
            Request::Rate(rate) => format!("rate {rate}\n"),
            Request::InputRate(rate) => format!("input-rate {rate}\n"),
            Request::Report => "report\n".into(),
        };
        stream.write_all(line.as_bytes()).map_err(|e| fail(describe(&e)))?;
        let mut answer = Vec::new();
        stream.take(MOST_ANSWER).read_to_end(&mut answer).map_err(|e| fail(describe(&e)))?;
        let answer = String::from_utf8_lossy(&answer);
        let Some(rest) = answer.strip_prefix("ok\n") else {
            return Err(fail(printable(answer.trim().trim_start_matches("error: "))));
        };
        let changed = |what: &str, rate: u64| {
            let was = rest.trim().parse().map_or_else(|_| "?".to_owned(), show_rate);
            format!("{what} of {pid}: {was} \u{2192} {}\n", show_rate(rate))
        };
        text += &match request {
            Request::Rate(rate) => changed("rate limit", *rate),
            Request::InputRate(rate) => changed("input rate limit", *rate),
            Request::Report => rest.lines().map(|line| printable(line) + "\n").collect(),
        };
    }
    Ok(text)
}

/// A rate as the report and the client show it: `10 MiB/s`, or `none`.
pub fn show_rate(rate: u64) -> String {
    if rate == 0 { "none".into() } else { format!("{}/s", Bytes(rate)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_as_sent() {
        assert_eq!(parse("rate 1048576"), Some(Request::Rate(1 << 20)));
        assert_eq!(parse("input-rate 0"), Some(Request::InputRate(0)));
        assert_eq!(parse("report"), Some(Request::Report));
        for bad in ["", "rate", "rate ten", "report now", "quit"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
