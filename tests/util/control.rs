//! Helpers for the control socket (`-R PID`): an accel whose socket goes in a scratch runtime
//! directory, `accel -R` looking in a scratch `TMPDIR`, and a fake accel that answers once.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;

use super::{ACCEL, GENEROUS, Scratch, eventually, piped};

/// accel with piped stdio whose control socket goes under `runtime`
/// (`$XDG_RUNTIME_DIR/accel/PID.sock`); the socket's path, once it is there.
pub fn with_socket_in(runtime: &Scratch, mut command: Command) -> (Child, PathBuf) {
    let child = piped(command.env("XDG_RUNTIME_DIR", runtime.dir()));
    let socket = runtime.dir().join("accel").join(format!("{}.sock", child.id()));
    eventually(GENEROUS, "accel's control socket is there", || socket.exists());
    (child, socket)
}

/// A control directory of root's own in a scratch `TMPDIR` (`TMPDIR/accel-0`, 0700), as
/// `accel -R` run with `client_env` looks for it.
pub fn root_control_dir(scratch: &Scratch) -> PathBuf {
    let dir = scratch.dir().join("accel-0");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    dir
}

/// `accel -R PID ARGS` looking for sockets under `tmp` (`/tmp/accel-UID` moved there).
pub fn remote(tmp: &Path, pid: u32, args: &[&str]) -> std::process::Output {
    Command::new(ACCEL)
        .args(["-R", &pid.to_string()])
        .args(args)
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A fake accel at `path` that answers one client with `answer`, after reading its line.
pub fn fake_server(path: &Path, answer: &'static [u8]) -> UnixListener {
    let listener = UnixListener::bind(path).unwrap();
    let serving = listener.try_clone().unwrap();
    thread::spawn(move || {
        if let Ok((stream, _)) = serving.accept() {
            let mut line = String::new();
            let _ = BufReader::new(&stream).read_line(&mut line);
            let _ = (&stream).write_all(answer);
        }
    });
    listener
}
