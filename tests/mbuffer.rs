//! accel as a drop-in mbuffer: run through a link named `mbuffer`, with the command lines the
//! backup tools build, against the real mbuffer and socat over loopback (or a namespace of
//! its own where an end listens on every interface).

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::util::net::{Netns, command, free_port, make_key};
use crate::util::*;

/// Every invocation the backup tools build (issue 19), byte for byte, nothing on stderr with
/// -q, status 0.
#[test]
fn the_backup_tools_command_lines_pass_every_byte_quietly() {
    let link = AccelAs::new("mbuffer", "tools");
    let data = pattern(3 << 20, 19);
    let invocations: &[&[&str]] = &[
        // syncoid, each side
        &["-R", "10M", "-q", "-s", "128k", "-m", "16M"],
        &["-r", "10M", "-q", "-s", "128k", "-m", "16M"],
        &["-q", "-s", "128k", "-m", "16M"],
        // zfs_autobackup: values glued
        &["-q", "-s128k", "-m16M"],
        &["-q", "-s128k", "-m16M", "-R10M"],
        // btrbk
        &["-v", "1", "-q", "-s", "128k", "-m", "512m", "-r", "10m", "-R", "10m"],
        &["-v", "1", "-q", "-m", "5%"],
        // znapzend: extra words, the last repeated option wins
        &["-q", "-s", "256k", "-W", "600", "-m", "1G", "-R", "1k", "-R", "10M"],
        // pyznap
        &["-q", "-s", "128K", "-m", "512M"],
        // TrueNAS
        &["-q", "-Q", "-m", "16777216b", "-r", "10485760", "-R", "10485760"],
    ];
    for args in invocations {
        let (status, out, said) = link.run(args, &data);
        assert_eq!(status.code(), Some(0), "mbuffer {args:?}: {said}");
        assert_same(&out, &data, &format!("mbuffer {args:?}"));
        assert_eq!(said, "", "mbuffer {args:?} said something with -q");
    }
}

/// A consumer that goes away early: status 1 and one line saying so, never death by SIGPIPE
/// (mbuffer's status, which zfs_autobackup and syncoid read). FAULTS.md's row
/// "consumer exits early, run as mbuffer".
#[test]
fn a_consumer_that_exits_early_gives_status_1() {
    let link = AccelAs::new("mbuffer", "epipe");
    let mut child = link.spawn(&["-q", "-s", "128k", "-m", "16M"]);
    let said = Said::collect(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    let writer = thread::spawn(move || {
        let block = pattern(1 << 16, 3);
        while stdin.write_all(&block).is_ok() {}
    });
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 10];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout);
    let (status, said) = said.ended(&mut child);
    writer.join().unwrap();
    assert_eq!(status.code(), Some(1), "{status}: {said}");
    assert_eq!(said.lines().count(), 1, "{said}");
    assert!(said.starts_with("accel: write to stdout: Broken pipe; "), "{said}");
}

