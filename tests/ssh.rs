//! One command between hosts (issue 34): `--to ssh://HOST -- CMD` and `--from ssh://HOST --
//! CMD` start the other end through an sshd of the tests' own (util/ssh.rs), with the tests'
//! accel as the remote one. Byte-exact through each engine, the remote command's status and
//! words, failures to start said in one line with status 6, the key on no command line.

use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};

use crate::util::net::{Netns, Veth, command};
use crate::util::ssh::{GONE_WITHIN, HOST, Sshd, alive};
use crate::util::*;

per_engine!(
    push_is_byte_exact,
    pull_is_byte_exact,
    push_through_ssh_is_byte_exact,
    pull_through_ssh_is_byte_exact
);

/// accel with `args` (strings) after the engine.
fn accel_with(engine: &str, args: &[String]) -> std::process::Command {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    accel(engine, &args)
}

/// The stream goes to the remote command whole: the file it writes is the input, byte for
/// byte, and the local run ends 0 only then.
fn push_is_byte_exact(engine: &str) {
    let Some(sshd) = Sshd::start() else { return };
    let said = push(&sshd, engine, &[], None);
    assert!(!said.contains("through ssh"), "{said}");
}

/// As [`push_is_byte_exact`], with the stream through the ssh session (`--via ssh`): said
/// by nobody, since it was asked for.
fn push_through_ssh_is_byte_exact(engine: &str) {
    let Some(sshd) = Sshd::start() else { return };
    let said = push(&sshd, engine, &["--via", "ssh"], None);
    assert!(!said.contains("accel:"), "{said}");
}

/// With -v, after the report, a line says what the remote command took: its time, how it
/// ended, the path.
#[test]
fn the_report_says_what_the_remote_command_took() {
    let Some(sshd) = Sshd::start() else { return };
    let said = push(&sshd, "auto", &["-v", "--via", "ssh"], None);
    let line = said.lines().find(|line| line.starts_with("accel: remote: cat > ")).unwrap_or("");
    assert!(
        line.contains(" on accel-test: ")
            && line.ends_with(" s, exited with status 0, through ssh"),
        "{said}"
    );
}

/// With --debug, both ends note their start-up steps with the time of day, so that where the
/// time to the first byte goes can be read side by side: the remote's notes come back marked
/// with the host (the request asks for them; nothing was given in --remote-args).
#[test]
fn debug_notes_of_both_ends_are_time_stamped() {
    let Some(sshd) = Sshd::start() else { return };
    let said = push(&sshd, "auto", &["--debug"], None);
    let stamped = |line: &str, prefix: &str| {
        let Some(rest) = line.strip_prefix(prefix) else { return false };
        let bytes = rest.as_bytes();
        bytes.len() > 15
            && bytes[0] == b'['
            && bytes[13] == b']'
            && [3, 6].iter().all(|&at| bytes[at] == b':')
            && bytes[9] == b'.'
    };
    let here = format!("{HOST}: the remote answered");
    let there = "--serve-ssh: the request is read";
    assert!(said.lines().any(|l| stamped(l, "accel: ") && l.contains(&here)), "{said}");
    let remote = format!("{HOST}: accel: ");
    assert!(said.lines().any(|l| stamped(l, &remote) && l.contains(there)), "{said}");
}

/// A push of 3 MiB through `sshd` with `extra` options, from `netns` when given: byte-exact
/// at the remote command, status 0. What the local accel said.
fn push(sshd: &Sshd, engine: &str, extra: &[&str], netns: Option<&Netns>) -> String {
    let received = sshd.dir.path("received");
    let data = pattern(3 << 20, 34);
    let mut args = sshd.args();
    args.extend(extra.iter().map(|word| word.to_string()));
    args.extend(["--to".into(), sshd.url(), "--".into(), "cat".into(), ">".into()]);
    args.push(received.display().to_string());
    let (status, _, said) = run_fed(piped(&mut from_host(netns, engine, &args)), &data);
    assert!(status.success(), "{status}: {said}");
    assert_same(&std::fs::read(&received).unwrap(), &data, "the remote command's file");
    said
}

/// A pull of 3 MiB through `sshd` with `extra` options, into `netns` when given: byte-exact
/// here, status 0. What the local accel said.
fn pull(sshd: &Sshd, engine: &str, extra: &[&str], netns: Option<&Netns>) -> String {
    let source = sshd.dir.path("source");
    let data = pattern(3 << 20, 35);
    std::fs::write(&source, &data).unwrap();
    let mut args = sshd.args();
    args.extend(extra.iter().map(|word| word.to_string()));
    args.extend(["--from".into(), sshd.url(), "--".into(), "cat".into()]);
    args.push(source.display().to_string());
    let (status, out, said) = run_fed(piped(&mut from_host(netns, engine, &args)), b"");
    assert!(status.success(), "{status}: {said}");
    assert_same(&out, &data, "what came out here");
    said
}

/// accel with `args`, in `netns` when given.
fn from_host(netns: Option<&Netns>, engine: &str, args: &[String]) -> std::process::Command {
    match netns {
        None => accel_with(engine, args),
        Some(netns) => {
            let mut all = vec!["--engine", engine];
            all.extend(args.iter().map(String::as_str));
            command(Some(netns), ACCEL, &all)
        }
    }
}

