//! The edges that are not faults: devices, sockets, empty input, descriptors, the command
//! line. (Faults, caused on purpose, are in `faults.rs`.)

use std::fs::File;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::thread;

use crate::util::*;

/// stdout /dev/null: everything is read and written there (the summary counts every byte
/// out, the output complete), status 0.
fn stdout_dev_null(engine: &str) {
    let dir = Scratch::new(&format!("dev-null-{engine}"));
    let json = dir.path("summary.json");
    let mut child = accel(engine, &[&format!("--json={}", json.display())])
        .stdin(Stdio::piped())
        .stdout(File::create("/dev/null").unwrap())
        .spawn()
        .unwrap();
    let size = 20u64 << 20;
    feed(child.stdin.take().unwrap(), &pattern(size as usize, 1), 1 << 20).unwrap();
    assert!(wait_within(&mut child, GENEROUS).success());
    let records = std::fs::read_to_string(&json).unwrap();
    let summary: serde_json::Value = serde_json::from_str(records.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary", "{records}");
    assert_eq!(summary["bytes_in"], size, "{summary}");
    assert_eq!(summary["outputs"][0]["bytes"], size, "{summary}");
    assert_eq!(summary["outputs"][0]["complete"], true, "{summary}");
}

/// Sockets on both sides work like pipes.
fn sockets_on_both_sides(engine: &str) {
    use std::os::unix::net::UnixStream;
    let (mut producer, accel_in) = UnixStream::pair().unwrap();
    let (accel_out, consumer) = UnixStream::pair().unwrap();
    let mut child = accel(engine, &[])
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(accel_in)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(accel_out)))
        .spawn()
        .unwrap();
    let data = pattern(5 << 20, 8);
    let sent = data.clone();
    let writer = thread::spawn(move || {
        producer.write_all(&sent).unwrap();
        producer.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let got = drain(consumer);
    writer.join().unwrap();
    assert!(wait_within(&mut child, GENEROUS).success());
    assert_same(&got, &data, engine);
}

/// Every descriptor accel opens is close-on-exec: its buffer's pool pipes, looked at while
/// they hold bytes. (Few descriptors allowed: `faults::accel_few_descriptors`.)
fn no_descriptor_leaks(engine: &str) {
    let mut child = spawn_piped(engine, &[]);
    let mut stdin = child.stdin.take().unwrap();
    // 4 MiB while nobody reads: at least 2 MiB (beyond the two 1 MiB pipes) are then in
    // accel's own buffer, pool pipes included.
    stdin.write_all(&pattern(4 << 20, 2)).unwrap();
    let pid = child.id();
    // What the test process itself passes on (cargo's jobserver, say) is not accel's doing.
    let inherited = inheritable_fds("self");
    for fd in inheritable_fds(&pid.to_string()) {
        assert!(fd <= 2 || inherited.contains(&fd), "fd {fd} is not close-on-exec");
    }
    drop(stdin);
    let out = drain(child.stdout.take().unwrap());
    assert_eq!(out.len(), 4 << 20);
    assert!(wait_within(&mut child, GENEROUS).success());
}

/// The descriptors of process `pid` that a child would inherit (no O_CLOEXEC).
fn inheritable_fds(pid: &str) -> Vec<u32> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap() {
        let fd: u32 = entry.unwrap().file_name().to_str().unwrap().parse().unwrap();
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).unwrap_or_default();
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:"));
        // O_CLOEXEC is 0o2000000 on Linux.
        if flags.is_some_and(|f| u32::from_str_radix(f.trim(), 8).unwrap() & 0o2000000 == 0) {
            fds.push(fd);
        }
    }
    fds
}

#[test]
fn bad_size_is_a_usage_error_naming_the_cause() {
    let out = Command::new(ACCEL).args(["-m", "3Q"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("accel: -m 3Q: not a size: expected "), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn help_says_what_accel_is_for() {
    let out = Command::new(ACCEL).arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in ["pipeline buffer", "Examples:", "| accel |", "--size", "--output", "Exit status"]
    {
        assert!(help.contains(needle), "--help lacks {needle:?}");
    }
    let out = Command::new(ACCEL).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("accel "));
    // The man page and completions come from the same definition.
    let man = Command::new(ACCEL).args(["--generate", "man"]).output().unwrap();
    assert!(man.status.success() && String::from_utf8_lossy(&man.stdout).contains(".TH accel 1"));
    let bash = Command::new(ACCEL).args(["--generate", "bash"]).output().unwrap();
    assert!(String::from_utf8_lossy(&bash.stdout).contains("--stall-timeout"));
    // Unknown options are usage errors, which do not look like data errors.
    assert_eq!(Command::new(ACCEL).arg("--bogus").output().unwrap().status.code(), Some(2));
}

fn nothing_in_nothing_out(engine: &str) {
    let out = accel(engine, &[]).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success());
    assert!(out.stdout.is_empty() && out.stderr.is_empty());
    assert_eq!(out.status.signal(), None);
}

/// accel runs under valgrind's memcheck, which people reach for when a pipeline misbehaves:
/// every byte through, no memory error reported. (Reading the auxiliary vector straight from
/// memory, as rustix does unless told to ask libc, crashed accel under valgrind, whose vDSO is
/// not where the kernel's vector says.)
fn runs_under_valgrind(engine: &str) {
    if !require("valgrind", has("valgrind", "--version")) {
        return;
    }
    let mut child = Command::new("valgrind")
        .args(["-q", "--error-exitcode=99", ACCEL, "--engine", engine])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let data = pattern(3 << 20, 7);
    let stdin = child.stdin.take().unwrap();
    let feeder = thread::spawn({
        let data = data.clone();
        move || feed(stdin, &data, 64 << 10)
    });
    let out = within(GENEROUS, move || child.wait_with_output()).expect("valgrind accel hung");
    let fed = feeder.join().unwrap();
    let out = out.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    fed.unwrap();
    assert!(out.stdout == data, "{} bytes out of {}: {stderr}", out.stdout.len(), data.len());
}

per_engine!(
    stdout_dev_null,
    sockets_on_both_sides,
    no_descriptor_leaks,
    nothing_in_nothing_out,
    runs_under_valgrind
);