/// `-W 2` with a consumer that reads nothing ends the run with an error, status 1; so does a
/// `timeout` in ~/.mbuffer.rc, and `-W` bounds `-I`'s wait for a sender.
#[test]
fn the_watchdog_ends_a_stuck_run_with_status_1() {
    let link = AccelAs::new("mbuffer", "watchdog");
    let home = link.dir.path("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join(".mbuffer.rc"), "timeout = 2\n").unwrap();
    for (args, home) in
        [(&["-q", "-W", "2", "-m", "1M"][..], None), (&["-q", "-m", "1M"], Some(&home))]
    {
        let mut command = Command::new(&link.path);
        command.args(args);
        if let Some(home) = home {
            command.env("HOME", home);
        }
        let mut child = piped(&mut command);
        let said = Said::collect(&mut child);
        let mut stdin = child.stdin.take().unwrap();
        // More than the buffer and the pipes hold; the consumer (stdout) never reads.
        let writer = thread::spawn(move || {
            let _ = stdin.write_all(&pattern(16 << 20, 5));
        });
        let (status, said) = said.ended(&mut child);
        assert_eq!(status.code(), Some(1), "mbuffer {args:?}: {status}: {said}");
        assert!(said.contains("stalled"), "mbuffer {args:?}: {said}");
        drop(child.stdout.take());
        writer.join().unwrap();
    }
    // -W before -I: nobody connects.
    let port = free_port().to_string();
    let mut child = link.spawn(&["-q", "-W", "2", "-I", &format!("127.0.0.1:{port}")]);
    let said = Said::collect(&mut child);
    let (status, said) = said.ended(&mut child);
    assert_eq!(status.code(), Some(1), "{status}: {said}");
}

/// Sends `input` with `sender` (a command made afresh each try) until it gets through: the
/// receiver takes a moment to listen, and a refused connection is said at once.
fn send_until_through(mut sender: impl FnMut() -> Command) {
    let deadline = Instant::now() + GENEROUS;
    loop {
        let child = sender().stdin(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
        let (status, said) = ended(child);
        if status.success() {
            return;
        }
        assert!(
            said.contains("Connection refused") || said.contains("connection refused"),
            "{status}: {said}"
        );
        assert!(Instant::now() < deadline, "the receiver never listened: {said}");
        thread::sleep(Duration::from_millis(100));
    }
}

/// Plain TCP both ways between accel-as-mbuffer and the real mbuffer (`-O` into `-I`), and
/// between two accels; in a namespace of its own, since mbuffer's `-I` and znapzend's
/// `-4 -I PORT` listen on every interface.
#[test]
fn plain_tcp_with_the_real_mbuffer_both_ways() {
    if !require("mbuffer (apt-get install mbuffer)", has("mbuffer", "-V")) {
        return;
    }
    let Some(ns) = Netns::new("mbufferlink") else { return };
    let link = AccelAs::new("mbuffer", "tcp");
    let data = pattern(8 << 20, 21);
    let input = link.dir.path("input");
    std::fs::write(&input, &data).unwrap();
    let input = input.to_str().unwrap().to_owned();
    let cases = [("accel", "mbuffer"), ("mbuffer", "accel"), ("accel", "accel")];
    for (at, (sender, receiver)) in cases.into_iter().enumerate() {
        let program =
            |which: &str| if which == "accel" { link.arg().to_owned() } else { which.into() };
        let output = link.dir.path(&format!("output{at}"));
        let port = ns.within(free_port).to_string();
        // znapzend's receiver; the real mbuffer's -4 finds no address in a namespace with
        // loopback alone ("unable to get address information"), so it goes without.
        let mut args = vec!["-q", "-s", "256k", "-W", "60", "-m", "1G", "-4", "-I", &port];
        if receiver == "mbuffer" {
            args.retain(|arg| *arg != "-4");
        }
        args.extend(["-o", output.to_str().unwrap()]);
        let listener =
            command(Some(&ns), &program(receiver), &args).stderr(Stdio::piped()).spawn().unwrap();
        let to = format!("127.0.0.1:{port}");
        send_until_through(|| {
            command(
                Some(&ns),
                &program(sender),
                &["-q", "-s", "256k", "-m", "1G", "-i", &input, "-O", &to],
            )
        });
        let (status, said) = ended(listener);
        assert!(status.success(), "{receiver} -I (from {sender} -O): {status}: {said}");
        if receiver == "accel" {
            // (The real mbuffer warns of no controlling terminal, even with -q.)
            assert_eq!(said, "", "accel -I said something with -q");
        }
        assert_same(
            &std::fs::read(&output).unwrap(),
            &data,
            &format!("{sender} -O to {receiver} -I"),
        );
    }
}

/// syncoid's direct mode: `socat - TCP:HOST:PORT,retry=60,interval=1` sends into
/// `mbuffer -r RATE -W 60 -I ADDR:PORT -q -s 128k -m 16M`.
#[test]
fn syncoids_socat_sender_into_listen() {
    if !require("socat (apt-get install socat)", has("socat", "-V")) {
        return;
    }
    let link = AccelAs::new("mbuffer", "socat");
    let data = pattern(8 << 20, 22);
    let input = link.dir.path("input");
    std::fs::write(&input, &data).unwrap();
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut receiver =
        link.spawn(&["-r", "1G", "-W", "60", "-I", &listen, "-q", "-s", "128k", "-m", "16M"]);
    let said = Said::collect(&mut receiver);
    let stdout = receiver.stdout.take().unwrap();
    let received = thread::spawn(move || drain(stdout));
    let socat = Command::new("socat")
        .args(["-", &format!("TCP:{listen},retry=60,interval=1")])
        .stdin(std::fs::File::open(&input).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (status, socat_said) = ended(socat);
    assert!(status.success(), "socat: {socat_said}");
    let (status, said) = said.ended(&mut receiver);
    assert_eq!(status.code(), Some(0), "{said}");
    assert_eq!(said, "");
    assert_same(&received.join().unwrap(), &data, "socat into mbuffer -I");
}

/// With `ACCEL_KEY_FILE` at both ends, `-O`/`-I` between two accels are encrypted: the
/// stream arrives, and a plain sender (the real mbuffer, or socat) is turned away.
#[test]
fn encrypted_between_two_accels_with_a_key() {
    let link = AccelAs::new("mbuffer", "keyed");
    let key = make_key(&link.dir, "k");
    let data = pattern(4 << 20, 23);
    let input = link.dir.path("input");
    std::fs::write(&input, &data).unwrap();
    let output = link.dir.path("output");
    let listen = format!("127.0.0.1:{}", free_port());
    let keyed_receiver = |watchdog: &str, listen: &str, output: &Path| {
        Command::new(&link.path)
            .args(["-q", "-W", watchdog, "-I", listen, "-o", output.to_str().unwrap()])
            .env("ACCEL_KEY_FILE", &key)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let receiver = keyed_receiver("60", &listen, &output);
    send_until_through(|| {
        let mut sender = Command::new(&link.path);
        sender
            .args(["-q", "-i", input.to_str().unwrap(), "-O", &listen])
            .env("ACCEL_KEY_FILE", &key);
        sender
    });
    let (status, said) = ended(receiver);
    assert!(status.success(), "{said}");
    assert_same(&std::fs::read(&output).unwrap(), &data, "encrypted -O to -I");

    // Without the key, the sender's plain stream is not taken: the keyed receiver drops it
    // and gives up when -W runs out, having written nothing.
    let output = link.dir.path("output2");
    let listen = format!("127.0.0.1:{}", free_port());
    let receiver = keyed_receiver("3", &listen, &output);
    let deadline = Instant::now() + GENEROUS;
    loop {
        let sender = Command::new(&link.path)
            .args(["-q", "-i", input.to_str().unwrap(), "-O", &listen])
            .env_remove("ACCEL_KEY_FILE")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (status, said) = ended(sender);
        if !said.contains("refused") {
            // It connected; whatever it thought, the receiver must not have taken it.
            let _ = status;
            break;
        }
        assert!(Instant::now() < deadline, "{said}");
        thread::sleep(Duration::from_millis(100));
    }
    let (status, said) = ended(receiver);
    assert_eq!(status.code(), Some(1), "{said}");
    assert_eq!(std::fs::read(&output).unwrap_or_default(), b"", "a plain stream was taken");
}

/// Every option in the real mbuffer's `-h` is listed by accel's `mbuffer -h`; each one
/// accel refuses is refused with its reason and status 1, and each one it takes is taken (a
/// run with it moves every byte).
#[test]
fn every_option_of_mbuffers_help_is_done_or_refused() {
    let link = AccelAs::new("mbuffer", "options");
    let ours = Command::new(&link.path).arg("-h").output().unwrap();
    assert!(ours.status.success());
    let ours = String::from_utf8(ours.stdout).unwrap();
    let names = |help: &str| -> Vec<String> {
        help.lines()
            .filter(|line| line.starts_with('-'))
            .map(|line| line.split([' ', ':']).next().unwrap().to_owned())
            .collect()
    };
    let listed = names(&ours);
    let mut theirs = vec!["-H".to_owned(), "--md5".into(), "--hash".into(), "-h".into()];
    if has("mbuffer", "-V") {
        let help = Command::new("mbuffer").arg("-h").output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout).into_owned()
            + &String::from_utf8_lossy(&help.stderr);
        theirs.extend(names(&help));
        let unsupported = help.lines().find_map(|l| l.strip_prefix("Unsupported buffer options:"));
        theirs.extend(unsupported.unwrap_or_default().split_whitespace().map(str::to_owned));
    } else {
        require("mbuffer (apt-get install mbuffer)", false);
    }
    assert!(theirs.len() > 40, "{theirs:?}");
    let data = pattern(256 << 10, 24);
    for name in theirs {
        let line = ours
            .lines()
            .find(|line| line.split([' ', ':']).next() == Some(name.as_str()))
            .unwrap_or_else(|| panic!("mbuffer {name} is not in accel's mbuffer -h: {listed:?}"));
        let takes_value = line.split(':').next().unwrap().trim() != name;
        let mut args = vec![name.clone()];
        if let Some(why) = line.split_once(": refused: ").map(|(_, why)| why) {
            if takes_value {
                args.push("1".into());
            }
            let (status, out, said) =
                link.run(&args.iter().map(String::as_str).collect::<Vec<_>>(), b"");
            assert_eq!(status.code(), Some(1), "mbuffer {name}: {said}");
            assert_eq!(said, format!("accel: mbuffer {name}: {why}\n"), "mbuffer {name}");
            assert!(out.is_empty());
            continue;
        }
        // Taken: with a value of its kind, a run still moves every byte.
        let value = match name.as_str() {
            "-b" => "64",
            "-s" | "--tcpbuffer" => "64k",
            "-m" => "2M",
            "-P" => "50",
            "-p" => "20",
            "-r" | "-R" => "100M",
            "-v" => "1",
            "-W" => "60",
            "--tcptimeo" => "60000",
            "--hash" => "sha256",
            "-i" | "-o" | "-l" | "-I" | "-O" => continue, // their own tests, below and above
            "-h" | "--help" | "-V" | "--version" => continue,
            _ if takes_value => panic!("mbuffer {name}: no value chosen for it here"),
            _ => "",
        };
        if !value.is_empty() {
            args.push(value.into());
        }
        args.push("-q".into());
        let (status, out, said) =
            link.run(&args.iter().map(String::as_str).collect::<Vec<_>>(), &data);
        assert_eq!(status.code(), Some(0), "mbuffer {args:?}: {said}");
        assert_same(&out, &data, &format!("mbuffer {args:?}"));
    }
}

/// What the options that do more than move bytes do: files, hashes, the PID, the log,
/// the version and the help.
#[test]
fn the_options_do_what_mbuffer_says() {
    let link = AccelAs::new("mbuffer", "doing");
    let data = pattern(1 << 20, 25);
    let file = |name: &str| link.dir.path(name).to_str().unwrap().to_owned();
    let input = file("input");
    std::fs::write(&input, &data).unwrap();

    // -i and -o; an existing output is refused without -f, --truncate or --append.
    let (status, _, said) = link.run(&["-q", "-i", &input, "-o", &file("out")], b"");
    assert_eq!(status.code(), Some(0), "{said}");
    assert_same(&std::fs::read(file("out")).unwrap(), &data, "-i to -o");
    let (status, _, said) = link.run(&["-q", "-i", &input, "-o", &file("out")], b"");
    assert_eq!(status.code(), Some(1), "an existing output: {said}");
    // A value glued to its option, `-oFILE`, taken byte for byte (a name need not be UTF-8).
    let glued = link.dir.dir().join(OsStr::from_bytes(b"glued-\xff"));
    let mut option = OsString::from("-o");
    option.push(&glued);
    let (status, _, said) = link.run(&["-q".into(), format!("-i{input}").into(), option], b"");
    assert_eq!(status.code(), Some(0), "{said}");
    assert_same(&std::fs::read(&glued).unwrap(), &data, "-iIN -oOUT");
    for (option, expected) in [
        ("-f", data.clone()),
        ("--truncate", data.clone()),
        ("--append", [&data[..], &data[..]].concat()),
    ] {
        std::fs::write(file("out"), &data).unwrap();
        let (status, _, said) = link.run(&["-q", option, "-i", &input, "-o", &file("out")], b"");
        assert_eq!(status.code(), Some(0), "{option}: {said}");
        assert_same(&std::fs::read(file("out")).unwrap(), &expected, option);
    }

    // -H, --md5, --hash ALG: the hash of the stream, as md5sum and sha256sum have it.
    let reference = |tool: &str| {
        let out = Command::new(tool).arg(&input).output().unwrap();
        String::from_utf8(out.stdout).unwrap().split(' ').next().unwrap().to_owned()
    };
    for (args, tool) in
        [(&["-H"][..], "md5sum"), (&["--md5"], "md5sum"), (&["--hash", "SHA256"], "sha256sum")]
    {
        let mut all = vec!["-q"];
        all.extend_from_slice(args);
        let (status, out, said) = link.run(&all, &data);
        assert_eq!(status.code(), Some(0), "{args:?}: {said}");
        assert_same(&out, &data, &format!("{args:?}"));
        assert!(said.contains(&reference(tool)), "{args:?}: {said}");
    }
    let (status, _, said) = link.run(&["--hash", "list"], b"");
    assert!(status.success() && said.contains("md5") && said.contains("sha256"), "{said}");

    // --pid says this process's PID.
    let mut child = link.spawn(&["-q", "--pid"]);
    let said = Said::collect(&mut child);
    drop(child.stdin.take());
    let (status, said) = said.ended(&mut child);
    assert!(status.success());
    assert_eq!(said, format!("accel: PID is {}\n", child.id()));

    // -l FILE: the messages go there, not to stderr.
    let (status, _, said) =
        link.run(&["-l", &file("log"), "-q", "-i", &input, "-o", &file("out")], b"");
    assert_eq!(status.code(), Some(1));
    assert_eq!(said, "");
    let log = std::fs::read_to_string(file("log")).unwrap();
    assert!(log.starts_with("accel: ") && log.contains("out"), "{log}");

    // -v 5 says how bytes move (accel --debug); the last -v wins.
    let (_, _, said) = link.run(&["-v", "5"], &data);
    assert!(!said.is_empty(), "-v 5 said nothing");
    let (_, _, said) = link.run(&["-v", "5", "-v", "1"], &data);
    assert_eq!(said, "");

    // A defaults file's line accel cannot use is said, but not with -q.
    let home = link.dir.path("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join(".mbuffer.rc"), "memlock = yes\n").unwrap();
    for (quiet, expected) in [(false, true), (true, false)] {
        let mut command = Command::new(&link.path);
        command.env("HOME", &home).args(if quiet { &["-q"][..] } else { &[] });
        let mut child = piped(&mut command);
        let said = Said::collect(&mut child);
        drop(child.stdin.take());
        let (status, said) = said.ended(&mut child);
        assert!(status.success());
        assert_eq!(said.contains("memlock = yes: not supported by accel"), expected, "{said}");
    }

    // -V and -h: to stdout, status 0.
    for option in ["-V", "--version", "-h", "--help"] {
        let out = Command::new(&link.path).arg(option).output().unwrap();
        assert!(out.status.success(), "{option}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("accel"), "{option}: {text}");
    }
}

/// An mbuffer usage error is status 1, as mbuffer's, and one line naming the option.
#[test]
fn mbuffer_usage_errors_are_status_1_on_one_line() {
    let link = AccelAs::new("mbuffer", "usage");
    for (args, expected) in [
        (&["-x"][..], "accel: mbuffer -x: unknown option; mbuffer -h lists the options\n"),
        (&["-m", "100b"], "accel: mbuffer -m 100b: fewer than 128 bytes\n"),
        (
            &["-s", "64"],
            "accel: mbuffer -s 64: too small for bytes: a suffix is missing (k, m, g, t, b or %)?\n",
        ),
    ] {
        let (status, _, said) = link.run(args, b"");
        assert_eq!(status.code(), Some(1), "{args:?}");
        assert_eq!(said, expected);
    }
}

/// `-s` where a block size can be observed: into a packet-mode pipe (`pipe2(O_DIRECT)`, where
/// each read returns one write), every write is exactly `-s` bytes, the last one short.
#[test]
fn s_makes_exact_writes_into_a_packet_mode_pipe() {
    let link = AccelAs::new("mbuffer", "packets");
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors, which OwnedFd then owns.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_DIRECT | libc::O_CLOEXEC) }, 0);
    // SAFETY: the two descriptors pipe2 just made, owned by nothing else.
    let (read_end, write_end) =
        unsafe { (std::fs::File::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let mut child = Command::new(&link.path)
        .args(["-q", "-s", "2k", "-m", "1M"])
        .stdin(Stdio::piped())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = Said::collect(&mut child);
    let data = pattern(100_000, 26);
    let stdin = child.stdin.take().unwrap();
    let sent = data.clone();
    // Odd-sized writes, so that blocks must be gathered.
    let producer = thread::spawn(move || feed(stdin, &sent, 777));
    let reader = thread::spawn(move || {
        let mut read_end = read_end;
        let (mut sizes, mut got, mut buf) = (Vec::new(), Vec::new(), vec![0u8; 65536]);
        loop {
            let n = read_end.read(&mut buf).unwrap();
            if n == 0 {
                return (sizes, got);
            }
            sizes.push(n);
            got.extend_from_slice(&buf[..n]);
        }
    });
    producer.join().unwrap().unwrap();
    let (status, said) = said.ended(&mut child);
    assert_eq!(status.code(), Some(0), "{said}");
    let (sizes, got) = reader.join().unwrap();
    assert_same(&got, &data, "through a packet-mode pipe");
    let (last, whole) = sizes.split_last().unwrap();
    assert!(whole.iter().all(|&n| n == 2048), "{sizes:?}");
    assert_eq!(*last, data.len() % 2048, "{sizes:?}");
}

/// The one deliberate difference from mbuffer: into an ordinary pipe, `-s 128k` does not hold
/// partial data until a block fills; a line comes out while the producer is still open.
#[test]
fn s_does_not_hold_partial_data_in_an_ordinary_pipe() {
    let link = AccelAs::new("mbuffer", "partial");
    let mut child = link.spawn(&["-q", "-s", "128k", "-m", "16M"]);
    let (mut stdin, mut stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    // A line through, stdin still open: with 128 KiB blocks it would wait for 131065 more.
    let through = within(GENEROUS, move || {
        stdin.write_all(b"a line\n").unwrap();
        let mut got = [0u8; 7];
        stdout.read_exact(&mut got).unwrap();
        (got, stdin)
    });
    let (got, stdin) = through.expect("the line did not come through while stdin was open");
    assert_eq!(&got, b"a line\n");
    drop(stdin);
    assert!(wait_within(&mut child, GENEROUS).success());
}

/// What the stand-in `zfs` does: just what syncoid 2.1.0 asks of it for one replication of
/// `$src` (whose stream is the file `sent`) to a new `$dst` (the file `received`), the two
/// set in lines before this. Every call is logged in `calls`; one it was not made for is logged
/// as `unexpected` and fails.
const ZFS_STANDIN: &str = r#"
state="$(dirname "$0")/../zfs"
echo "zfs $*" >> "$state/calls"
dataset="${!#}"
missing() { echo "cannot open '$1': dataset does not exist" >&2; exit 1; }
case "$1 $2" in
"get -H") # zfs get -H PROPERTY DATASET: a property, unset
    [ "$dataset" = "$src" ] || { [ "$dataset" = "$dst" ] && [ -e "$state/received" ]; } ||
        missing "$dataset"
    printf '%s\t%s\t-\t-\n' "$dataset" "$3" ;;
"get -Hpd") # zfs get -Hpd 1 -t snapshot guid,creation $src: the snapshots
    [ "$dataset" = "$src" ] || missing "$dataset"
    while read -r name guid creation; do
        printf '%s\tguid\t%s\t-\n%s\tcreation\t%s\t-\n' "$name" "$guid" "$name" "$creation"
    done < "$state/snapshots" ;;
"snapshot $src@"*)
    echo "$2 $RANDOM$RANDOM $(date +%s)" >> "$state/snapshots" ;;
"send -nvP") # the size estimate
    size=$(stat -c %s "$state/sent")
    printf 'full\t%s\t%s\nsize\t%s\n' "$3" "$size" "$size" ;;
"send $src@"*) # a snapshot's stream
    cut -d ' ' -f 1 "$state/snapshots" | grep -qxF "$2" || missing "$2"
    exec cat "$state/sent" ;;