/// The stream comes from the remote command whole: what comes out here is what it wrote,
/// byte for byte (the file it read), and the run ends 0.
fn pull_is_byte_exact(engine: &str) {
    let Some(sshd) = Sshd::start() else { return };
    let said = pull(&sshd, engine, &[], None);
    assert!(!said.contains("through ssh"), "{said}");
}

/// As [`pull_is_byte_exact`], through the ssh session (`--via ssh`).
fn pull_through_ssh_is_byte_exact(engine: &str) {
    let Some(sshd) = Sshd::start() else { return };
    let said = pull(&sshd, engine, &["--via", "ssh"], None);
    assert!(!said.contains("through ssh"), "{said}");
}

/// The direct path blocked (nftables in the receiver's namespace drops every new connection
/// but ssh's): the stream goes through ssh, byte-exact, said once in one line with the
/// reason; with `--streams 4`, over one stream, said; with `--via direct`, status 6 and
/// nothing sent.
#[test]
fn a_blocked_direct_path_falls_back_through_ssh_said_once() {
    let Some((veth, sshd)) = direct_path_blocked("sshfb", 134) else { return };
    let said = push(&sshd, "auto", &[], Some(&veth.a.netns));
    let lines: Vec<&str> = said.lines().filter(|line| line.contains("through ssh")).collect();
    assert_eq!(lines.len(), 1, "{said}");
    assert!(lines[0].contains("no answer in 3 s; sending through ssh instead (slower)"), "{said}");
    // With --streams 4: one stream through the session, said in one line more.
    let said = push(&sshd, "auto", &["--streams", "4"], Some(&veth.a.netns));
    assert!(said.contains("accel: --streams 4: through ssh, one stream\n"), "{said}");
    let mut args = sshd.args();
    args.extend(
        ["--via", "direct", "--to", &sshd.url(), "--", "cat > /dev/null"].map(String::from),
    );
    let (status, _, said) =
        run_fed(piped(&mut from_host(Some(&veth.a.netns), "auto", &args)), b"x");
    assert_eq!(status.code(), Some(6), "{said}");
    assert!(said.contains("no answer in 3 s (--via direct); nothing was sent"), "{said}");
}

/// The local accel killed (SIGKILL) after the remote's answer, before its direct connection
/// came (nftables in the receiver's namespace drops it, `--via direct`): the session's end
/// is the only word the remote gets, and it stops there, its command too, long before its
/// wait for a sender (60 s) would have ended.
#[test]
fn a_local_killed_before_connecting_leaves_no_remote_process() {
    let Some((veth, sshd)) = direct_path_blocked("sshkl", 137) else { return };
    let pidfile = sshd.dir.path("pid");
    let mut args = sshd.args();
    args.extend(["--via", "direct", "--to", &sshd.url(), "--"].map(String::from));
    args.push(format!("echo $$ > {}; exec cat > /dev/null", pidfile.display()));
    let mut child = piped(&mut from_host(Some(&veth.a.netns), "auto", &args));
    let stdin = child.stdin.take().unwrap();
    let said = Said::collect(&mut child);
    // The remote starts its command once it has answered.
    eventually(GENEROUS, "the remote command started", || {
        std::fs::read_to_string(&pidfile).is_ok_and(|text| text.ends_with('\n'))
    });
    let command: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    let remote_accel = parent_of(command);
    child.kill().unwrap();
    let status = said.exit_of(&mut child);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
    eventually(GONE_WITHIN, "the remote command gone", || !alive(command));
    eventually(GONE_WITHIN, "the remote accel gone", || !alive(remote_accel));
    drop(stdin);
}

/// Two hosts (veth `name`, `index`), an sshd on the second, whose namespace drops every new
/// connection but ssh's (nftables): the direct path blocked. None where that cannot be made.
fn direct_path_blocked(name: &str, index: u8) -> Option<(Veth, Sshd)> {
    let veth = Veth::new(name, index)?;
    if !require("nft (nftables)", has("nft", "--version")) {
        return None;
    }
    let sshd = Sshd::start_on(&veth.b)?;
    let port = sshd.port;
    nft(
        &veth.b.netns,
        &format!("iif != \"lo\" tcp dport != {port} tcp flags & (syn | ack) == syn drop"),
    );
    Some((veth, sshd))
}

