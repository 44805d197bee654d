//! Talking to a running accel from another shell (`accel -R PID -r 5M`, `accel -R PID`), as
//! `pv -R PID -L RATE` does, but so that only its own user (or root) can.
//!
//! Every accel listens on a Unix socket, `accel/PID.sock` under `$XDG_RUNTIME_DIR` (or
//! `/tmp/accel-UID/` where that is unset), in a directory only its user may enter (0700,
//! checked: a directory someone else made, or made open, is not used) and with the socket
//! itself 0600; and it answers only a peer whose credentials say the same user or root.
//! Several accels run side by side, each at its own PID.
//!
//! The protocol is one line each way: `rate N`, `input-rate N` (bytes per second, 0 for no
//! limit) or `report`; the answer is `ok` and the report so far, or `error: why`. The watcher
//! thread looks for requests at each tick, so a change takes effect within half a second.

use std::fs;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::endpoint::describe;
use crate::engine::pace::Limits;
use crate::size::Bytes;
use crate::sys;

/// How long a client may take to send its line, or to read the answer.
const PATIENCE: Duration = Duration::from_secs(2);

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

/// The socket of the accel running as `pid`, for this user.
pub fn socket_path(pid: u32) -> Option<PathBuf> {
    Some(directory()?.join(format!("{pid}.sock")))
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

/// The listening end of a running accel's control socket; removed when dropped.
#[derive(Debug)]
pub struct Control {
    listener: UnixListener,
    path: PathBuf,
}

impl Control {
    /// Listens at this process's socket. Fails, saying why, where the directory is not safe.
    pub fn listen() -> io::Result<Control> {
        let dir = private_directory()?;
        let path = dir.join(format!("{}.sock", std::process::id()));
        // A socket left by an earlier process of this number (killed, say) is stale.
        let _ = fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600))?;
        // accel's own socket: not blocking, so that the watcher only looks.
        listener.set_nonblocking(true)?;
        Ok(Control { listener, path })
    }

    /// Answers the requests waiting now; `report` gives the report so far.
    pub fn serve(&self, limits: &Limits, report: impl Fn() -> String) {
        while let Ok((stream, _)) = self.listener.accept() {
            let _ = answer(stream, limits, &report);
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// Makes `dir` (0700) if missing, and checks that only this user may enter it.
fn safe_directory(dir: &Path) -> io::Result<()> {
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(error),
    }
    let meta = fs::symlink_metadata(dir)?;
    let uid = rustix::process::getuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is not a directory only this user may enter",
            dir.display()
        )));
    }
    Ok(())
}

/// Serves one client: its credentials, its line, the answer.
fn answer(stream: UnixStream, limits: &Limits, report: &impl Fn() -> String) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(PATIENCE))?;
    stream.set_write_timeout(Some(PATIENCE))?;
    let mut writer = stream.try_clone()?;
    let peer = sys::peer_uid(&stream)?;
    let own = rustix::process::getuid().as_raw();
    if peer != own && peer != 0 {
        return writeln!(writer, "error: only user {own} (or root) may talk to this accel");
    }
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line)?;
    match parse(line.trim()) {
        Some(Request::Rate(rate)) => {
            limits.output.store(rate, Relaxed);
            writeln!(writer, "ok")
        }
        Some(Request::InputRate(rate)) => {
            limits.input.store(rate, Relaxed);
            writeln!(writer, "ok")
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

/// Sends `requests` to the accel running as `pid`, in order; the text of the last answer
/// after `ok` (the report, for a report).
pub fn ask(pid: u32, requests: &[Request]) -> Result<String, ClientError> {
    let fail = |why: String| ClientError { pid, why };
    let path = socket_path(pid).ok_or_else(|| fail("no control directory".into()))?;
    let mut text = String::new();
    for request in requests {
        let mut stream = UnixStream::connect(&path).map_err(|error| {
            fail(match error.kind() {
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => format!(
                    "no accel of this user runs as process {pid} (no socket at {})",
                    path.display()
                ),
                _ => format!("{}: {}", path.display(), describe(&error)),
            })
        })?;
        stream.set_read_timeout(Some(PATIENCE)).map_err(|e| fail(describe(&e)))?;
        let line = match request {
            Request::Rate(rate) => format!("rate {rate}\n"),
            Request::InputRate(rate) => format!("input-rate {rate}\n"),
            Request::Report => "report\n".into(),
        };
        stream.write_all(line.as_bytes()).map_err(|e| fail(describe(&e)))?;
        let mut answer = String::new();
        io::Read::read_to_string(&mut stream, &mut answer).map_err(|e| fail(describe(&e)))?;
        match answer.strip_prefix("ok\n") {
            Some(rest) => text = rest.to_owned(),
            None => return Err(fail(answer.trim().trim_start_matches("error: ").to_owned())),
        }
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
