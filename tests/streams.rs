//! One stream over several connections (`--streams N`, issue 36): byte-exact whatever N,
//! compressed frames too, the wire of one connection unchanged, a receiver of the older
//! protocol refused in words that say what to do, and the option's bounds.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;

use crate::util::net::*;
use crate::util::*;

/// The digest a run said (`--hash sha256`: a line `HEX  -`).
fn sha256(said: &str) -> String {
    let digest = said
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .find(|word| word.len() == 64 && word.bytes().all(|b| b.is_ascii_hexdigit()));
    digest.unwrap_or_else(|| panic!("no sha256 digest in: {said}")).to_owned()
}

/// A stream of `data` sent with `--streams N` and `args` to a receiver with `-m 16M`
/// (a window of 4 MiB, less than the stream): both ends end with 0, the receiver writes
/// exactly what the sender read, both ends' sha256 agree, and with N above 1 the receiver
/// took N connections.
fn over(engine: &str, streams: usize, args: &[&str], data: &[u8]) {
    let dir = Scratch::new(&format!("streams-{streams}-{engine}"));
    let key = make_key(&dir, "k");
    let common = ["--key-file", key.as_str(), "--hash", "sha256"];
    let receiving: Vec<&str> = common.iter().copied().chain(["-m", "16M", "--debug"]).collect();
    let mut receiver = Receiver::start(engine, "127.0.0.1", &receiving, None);
    let output = receiver.output();
    let to = format!("127.0.0.1:{}", receiver.port);
    let n = streams.to_string();
    let mut sending: Vec<&str> = common.to_vec();
    sending.extend_from_slice(&["--streams", &n]);
    sending.extend_from_slice(args);
    let mut child = sender(engine, &to, &sending, None);
    let stdin = child.stdin.take().unwrap();
    let fed = data.to_vec();
    thread::spawn(move || feed(stdin, &fed, 100_003));
    let (sent, sender_said) = ended(child);
    let received = output.join().unwrap();
    let (status, receiver_said) = receiver.end();
    let both = format!("{streams} streams: sender: {sender_said}\nreceiver: {receiver_said}");
    assert!(sent.success() && status.success(), "{sent}, {status}: {both}");
    assert_same(&received, data, &format!("{streams} streams, {args:?}"));
    assert_eq!(sha256(&sender_said), sha256(&receiver_said), "{streams} streams");
    let several = format!("{streams} connections, a window of 4 MiB");
    assert_eq!(receiver_said.contains(&several), streams > 1, "{receiver_said}");
}

/// Issue 36: 1, 2, 4 and 8 connections carry a stream larger than the receiver's window
/// byte for byte.
fn several_streams_carry_the_stream_whole(engine: &str) {
    let data = pattern(24 << 20, 36);
    for streams in [1, 2, 4, 8] {
        over(engine, streams, &[], &data);
    }
}

/// Issue 36 with issue 35: each connection's thread compresses its frames on its own; the
/// receiver decompresses each wherever it belongs.
fn compressed_frames_over_several_streams(engine: &str) {
    let data: Vec<u8> =
        (0..12 << 20).map(|i: u32| b"several streams, one order\n"[i as usize % 27]).collect();
    over(engine, 4, &["--compress", "zstd"], &data);
}

per_engine!(several_streams_carry_the_stream_whole, compressed_frames_over_several_streams);

/// Issue 36: a receiver that speaks version 4 (one connection per stream) answers a
/// sender's version 5 preamble with its own preamble and an empty message, as version 4's
/// `answer_hello` does: the sender fails before a byte is read (status 6), saying the
/// receiver does not take several streams, and that `--streams 1` talks to it.
#[test]
fn a_receiver_of_the_older_protocol_refuses_several_streams() {
    let old = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = old.local_addr().unwrap().port();
    let receiver = thread::spawn(move || {
        let (mut connection, _) = old.accept().unwrap();
        let mut preamble = [0u8; 8];
        connection.read_exact(&mut preamble).unwrap();
        connection.write_all(b"accelN4A\0\0").unwrap();
        preamble
    });
    let dir = Scratch::new("streams-old-receiver");
    let key = make_key(&dir, "k");
    let to = format!("127.0.0.1:{port}");
    let mut child = sender("auto", &to, &["--key-file", &key, "--streams", "4"], None);
    drop(child.stdin.take());
    let (status, said) = ended(child);
    assert_eq!(status.code(), Some(6), "{said}");
    assert!(
        said.contains(&format!(
            "accel: {to}: the receiver does not take several streams: it speaks version 4"
        )),
        "{said}"
    );
    assert!(said.contains("--streams 1 talks to it"), "{said}");
    assert_eq!(&receiver.join().unwrap()[..7], b"accelN5");
}

/// `--streams` takes 1 to 16, and not with --insecure (plain TCP has no offsets): status 2,
/// naming what was typed.
#[test]
fn streams_out_of_bounds_are_refused() {
    let dir = Scratch::new("streams-bounds");
    let key = make_key(&dir, "k");
    for (args, why) in [
        (&["--streams", "0"][..], "accel: --streams 0: a number of connections, 1 to 16"),
        (&["--streams", "17"][..], "accel: --streams 17: a number of connections, 1 to 16"),
        (&["--streams", "x"][..], "accel: --streams x: a number of connections, 1 to 16"),
        (&["--streams", "2", "--insecure"][..], "accel: --streams 2: plain TCP (--insecure)"),
    ] {
        let mut full = vec!["--to", "127.0.0.1:9"];
        if !args.contains(&"--insecure") {
            full.extend_from_slice(&["--key-file", &key]);
        }
        full.extend_from_slice(args);
        let (status, _, said) = run_fed(spawn_piped("auto", &full), b"");
        assert_eq!(status.code(), Some(2), "{args:?}: {said}");
        assert!(said.starts_with(why), "{args:?}: {said}");
    }
}