/// Pull with the direct path refused (nftables in the local namespace resets every new
/// connection to it): through ssh, byte-exact, said once with the reason; with `--streams
/// 4`, over one stream, said.
#[test]
fn a_refused_direct_path_falls_back_through_ssh_for_a_pull() {
    let Some(veth) = Veth::new("sshfr", 135) else { return };
    if !require("nft (nftables)", has("nft", "--version")) {
        return;
    }
    let Some(sshd) = Sshd::start_on(&veth.b) else { return };
    nft(&veth.a.netns, "iif != \"lo\" tcp flags & (syn | ack) == syn reject with tcp reset");
    let said = pull(&sshd, "auto", &[], Some(&veth.a.netns));
    let lines: Vec<&str> = said.lines().filter(|line| line.contains("through ssh")).collect();
    assert_eq!(lines.len(), 1, "{said}");
    assert!(lines[0].contains("refused; sending through ssh instead (slower)"), "{said}");
    // With --streams 4, which goes to the remote sender: one stream through the session,
    // said in one line more.
    let said = pull(&sshd, "auto", &["--streams", "4"], Some(&veth.a.netns));
    assert!(said.contains("refused; sending through ssh instead (slower)"), "{said}");
    assert!(said.contains("accel: --streams 4: through ssh, one stream\n"), "{said}");
}

/// The veth link between the two hosts down for 10 s mid-stream (`--heartbeat 250ms`, which
/// the remote accel takes from the request): the direct link drops and is resumed at the
/// exact byte, and the stream ends byte-exact at the remote command, status 0.
#[test]
fn the_link_down_for_ten_seconds_is_resumed() {
    let Some(veth) = Veth::new("sshdown", 136) else { return };
    let Some(sshd) = Sshd::start_on(&veth.b) else { return };
    let received = sshd.dir.path("received");
    let mut args = sshd.args();
    args.extend(["--heartbeat", "250ms"].map(String::from));
    args.extend(["--via", "direct", "--to", &sshd.url(), "--"].map(String::from));
    args.push(format!("cat > {}", received.display()));
    let mut child = piped(&mut from_host(Some(&veth.a.netns), "auto", &args));
    let mut stdin = child.stdin.take().unwrap();
    let said = Said::collect(&mut child);
    let data = pattern(8 << 20, 36);
    stdin.write_all(&data[..4 << 20]).unwrap();
    eventually(GENEROUS, "the first half arrived", || {
        std::fs::metadata(&received).is_ok_and(|m| m.len() == 4 << 20)
    });
    veth.a.netns.ip(&["link", "set", veth.a.dev, "down"]);
    stdin.write_all(&data[4 << 20..]).unwrap();
    drop(stdin);
    // The outage itself: what the test is about, not a wait for something.
    std::thread::sleep(std::time::Duration::from_secs(10));
    veth.a.netns.ip(&["link", "set", veth.a.dev, "up"]);
    let status = said.exit_of(&mut child);
    let said = said.all();
    assert!(status.success(), "{status}: {said}");
    assert_same(&std::fs::read(&received).unwrap(), &data, "the remote command's file");
    assert!(said.contains("connection dropped"), "{said}");
    assert!(said.contains("connected again"), "{said}");
}

/// Adds an input rule `rule` to `netns` (a table of the test's own, gone with the namespace).
fn nft(netns: &Netns, rule: &str) {
    let script = format!(
        "add table inet accel\nadd chain inet accel input {{ type filter hook input priority 0; }}\n\
         add rule inet accel input {rule}\n"
    );
    let mut nft = command(Some(netns), "nft", &["-f", "-"]).stdin(Stdio::piped()).spawn().unwrap();
    nft.stdin.take().unwrap().write_all(script.as_bytes()).unwrap();
    assert!(nft.wait().unwrap().success(), "nft {rule}");
}

/// A remote command that produces, then fails on its own: the run fails with its status, even
/// though every byte it wrote came.
#[test]
fn a_failing_remote_producer_fails_the_run_with_its_status() {
    let Some(sshd) = Sshd::start() else { return };
    let mut args = sshd.args();
    args.extend(["--from".into(), sshd.url(), "--".into()]);
    args.push("echo some; echo 'cannot send the snapshot' >&2; exit 5".into());
    let (status, out, said) = run_fed(piped(&mut accel_with("auto", &args)), b"");
    assert_eq!(status.code(), Some(5), "{said}");
    assert_eq!(out, b"some\n");
    assert!(said.contains(&format!("{HOST}: cannot send the snapshot")), "{said}");
    assert!(said.contains("exited with status 5"), "{said}");
}

/// A remote producer that fails mid-way after the ssh session is gone (so that nothing can
/// say how it ended but the stream itself): the stream does not end as a whole one would.
/// The run fails, saying how the command ended, and what came before is out.
#[test]
fn a_remote_producer_failing_after_the_session_is_gone_fails_the_run() {
    let Some(sshd) = Sshd::start() else { return };
    let (pidfile, go) = (sshd.dir.path("pid"), sshd.dir.path("go"));
    let mut args = sshd.args();
    args.extend(["--from".into(), sshd.url(), "--".into()]);
    args.push(format!(
        "printf some; echo $$ > {pid}; while [ ! -e {go} ]; do sleep 0.05; done; exit 1",
        pid = pidfile.display(),
        go = go.display()
    ));
    let mut child = piped(&mut accel_with("auto", &args));
    drop(child.stdin.take());
    let mut stdout = child.stdout.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut out).map(|_| out)
    });
    let said = Said::collect(&mut child);
    eventually(GENEROUS, "the remote command started", || {
        std::fs::read_to_string(&pidfile).is_ok_and(|text| text.ends_with('\n'))
    });
    assert!(sshd.kill_sessions() > 0, "no ssh session to kill");
    eventually(GONE_WITHIN, "the ssh session gone", || sshd.kill_sessions() == 0);
    std::fs::write(&go, b"").unwrap();
    let status = said.exit_of(&mut child);
    let said = said.all();
    assert!(!status.success(), "a cut stream passed off as whole: {said}");
    assert!(said.contains("exited with status 1"), "{said}");
    assert_eq!(out.join().unwrap().unwrap(), b"some");
}

