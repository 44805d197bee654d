//! Helpers for a real terminal: tmux sessions of their own, sampled screen by screen, what a
//! verdict line looks like, and a producer slow enough for the progress line to be drawn.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::{GENEROUS, has, require};

/// Runs tmux against the server `socket`; its stdout, and whether it succeeded.
fn tmux(socket: &str, args: &[&str]) -> (String, bool) {
    let out = Command::new("tmux").args(["-L", socket]).args(args).output().expect("run tmux");
    (String::from_utf8_lossy(&out.stdout).into_owned(), out.status.success())
}

/// The screens of an 80x20 terminal running `script`, sampled until `DONE` appears.
pub fn screens_of(session: &str, script: &str) -> Vec<String> {
    // A server of its own: a shared one exits when its last session is killed, and a session
    // started meanwhile would be lost with it.
    let socket = format!("accel-tests-{}-{session}", std::process::id());
    let size = ["-x", "80", "-y", "20"];
    let command = ["bash", "--norc", "-c", script];
    let (_, started) =
        tmux(&socket, &[&["new-session", "-d", "-s", session], &size[..], &command].concat());
    assert!(started, "tmux could not start a session");
    let mut screens = Vec::new();
    let deadline = Instant::now() + GENEROUS;
    loop {
        let (screen, _) = tmux(&socket, &["capture-pane", "-p", "-t", session]);
        let finished = screen.contains("DONE");
        screens.push(screen);
        if finished || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(100));
    }
    tmux(&socket, &["kill-server"]);
    screens
}

pub fn is_verdict(line: &str) -> bool {
    line.starts_with("bottleneck: ") || line.starts_with("no bottleneck: ")
}

pub fn has_tmux() -> bool {
    require("tmux (.ci/run installs it)", has("tmux", "-V"))
}

/// A producer that takes a few seconds: 24 bursts of 300000 bytes, 0.1 s apart.
pub const PRODUCER: &str = "for i in $(seq 24); do head -c 300000 /dev/urandom; sleep 0.1; done";
