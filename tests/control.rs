//! The control socket (`-R PID`): it goes when accel ends, however it ends; stale ones of
//! ended accels are cleared; and the client prints what a peer says only as plain text.
//! (Faults of the socket itself, clients that hold it and sockets not to be trusted, are rows
//! of the fault matrix, `faults.rs`.)

use std::io::Write;
use std::os::unix::net::UnixListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;

use rustix::process::{Pid, Signal, kill_process};

use crate::util::control::{fake_server, remote, root_control_dir, with_socket_in};
use crate::util::*;

/// Whatever way accel ends, its control socket is gone after: input ended (0), an output
/// failed (3, a reader gone while SIGPIPE is ignored), a stall (4), SIGTERM.
#[test]
fn the_socket_goes_when_accel_ends() {
    let runtime = Scratch::new("control-ends");
    let ends: [(&str, &[&str]); 4] = [
        ("input ended", &[]),
        ("an output failed", &[]),
        ("a stall", &["--stall-timeout", "1s"]),
        ("SIGTERM", &[]),
    ];
    for (end, args) in ends {
        let mut command = accel("auto", args);
        if end == "an output failed" {
            // SAFETY: signal() with SIG_IGN is async-signal-safe.
            unsafe {
                command.pre_exec(|| {
                    libc::signal(libc::SIGPIPE, libc::SIG_IGN);
                    Ok(())
                });
            }
        }
        let (mut child, socket) = with_socket_in(&runtime, command);
        let said = Said::collect(&mut child);
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        match end {
            "input ended" => {
                stdin.write_all(b"data").unwrap();
                drop(stdin);
                assert_eq!(drain(stdout), b"data");
            }
            "an output failed" => {
                drop(stdout);
                let _ = stdin.write_all(&pattern(1 << 20, 1));
            }
            "a stall" => {}
            _ => kill_process(Pid::from_child(&child), Signal::TERM).unwrap(),
        }
        let status = wait_within(&mut child, GENEROUS);
        let want = match end {
            "input ended" => Some(0),
            "an output failed" => Some(3),
            "a stall" => Some(4),
            _ => None,
        };
        assert_eq!(status.code(), want, "{end}: {status}: {}", said.all());
        if want.is_none() {
            assert_eq!(status.signal(), Some(libc::SIGTERM), "{end}");
        }
        assert!(!socket.exists(), "{end}: {} is left behind", socket.display());
    }
}

/// Sockets of accels that have ended (nobody listens on them) are cleared when another accel
/// starts; a socket someone listens on stays, whatever its number (a process number may have
/// been taken again), and so does anything else in the directory.
#[test]
fn stale_sockets_are_cleared() {
    let runtime = Scratch::new("control-stale");
    let dir = runtime.dir().join("accel");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let stale: Vec<PathBuf> =
        (1..=3).map(|n| dir.join(format!("{}.sock", 4_000_000 + n))).collect();
    for path in &stale {
        drop(UnixListener::bind(path).unwrap());
        assert!(path.exists());
    }
    let live_path = dir.join("4000010.sock");
    let _live = UnixListener::bind(&live_path).unwrap();
    let other = dir.join("notes");
    std::fs::write(&other, "kept").unwrap();
    let (mut child, _socket) = with_socket_in(&runtime, accel("auto", &[]));
    drop(child.stdin.take());
    assert!(wait_within(&mut child, GENEROUS).success());
    for path in &stale {
        assert!(!path.exists(), "{} is left behind", path.display());
    }
    assert!(live_path.exists(), "a socket someone listens on was removed");
    assert!(other.exists(), "a file that is not a socket was removed");
}

/// What a peer answers is printed as plain text: escape sequences and other control
/// characters in it are shown as `?`, never sent raw to the terminal.
#[test]
fn the_answer_is_printed_without_escapes() {
    if !require("root, for a control directory at a known place", is_root()) {
        return;
    }
    let tmp = Scratch::new("control-escapes");
    let dir = root_control_dir(&tmp);
    // The test itself is the accel at this number: its process, its user.
    let pid = std::process::id();
    let _server = fake_server(
        &dir.join(format!("{pid}.sock")),
        b"ok\n\x1b]0;owned\x07report \x1b[2Jso far\nin 10 B\n",
    );
    let out = remote(tmp.dir(), pid, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains('\x1b') && !stderr.contains('\x07'), "{stderr:?}");
    assert_eq!(stderr, "?]0;owned?report ?[2Jso far\nin 10 B\n");
}