/// A remote command that fails on its own fails the run with its status, and its words are
/// shown here, marked with the host.
#[test]
fn a_failing_remote_command_fails_the_run_with_its_status_and_words() {
    let Some(sshd) = Sshd::start() else { return };
    let mut args = sshd.args();
    args.extend(["--to".into(), sshd.url(), "--".into()]);
    args.push("cat > /dev/null; echo 'no space left, says the command' >&2; exit 3".into());
    let (status, _, said) = run_fed(piped(&mut accel_with("auto", &args)), &pattern(1 << 20, 1));
    assert_eq!(status.code(), Some(3), "{said}");
    assert!(said.contains(&format!("{HOST}: no space left, says the command")), "{said}");
    assert!(said.contains("exited with status 3"), "{said}");
}

/// No accel on the remote PATH: one line naming the host, status 6, nothing sent (the
/// input is not read).
#[test]
fn no_remote_accel_is_one_line_and_status_6() {
    let Some(sshd) = Sshd::start() else { return };
    let args = pushing_through(&sshd, "accel-not-installed-here");
    let (status, _, said) = run_fed(piped(&mut accel_with("auto", &args)), b"");
    assert_eq!(status.code(), Some(6), "{said}");
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 1, "{said}");
    assert!(lines[0].starts_with(&format!("accel: {HOST}: no accel on the remote PATH")), "{said}");
}

/// An accel there that does not know this protocol (an older one, which refuses
/// `--serve-ssh` as an unknown option): one line naming the host, status 6.
#[test]
fn an_accel_without_the_protocol_is_one_line_and_status_6() {
    let Some(sshd) = Sshd::start() else { return };
    refused_by(&sshd, "#!/bin/sh\necho \"accel: $1: unknown option\" >&2\nexit 2\n");
}

/// What this accel says when the remote accel is `script`, which refuses: one line, status
/// 6, that it does not speak this protocol.
fn refused_by(sshd: &Sshd, script: &str) -> String {
    let old = sshd.dir.path("old-accel");
    std::fs::write(&old, script).unwrap();
    std::fs::set_permissions(&old, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let args = pushing_through(sshd, &old.display().to_string());
    let (status, _, said) = run_fed(piped(&mut accel_with("auto", &args)), b"");
    assert_eq!(status.code(), Some(6), "{said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.contains("does not speak this protocol"), "{said}");
    said
}

/// A remote accel of the protocol's version 1 (frames sealed inside ssh too) refuses this
/// version's request with its own line: one line here naming the host and what it said,
/// status 6, nothing sent.
#[test]
fn an_accel_of_the_first_version_is_one_line_and_status_6() {
    let Some(sshd) = Sshd::start() else { return };
    let script = "#!/bin/sh\nread greeting\n\
                  echo \"accel-ssh 1 refused this accel (0.1.0) speaks accel-ssh 1, not \\\"$greeting\\\"\"\n\
                  exit 6\n";
    let said = refused_by(&sshd, script);
    assert!(said.contains("speaks accel-ssh 1, not \\\"accel-ssh 3\\\""), "{said}");
}

/// With `--via ssh`, the stream's first handshake message follows the request in the
/// session before any answer: a remote that answers nothing and reads on finds it there (the
/// preamble's `accel`). Had it waited for the answer, the remote would wait in vain.
#[test]
fn through_ssh_the_handshake_follows_the_request_before_any_answer() {
    let Some(sshd) = Sshd::start() else { return };
    let silent = sshd.dir.path("silent-accel");
    let script = "#!/bin/sh\nread greeting\nread key\nread request\n\
                  first=$(timeout 60 head -c 5)\n\
                  echo \"before any answer: [$first]\"\nexit 6\n";
    std::fs::write(&silent, script).unwrap();
    std::fs::set_permissions(&silent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut args = vec!["--via".to_owned(), "ssh".to_owned()];
    args.extend(pushing_through(&sshd, &silent.display().to_string()));
    let (status, _, said) = run_fed(piped(&mut accel_with("auto", &args)), b"");
    assert_eq!(status.code(), Some(6), "{said}");
    assert!(said.contains("before any answer: [accel]"), "{said}");
}

/// Ctrl-C here stops the remote command and the remote accel: neither is left (checked by
/// pid), and the command never saw the end of its input as if the stream were whole.
#[test]
fn interrupting_leaves_no_remote_process() {
    let Some(sshd) = Sshd::start() else { return };
    let (mut child, stdin, _said, command) = pushing_while_running(&sshd, "/dev/null");
    let remote_accel = parent_of(command);
    assert!(alive(command) && alive(remote_accel));
    // SAFETY: signals the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_within(&mut child, GENEROUS);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGINT));
    eventually(GONE_WITHIN, "the remote command gone", || !alive(command));
    eventually(GONE_WITHIN, "the remote accel gone", || !alive(remote_accel));
    drop(stdin);
}

/// The one-time key is on no command line and in no environment of either end while the
/// stream goes, and in no file of the remote's.
#[test]
fn the_key_is_on_no_command_line_nor_in_any_environment() {
    let Some(sshd) = Sshd::start() else { return };
    let (mut child, stdin, said, _) = pushing_while_running(&sshd, "/dev/null");
    let mut looked = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.parse::<u32>().is_err() {
            continue;
        }
        for what in ["cmdline", "environ"] {
            let Ok(bytes) = std::fs::read(entry.path().join(what)) else { continue };
            looked += 1;
            let text = String::from_utf8_lossy(&bytes);
            assert!(!text.contains("accel-key-v1:"), "/proc/{name}/{what}: {text}");
            assert!(!has_hex_run(&text, 64), "/proc/{name}/{what}: {text}");
        }
    }
    assert!(looked > 4, "no process looked at");
    for entry in std::fs::read_dir(sshd.dir.dir()).unwrap().flatten() {
        let text =
            String::from_utf8_lossy(&std::fs::read(entry.path()).unwrap_or_default()).into_owned();
        assert!(!text.contains("accel-key-v1:"), "{}", entry.path().display());
    }
    drop(stdin);
    let status = said.exit_of(&mut child);
    assert!(status.success(), "{status}: {}", said.all());
}

/// A push under way, its input still open, its remote command started: the local accel, its
/// stdin, what it says, and the pid of the remote command (which writes it first).
fn pushing_while_running(sshd: &Sshd, into: &str) -> (Child, ChildStdin, Said, u32) {
    let pidfile = sshd.dir.path("pid");
    let mut args = sshd.args();
    args.extend(["--to".into(), sshd.url(), "--".into()]);
    args.push(format!("echo $$ > {}; exec cat > {into}", pidfile.display()));
    let mut child = piped(&mut accel_with("auto", &args));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&FIRST_PART).unwrap();
    let said = Said::collect(&mut child);
    eventually(GENEROUS, "the remote command started", || {
        std::fs::read_to_string(&pidfile).is_ok_and(|text| text.ends_with('\n'))
    });
    let command = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    (child, stdin, said, command)
}

/// What [`pushing_while_running`] writes first.
static FIRST_PART: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| pattern(1 << 20, 2));