"receive "*)
    [ "$dataset" = "$dst" ] || missing "$dataset"
    exec cat > "$state/received" ;;
*)
    echo "unexpected: zfs $*" >> "$state/calls"
    echo "the zfs stand-in was not made for: zfs $*" >&2
    exit 1 ;;
esac
"#;

/// syncoid's `mbuffer` (or `pv`, for TOOL): says how it was called, runs accel through a link
/// named TOOL, and says what accel said and how it ended (syncoid sends mbuffer's stderr to
/// /dev/null, and the pipeline's status is `zfs receive`'s).
const WRAPPER: &str = r#"#!/bin/bash
here="$(dirname "$0")/.."
echo "$*" >> "$here/TOOL-args"
"$here/accel/TOOL" -V >> "$here/TOOL-version"
"$here/accel/TOOL" "$@" 2>> "$here/TOOL-said"
status=$?
echo "$status" >> "$here/TOOL-status"
exit "$status"
"#;

/// Where `program` is, looked for on PATH and in the sbin directories (syncoid is in
/// /usr/sbin, which a user's PATH may lack).
fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// syncoid itself (sanoid's), local to local, with a stand-in `zfs`: it finds accel as its
/// `mbuffer` and its `pv` with `command -v`, runs `zfs send | mbuffer -q -s 128k -m 16M | pv
/// -p -t -e -r -b -s SIZE | zfs receive`, and every byte of the stream arrives; accel, not the
/// real mbuffer or pv, ran as each, quietly, status 0.
#[test]
fn syncoid_replicates_through_accel_as_its_mbuffer_and_pv() {
    let syncoid = find_program("syncoid");
    if !require("syncoid (apt-get install sanoid)", syncoid.is_some()) {
        return;
    }
    let scratch = Scratch::new("syncoid");
    let (bin, state, accel) = (scratch.path("bin"), scratch.path("zfs"), scratch.path("accel"));
    for dir in [&bin, &state, &accel, &scratch.path("home")] {
        std::fs::create_dir(dir).unwrap();
    }
    let executable = |path: PathBuf, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, PermissionsExt::from_mode(0o755)).unwrap();
    };
    // Names of this process's own: syncoid will not receive into a dataset that any process
    // on the machine is receiving into (`ps`), such as another test run's stand-in.
    let (src, dst) =
        (format!("pool/src-{}", std::process::id()), format!("pool/dst-{}", std::process::id()));
    executable(bin.join("zfs"), &format!("#!/bin/bash\nsrc={src}\ndst={dst}{ZFS_STANDIN}"));
    // zpool get -o value -H feature@extensible_dataset POOL: resumable streams are there.
    executable(bin.join("zpool"), "#!/bin/sh\necho active\n");
    for tool in ["mbuffer", "pv"] {
        executable(bin.join(tool), &WRAPPER.replace("TOOL", tool));
        std::os::unix::fs::symlink(ACCEL, accel.join(tool)).unwrap();
    }
    // Not a multiple of syncoid's 128k blocks, and more than its 16M buffer.
    let data = pattern((20 << 20) + 12345, 27);
    std::fs::write(state.join("sent"), &data).unwrap();
    std::fs::write(state.join("snapshots"), "").unwrap();
    let path = std::env::join_paths(
        std::iter::once(bin.clone()).chain(std::env::split_paths(&std::env::var("PATH").unwrap())),
    )
    .unwrap();

    // The checks syncoid makes (`command -v mbuffer`, `command -v pv`, in sh) find the
    // wrappers, before /usr/bin's.
    for tool in ["mbuffer", "pv"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .env("PATH", &path)
            .output();
        let found = String::from_utf8(found.unwrap().stdout).unwrap();
        assert_eq!(found.trim_end(), bin.join(tool).to_str().unwrap());
    }

    let mut child = Command::new(syncoid.unwrap())
        .args(["--debug", "--no-privilege-elevation", &src, &dst])
        .env("PATH", &path)
        .env("HOME", scratch.path("home"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = Said::collect(&mut child);
    let stdout = child.stdout.take().unwrap();
    let printed = thread::spawn(move || String::from_utf8_lossy(&drain(stdout)).into_owned());
    let (status, said) = said.ended(&mut child);
    let printed = printed.join().unwrap();
    let read = |name: &str| std::fs::read_to_string(state.join(name)).unwrap_or_default();
    let calls = read("calls");
    let context = format!("syncoid {status}\nstdout:\n{printed}\nstderr:\n{said}\nzfs:\n{calls}");
    assert_eq!(status.code(), Some(0), "{context}");
    assert!(!calls.contains("unexpected"), "{context}");
    assert!(!printed.contains("not available"), "{context}");
    let pipeline =
        printed.lines().find(|line| line.contains("zfs send") && line.contains("zfs receive"));
    let size = data.len();
    let pv = format!("| pv -p -t -e -r -b -s {size} |");
    assert!(pipeline.is_some_and(|l| l.contains("| mbuffer ") && l.contains(&pv)), "{context}");

    let received = std::fs::read(state.join("received")).unwrap_or_default();
    assert_same(
        &received,
        &data,
        &format!("zfs send | syncoid's mbuffer | zfs receive\n{context}"),
    );
    // accel ran as syncoid's mbuffer and pv, once each, with syncoid's options: status 0,
    // nothing said (pv's stderr is not a terminal here: no line).
    let here = |name: &str| std::fs::read_to_string(scratch.path(name)).unwrap_or_default();
    for (tool, args) in
        [("mbuffer", "-q -s 128k -m 16M".to_owned()), ("pv", format!("-p -t -e -r -b -s {size}"))]
    {
        assert_eq!(
            std::fs::canonicalize(accel.join(tool)).unwrap(),
            std::fs::canonicalize(ACCEL).unwrap()
        );
        let version = here(&format!("{tool}-version"));
        assert!(
            version.starts_with(&format!("accel {}, running as {tool}", env!("CARGO_PKG_VERSION"))),
            "{version}"
        );
        assert_eq!(here(&format!("{tool}-args")), format!("{args}\n"), "{context}");
        assert_eq!(here(&format!("{tool}-status")), "0\n", "{context}");
        assert_eq!(here(&format!("{tool}-said")), "", "{context}");
    }
}