/// The ssh session killed mid-stream (its sshd processes, SIGKILL): the stream goes on
/// directly, and ends byte-exact at the remote command; status 0, with a word that the
/// command's own end could not be heard.
#[test]
fn killing_the_ssh_session_leaves_the_direct_stream_going() {
    let Some(sshd) = Sshd::start() else { return };
    let received = sshd.dir.path("received");
    let (mut child, mut stdin, said, command) =
        pushing_while_running(&sshd, &received.display().to_string());
    eventually(GENEROUS, "the first part arrived", || {
        std::fs::metadata(&received).is_ok_and(|m| m.len() == FIRST_PART.len() as u64)
    });
    assert!(sshd.kill_sessions() > 0, "no ssh session to kill");
    eventually(GONE_WITHIN, "the ssh session gone", || sshd.kill_sessions() == 0);
    assert!(alive(command), "the remote command went with the session");
    let rest = pattern(2 << 20, 3);
    stdin.write_all(&rest).unwrap();
    drop(stdin);
    let status = said.exit_of(&mut child);
    let said = said.all();
    assert!(status.success(), "{status}: {said}");
    let whole = [FIRST_PART.as_slice(), &rest].concat();
    assert_same(&std::fs::read(&received).unwrap(), &whole, "the remote command's file");
    assert!(said.contains("ended is not known: the ssh session ended first"), "{said}");
}

/// Through ssh, the remote accel reads and writes the session's pipes itself, each through a
/// description of its own (non-blocking), and never makes the descriptions it shares with
/// sshd non-blocking: while the stream goes, its stdin (push) and its stdout (pull), as sshd
/// gave them, are blocking still, and another description of the same pipe is not.
#[test]
fn through_ssh_the_remote_never_makes_the_session_pipes_non_blocking() {
    let Some(sshd) = Sshd::start() else { return };
    let (pidfile, fifo) = (sshd.dir.path("pid"), sshd.dir.path("fifo"));
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let record = format!("echo $$ > {}; exec cat", pidfile.display());
    for (way, command, inherited) in [
        ("--to", format!("{record} > /dev/null"), 0),
        ("--from", format!("{record} < {}", fifo.display()), 1),
    ] {
        let _ = std::fs::remove_file(&pidfile);
        let mut args = sshd.args();
        args.extend(["--via", "ssh", way, &sshd.url(), "--", &command].map(String::from));
        let mut child = piped(&mut accel_with("auto", &args));
        let mut stdin = child.stdin.take().unwrap();
        let said = Said::collect(&mut child);
        let mut out = child.stdout.take().unwrap();
        let drained = std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        eventually(GENEROUS, "the remote command started", || {
            std::fs::read_to_string(&pidfile).is_ok_and(|text| text.ends_with('\n'))
        });
        let command: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let remote = parent_of(command);
        // The stream goes: the remote's own description of the pipe is open by then.
        let mut feeding = None;
        match way {
            "--to" => stdin.write_all(&pattern(1 << 20, 4)).unwrap(),
            _ => feeding = Some(std::fs::File::options().write(true).open(&fifo).unwrap()),
        }
        eventually(GENEROUS, "the remote's own description of the session's pipe", || {
            descriptions_of(remote, inherited)
                .iter()
                .any(|&(fd, non_blocking)| fd != inherited && non_blocking)
        });
        let shared = descriptions_of(remote, inherited);
        assert!(
            shared.contains(&(inherited, false)),
            "{way}: the remote's descriptor {inherited}, sshd's pipe, is not blocking: {shared:?}"
        );
        if let Some(mut fifo) = feeding {
            fifo.write_all(&pattern(1 << 20, 5)).unwrap();
        }
        drop(stdin);
        let status = said.exit_of(&mut child);
        assert!(status.success(), "{way}: {status}: {}", said.all());
        drained.join().unwrap().unwrap();
    }
}

/// The descriptors of process `pid` open on the pipe its descriptor `fd` is, with whether
/// each is non-blocking (`O_NONBLOCK` in its fdinfo's flags).
fn descriptions_of(pid: u32, fd: u32) -> Vec<(u32, bool)> {
    let link = |fd: &str| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok();
    let pipe = link(&fd.to_string()).expect("the descriptor is open");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if link(&name).as_ref() != Some(&pipe) {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{name}")).unwrap();
        let flags = info.lines().find_map(|line| line.strip_prefix("flags:")).unwrap();
        let flags = u32::from_str_radix(flags.trim(), 8).unwrap();
        found.push((name.parse().unwrap(), flags & libc::O_NONBLOCK as u32 != 0));
    }
    found
}

/// `--to ssh://accel-test -- 'cat > /dev/null'` with `remote_accel` as the accel there.
fn pushing_through(sshd: &Sshd, remote_accel: &str) -> Vec<String> {
    let ssh = ["--ssh-command", &sshd.ssh_command(), "--remote-accel", remote_accel];
    let push = ["--to", &sshd.url(), "--", "cat > /dev/null"];
    ssh.iter().chain(&push).map(|word| word.to_string()).collect()
}

/// Whether `text` has `len` hex digits in a row.
fn has_hex_run(text: &str, len: usize) -> bool {
    let mut run = 0;
    for c in text.chars() {
        run = if c.is_ascii_hexdigit() { run + 1 } else { 0 };
        if run >= len {
            return true;
        }
    }
    false
}

/// The parent of process `pid`.
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = stat.rsplit_once(')').unwrap().1;
    after.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Refusals on the command line: said at once, status 2, nothing started.
#[test]
fn ssh_urls_are_checked_before_anything_starts() {
    for (args, expected) in [
        (&["--to", "ssh://backup"][..], "which command there?"),
        (
            &["--to", "ssh://backup", "--key-file", "k", "--", "cat"][..],
            "--key-file k: not with ssh://",
        ),
        (&["--to", "ssh://:22", "--", "cat"][..], "which host?"),
        (&["--to", "ssh://backup:x", "--", "cat"][..], "is not a port"),
        (&["--via", "ssh", "-o", "/dev/null"][..], "--via ssh: only with --to ssh://"),
        (&["--to", "ssh://backup", "--via", "fast", "--", "cat"][..], "--via fast: expected auto"),
        (&["--to", "ssh://a", "--from", "ssh://b", "--", "cat"][..], "one ssh:// peer per run"),
        (&["--to", "ssh://a", "--remote-ports", "9-1", "--", "cat"][..], "expected LOW-HIGH"),
    ] {
        let (status, _, said) = run_fed(spawn_piped("auto", args), b"");
        assert_eq!(status.code(), Some(2), "{args:?}: {said}");
        assert!(said.starts_with("accel: ") && said.contains(expected), "{args:?}: {said}");
        assert_eq!(said.lines().count(), 1, "{args:?}: {said}");
    }
}

/// `--compress` through ssh: pushing, this accel compresses (its report says what went on
/// the wire); pulling, the option goes to the remote accel, the sender, whose report (asked
/// for with `-v` there) says so. Byte-exact both ways.
#[test]
fn compression_goes_to_the_sender_either_way() {
    let Some(sshd) = Sshd::start() else { return };
    let wire = |said: &str| {
        said.lines().any(|line| {
            (line.starts_with("wire ") || line.contains(": wire "))
                && line.contains(" of the stream (")
        })
    };
    let said = push(&sshd, "auto", &["-v", "--compress", "zstd:1"], None);
    assert!(wire(&said), "pushing, this accel's report has no wire line: {said}");
    let said = pull(&sshd, "auto", &["--compress", "zstd:1", "--remote-args", "-v"], None);
    let remote: Vec<&str> = said.lines().filter(|line| line.starts_with(HOST)).collect();
    assert!(wire(&remote.join("\n")), "pulling, the remote's report has no wire line: {said}");
}

/// With `--json`, a `remote` event follows the summary: the host, the command, the path, how
/// long it ran and how it ended (here a failure of its own, status 3, direct).
#[test]
fn the_json_says_what_the_remote_command_took() {
    let Some(sshd) = Sshd::start() else { return };
    let json = sshd.dir.path("run.json");
    let command = "cat > /dev/null; exit 3";
    let mut args = sshd.args();
    args.push(format!("--json={}", json.display()));
    args.extend(["--to".into(), sshd.url(), "--".into(), command.into()]);
    let (status, _, said) = run_fed(piped(&mut accel_with("auto", &args)), &pattern(1 << 20, 2));
    assert_eq!(status.code(), Some(3), "{said}");
    let text = std::fs::read_to_string(&json).unwrap();
    let events: Vec<serde_json::Value> =
        text.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().filter_map(|event| event["event"].as_str()).collect();
    assert_eq!(kinds.last(), Some(&"remote"), "{text}");
    assert_eq!(kinds[kinds.len() - 2], "summary", "{text}");
    let remote = events.last().unwrap();
    assert_eq!(remote["host"], HOST, "{text}");
    assert_eq!(remote["command"], command, "{text}");
    assert_eq!(remote["path"], "direct", "{text}");
    assert_eq!(remote["status"], 3, "{text}");
    assert_eq!(remote["stopped"], false, "{text}");
    assert!(remote["seconds"].as_f64().is_some_and(|s| s >= 0.0), "{text}");
}

/// `--streams 4` to a remote accel started through ssh: it takes the stream's four
/// connections (its --debug says so), and the remote command's file is the input, byte for
/// byte.
#[test]
fn a_push_over_four_streams_is_byte_exact() {
    let Some(sshd) = Sshd::start() else { return };
    let said = push(&sshd, "auto", &["--streams", "4", "--remote-args", "--debug"], None);
    assert!(said.contains("4 connections, a window of"), "{said}");
}

/// Pulling, the remote accel sends: `--streams 4` given here goes to it, and this receiver
/// takes four connections (its --debug says so), byte-exact.
#[test]
fn a_pull_over_four_streams_is_byte_exact() {
    let Some(sshd) = Sshd::start() else { return };
    let said = pull(&sshd, "auto", &["--streams", "4", "--debug"], None);
    assert!(said.contains("4 connections, a window of"), "{said}");
}

/// `--via ssh` carries one connection: with `--streams 4`, refused in one line before ssh
/// is started, status 2, for a push and a pull alike.
#[test]
fn several_streams_through_ssh_are_refused() {
    let Some(sshd) = Sshd::start() else { return };
    for (way, command) in [("--to", "cat > /dev/null"), ("--from", "echo x")] {
        let mut args = sshd.args();
        args.extend(
            ["--streams", "4", "--via", "ssh", way, &sshd.url(), "--", command].map(String::from),
        );
        let (status, out, said) = run_fed(piped(&mut accel_with("auto", &args)), b"x");
        assert_eq!(status.code(), Some(2), "{way}: {said}");
        assert_eq!(
            said.trim_end(),
            "accel: --streams 4: only over a direct connection; --via ssh carries one stream",
            "{way}"
        );
        assert!(out.is_empty(), "{way}");
    }
}

/// An accel of wire version 5 at the other end (the debug builds' `ACCEL_TEST_WIRE`: it
/// answers a compressing sender's version as an accel from before the compressed frames'
/// history did), started through `sshd` as the remote one by a script.
fn older_remote(sshd: &Sshd) -> String {
    let older = sshd.dir.path("older-accel");
    let script = format!("#!/bin/sh\nACCEL_TEST_WIRE=5 exec {ACCEL} \"$@\"\n");
    std::fs::write(&older, script).unwrap();
    std::fs::set_permissions(&older, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    older.display().to_string()
}

/// The notice of a sender whose `--compress auto` met an older receiver.
const UNCOMPRESSED: &str = "the receiver speaks an older version of accel's protocol, without \
                            compression; sending uncompressed";

/// What pushes to an older remote accel (`older_remote`) through `sshd`: `options`, then the
/// remote command `remote`.
fn pushing_to_older(sshd: &Sshd, options: &[&str], remote: String) -> Vec<String> {
    let mut args = vec!["--ssh-command".to_owned(), sshd.ssh_command()];
    args.extend(["--remote-accel".to_owned(), older_remote(sshd)]);
    args.extend(options.iter().map(|option| (*option).to_owned()));
    args.extend(["--to".to_owned(), sshd.url(), "--".to_owned(), remote]);
    args
}

/// `--compress auto` pushed to an older remote accel on the direct path: its first
/// connection, made and handshaken before the run, is dropped there, and the sender dials
/// again without compression, said once; the remote command's file is the input, byte for
/// byte, and the JSON says nothing was compressed.
#[test]
fn auto_pushes_uncompressed_to_an_older_remote() {
    let Some(sshd) = Sshd::start() else { return };
    let received = sshd.dir.path("received");
    let json = sshd.dir.path("push.json");
    let data = prose(3 << 20, 351);
    let json_arg = format!("--json={}", json.display());
    let options = ["--compress", "auto", &json_arg];
    let args = pushing_to_older(&sshd, &options, format!("cat > {}", received.display()));
    let (status, _, said) = run_fed(piped(&mut accel_with("auto", &args)), &data);
    assert!(status.success(), "{status}: {said}");
    assert_same(&std::fs::read(&received).unwrap(), &data, "the remote command's file");
    assert_eq!(said.matches(UNCOMPRESSED).count(), 1, "{said}");
    let text = std::fs::read_to_string(&json).unwrap();
    let mut events = text.lines().rev().map(|line| serde_json::from_str(line).unwrap());
    let summary: serde_json::Value =
        events.find(|event: &serde_json::Value| event["event"] == "summary").expect("a summary");
    let wire = &summary["outputs"][0]["wire"];
    assert_eq!(wire["compressing"], false, "{wire}");
    assert!(wire["bytes"].as_u64() > wire["stream_bytes"].as_u64(), "{wire}");
}

/// Pulling, the remote accel sends, and it is the one that meets the older receiver (this
/// accel, made one by the hook): with `--compress auto` (given here, passed on), it dials
/// again without compression, and says so (a remote accel's warnings come back marked with
/// the host with `--remote-args -v`, as its report does); what comes out here is the remote
/// command's output, byte for byte.
#[test]
fn auto_pulled_goes_uncompressed_to_an_older_receiver_here() {
    let Some(sshd) = Sshd::start() else { return };
    let source = sshd.dir.path("source");
    let data = prose(3 << 20, 352);
    std::fs::write(&source, &data).unwrap();
    let mut args = sshd.args();
    args.extend(["--compress", "auto", "--remote-args", "-v", "--from"].map(str::to_owned));
    args.extend([sshd.url(), "--".to_owned(), format!("cat {}", source.display())]);
    let mut command = accel_with("auto", &args);
    command.env("ACCEL_TEST_WIRE", "5");
    let (status, out, said) = run_fed(piped(&mut command), b"");
    assert!(status.success(), "{status}: {said}");
    assert_same(&out, &data, "what came out here");
    let notices: Vec<&str> = said.lines().filter(|line| line.contains(UNCOMPRESSED)).collect();
    assert_eq!(notices.len(), 1, "{said}");
    assert!(notices[0].starts_with(&format!("{HOST}: accel: ")), "{said}");
}

/// Through the ssh session (`--via ssh`), the connection is the session itself, which an
/// older remote accel lets go of once it has refused it: nothing to dial again, so
/// `--compress auto` fails there as a level asked for does (status 6, the words that name
/// `--compress none`), and the remote ends with the session.
#[test]
fn through_ssh_an_older_remote_is_refused_with_words() {
    let Some(sshd) = Sshd::start() else { return };
    let options = ["--compress", "auto", "--via", "ssh"];
    let args = pushing_to_older(&sshd, &options, "cat > /dev/null".to_owned());
    let mut child = piped(&mut accel_with("auto", &args));
    let said = Said::collect(&mut child);
    drop(child.stdin.take());
    let status = wait_within(&mut child, GENEROUS);
    let said = said.all();
    assert_eq!(status.code(), Some(6), "{said}");
    assert!(said.contains("--compress none talks to it"), "{said}");
    assert!(!said.contains(UNCOMPRESSED), "{said}");
}

/// Through the ssh session, frames are compressed only if `--compress` was given: the
/// default `auto` cannot dial an older accel there again. Pushing `--via ssh` to an older
/// remote accel, and pulling `--via ssh` into an older accel here (made one by the hook;
/// the remote sender, given no `--compress`, as an older local gives none), without
/// `--compress`: byte for byte, status 0, nothing compressed and nothing to say of it.
#[test]
fn through_ssh_the_default_goes_uncompressed_to_an_older_accel() {
    let Some(sshd) = Sshd::start() else { return };
    let received = sshd.dir.path("received");
    let data = prose(1 << 20, 354);
    let args = pushing_to_older(&sshd, &["--via", "ssh"], format!("cat > {}", received.display()));
    let (status, _, said) = run_fed(piped(&mut accel_with("auto", &args)), &data);
    assert!(status.success(), "pushing: {status}: {said}");
    assert_same(&std::fs::read(&received).unwrap(), &data, "the remote command's file");
    assert!(!said.contains("accel:"), "pushing: {said}");
    let source = sshd.dir.path("source");
    std::fs::write(&source, &data).unwrap();
    let mut args = sshd.args();
    args.extend(["--via", "ssh", "--from"].map(str::to_owned));
    args.extend([sshd.url(), "--".to_owned(), format!("cat {}", source.display())]);
    let mut command = accel_with("auto", &args);
    command.env("ACCEL_TEST_WIRE", "5");
    let (status, out, said) = run_fed(piped(&mut command), b"");
    assert!(status.success(), "pulling: {status}: {said}");
    assert_same(&out, &data, "what came out here");
    assert!(!said.contains("another version"), "pulling: {said}");
}
