//! Issue 35: compression on the wire (`--compress`). Each kind of data (prose, random,
//! zeros, prose and random in turn) crosses with each setting, byte for byte; what the frames
//! took on the wire is read from the sender's `--json` summary (`outputs[0].wire`): fewer
//! bytes than the stream for what compresses, about as many (never more than 0.5 % above)
//! for what does not; and from the receiver's (`input_wire`): what it read off the socket,
//! the same frames. A frame refers to the stream before it (the session's history). Bad
//! values are refused (status 2); a peer of the protocol before compression, or before its
//! history, is refused with words that say so; a frame that does not decompress (the
//! debug builds' `ACCEL_TEST_DAMAGE` hook) is a clean failure, never a wrong byte. Resuming
//! with compression on is in `resume.rs`. Everything on loopback.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use serde_json::Value;
use sha2::Digest;

use crate::util::net::*;
use crate::util::*;

/// `data` from a sender with `--compress how` to a receiver on loopback, both with `engine`
/// and the key in `dir`: both must end with 0 and the receiver write `data` byte for byte.
/// Returns the sender's summary's `wire` and the receiver's `input_wire`.
fn across(engine: &str, dir: &Scratch, how: &str, data: &[u8], context: &str) -> (Value, Value) {
    across_with(engine, dir, how, data, context, &[])
}

/// As [`across`], with `env` in the sender's environment (a test hook).
fn across_with(
    engine: &str,
    dir: &Scratch,
    how: &str,
    data: &[u8],
    context: &str,
    env: &[(&str, &str)],
) -> (Value, Value) {
    let key = dir.path("k").display().to_string();
    let received_json = dir.path("receiver.json");
    let received_arg = format!("--json={}", received_json.display());
    let mut receiver =
        Receiver::start(engine, "127.0.0.1", &["--key-file", &key, &received_arg], None);
    let output = receiver.output();
    let to = format!("127.0.0.1:{}", receiver.port);
    let json = dir.path("sender.json");
    let json_arg = format!("--json={}", json.display());
    let args = ["--key-file", &key, "--compress", how, &json_arg];
    let mut child = sender_with_env(engine, &to, &args, None, env);
    let stdin = child.stdin.take().unwrap();
    let fed = data.to_vec();
    let feeding = thread::spawn(move || feed(stdin, &fed, 1 << 20));
    let (status, said) = ended(child);
    assert!(status.success(), "{context}: sender: {status}: {said}");
    feeding.join().unwrap().expect("the sender took every byte");
    let written = output.join().unwrap();
    let (status, said) = receiver.end();
    assert!(status.success(), "{context}: receiver: {status}: {said}");
    assert_same(&written, data, context);
    let sent = summary_in(&json, context);
    let received = summary_in(&received_json, context);
    (sent["outputs"][0]["wire"].clone(), received["input_wire"].clone())
}

/// The `--json` summary written to `path`.
fn summary_in(path: &std::path::Path, context: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["event"], "summary", "{context}: {text}");
    summary
}

/// Frames that did not shrink and still go compressed (zstd's blocks stored, a few bytes
/// more than the frame), so that the session's history goes on: the first 7 in a row
/// (`compress::RUN` less one); then they are stored as they are.
const TRIED_AS_ZSTD: u64 = 7;

/// What zstd adds to a frame it stores: a block header, and a zstd frame's at the first.
const ZSTD_STORED: u64 = 3 + 18;

/// What a frame takes on the wire beside its payload: the payload's length (2 bytes), the
/// cipher's tag (16), the trailer's length (2) and the trailer, sealed (9 + 16).
const FRAMING: u64 = 2 + 16 + 2 + 9 + 16;

/// Prose and random bytes in turn, `piece` bytes each, `len` in all.
fn alternating(len: usize, piece: usize) -> Vec<u8> {
    let (text, noise) = (prose(len, 3), pattern(len, 4));
    let mut out = Vec::with_capacity(len);
    for (i, at) in (0..len).step_by(piece).enumerate() {
        let end = (at + piece).min(len);
        out.extend_from_slice(if i % 2 == 0 { &text[at..end] } else { &noise[at..end] });
    }
    out
}

fn number(value: &Value, field: &str, context: &str) -> u64 {
    value[field].as_u64().unwrap_or_else(|| panic!("{context}: no {field} in {value}"))
}

/// Each setting, each kind of data: byte for byte; the wire fewer bytes than the stream for
/// what compresses, and for random data, no more than 0.5 % above it, each frame stored as
/// it was but the first few ([`TRIED_AS_ZSTD`]), which go as zstd stored them.
fn every_setting_carries_every_kind_of_data(engine: &str) {
    let dir = Scratch::new(&format!("compress-all-{engine}"));
    make_key(&dir, "k");
    let size = 6 << 20;
    let kinds: [(&str, Vec<u8>); 4] = [
        ("prose", prose(size, 1)),
        ("random", pattern(size, 2)),
        ("zeros", vec![0u8; size]),
        ("alternating", alternating(size, 1 << 20)),
    ];
    for (kind, data) in &kinds {
        for how in ["auto", "none", "zstd", "zstd:-5", "zstd:9"] {
            let context = format!("{kind}, --compress {how}, {engine}");
            let (wire, received) = across(engine, &dir, how, data, &context);
            let (bytes, stream) = (number(&wire, "bytes", &context), data.len() as u64);
            assert_eq!(number(&wire, "stream_bytes", &context), stream, "{context}: {wire}");
            assert_eq!(wire["compressing"], how != "none", "{context}: {wire}");
            let frames = number(&wire, "frames", &context);
            let stored = number(&wire, "stored_frames", &context);
            match (*kind, how) {
                (_, "none") => {
                    assert!(bytes >= stream && bytes <= stream + stream / 200, "{context}: {wire}");
                    assert_eq!(stored, 0, "{context}: {wire}");
                }
                (_, "auto") => {
                    // On loopback the link is never the bottleneck: frames go as they are,
                    // or compressed where that moved more; never more than 0.5 % above.
                    assert!(bytes <= stream + stream / 200, "{context}: {wire}");
                }
                ("random", _) => {
                    assert!(bytes <= stream + stream / 200, "{context}: {wire}");
                    assert_eq!(stored, frames - TRIED_AS_ZSTD, "{context}: {wire}");
                }
                ("alternating", _) => {
                    // Half is random: a little over half goes.
                    assert!(bytes < stream * 3 / 4, "{context}: {wire}");
                    assert!(stored > 0 && stored < frames, "{context}: {wire}");
                }
                _ => assert!(bytes < stream / 2, "{context}: {wire}"),
            }
            let ratio = wire["ratio"].as_f64().unwrap();
            let expected = stream as f64 / bytes as f64;
            assert!((ratio - expected).abs() < 1e-9, "{context}: ratio {ratio}: {wire}");
            // The receiver counts what it read off the socket: on loopback no connection
            // drops, so every frame the sender wrote, once.
            let context = format!("{context}: received {received}, sent {wire}");
            assert_eq!(number(&received, "stream_bytes", &context), stream, "{context}");
            assert_eq!(number(&received, "bytes", &context), bytes, "{context}");
            assert_eq!(number(&received, "frames", &context), frames, "{context}");
            let came_raw = number(&received, "stored_frames", &context);
            assert_eq!(came_raw, if how == "none" { frames } else { stored }, "{context}");
            assert_eq!(received["compressing"], came_raw < frames, "{context}");
            match *kind {
                // Every frame as it was: the stream and the framing, to the byte; and
                // zstd's headers on the first few, if compressing.
                "random" => {
                    let framed = stream + FRAMING * frames;
                    let most = framed + if how == "none" { 0 } else { ZSTD_STORED * 8 };
                    let got = number(&received, "bytes", &context);
                    assert!(got >= framed && got <= most, "{context}");
                }
                _ if came_raw < frames => {
                    assert!(number(&received, "bytes", &context) < stream, "{context}")
                }
                _ => {}
            }
        }
    }
}

/// A frame refers to the stream bytes before it (issue 35's history): a MiB that shrinks
/// only to about 60 % on its own (random bytes and zeros in turn), sent eight times over,
/// goes in far fewer bytes than eight times that, since each repeat is a reference to the
/// MiB before it, within the session's zstd window; byte for byte at the receiver. A frame
/// compressed alone cannot see the frame before it: eight times 60 %.
fn frames_refer_to_the_stream_before_them(engine: &str) {
    let dir = Scratch::new(&format!("compress-history-{engine}"));
    make_key(&dir, "k");
    let noise = pattern(1 << 20, 6);
    let unit: Vec<u8> = noise
        .chunks(64 << 10)
        .flat_map(|chunk| [&chunk[..40 << 10], &[0u8; 24 << 10][..]].concat())
        .collect();
    let data = unit.repeat(8);
    for how in ["zstd:1", "zstd:-5"] {
        let context = format!("{how}, {engine}");
        let (wire, _) = across(engine, &dir, how, &data, &context);
        let (bytes, stream) = (number(&wire, "bytes", &context), data.len() as u64);
        assert!(bytes < stream / 4, "{context}: {bytes} bytes on the wire: {wire}");
    }
}

/// Each batch's frames compressed on three threads (the debug builds' `ACCEL_TEST_THREADS`,
/// whatever the cores and the bottleneck), each thread's run of frames a zstd frame of its
/// own, sealed in the stream's order: prose, random and the two in turn, at a fixed level
/// and with `auto`, cross byte for byte; prose shrinks, random goes in no more than 0.5 %
/// over the stream, and the receiver read every frame the sender wrote.
fn several_threads_carry_every_kind_of_data(engine: &str) {
    let dir = Scratch::new(&format!("compress-threads-{engine}"));
    make_key(&dir, "k");
    let size = 6 << 20;
    let kinds: [(&str, Vec<u8>); 3] = [
        ("prose", prose(size, 11)),
        ("random", pattern(size, 12)),
        ("alternating", alternating(size, 1 << 20)),
    ];
    let env = [("ACCEL_TEST_THREADS", "3")];
    for (kind, data) in &kinds {
        for how in ["zstd:3", "auto"] {
            let context = format!("{kind}, --compress {how} on 3 threads, {engine}");
            let (wire, received) = across_with(engine, &dir, how, data, &context, &env);
            let (bytes, stream) = (number(&wire, "bytes", &context), data.len() as u64);
            assert_eq!(number(&wire, "stream_bytes", &context), stream, "{context}: {wire}");
            assert!(bytes <= stream + stream / 200, "{context}: {wire}");
            match (*kind, how) {
                ("prose", "zstd:3") => assert!(bytes < stream / 2, "{context}: {wire}"),
                ("alternating", "zstd:3") => assert!(bytes < stream * 3 / 4, "{context}: {wire}"),
                _ => {}
            }
            let context = format!("{context}: received {received}, sent {wire}");
            assert_eq!(number(&received, "stream_bytes", &context), stream, "{context}");
            assert_eq!(number(&received, "bytes", &context), bytes, "{context}");
            let frames = number(&wire, "frames", &context);
            assert_eq!(number(&received, "frames", &context), frames, "{context}");
        }
    }
}

/// A frame that does not decompress at the receiver (damaged by the debug builds' hook
/// after 2 MiB: the cipher lets no frame changed on the way through, so nothing else can
/// make one) is a clean failure: the receiver ends with status 1 saying so, having written
/// only bytes of the stream, in order; the sender ends with status 3, counting what was
/// delivered. No panic.
fn a_frame_that_does_not_decompress_fails_cleanly(engine: &str) {
    let dir = Scratch::new(&format!("compress-damage-{engine}"));
    let key = make_key(&dir, "k");
    let damage = format!("zstd:{}", 2 << 20);
    let args = ["--key-file", key.as_str(), "--reconnect-for", "0"];
    let env = [("ACCEL_TEST_DAMAGE", damage.as_str())];
    let mut receiver = Receiver::with_env(engine, "127.0.0.1:0", &args, None, &env);
    let output = receiver.output();
    let to = format!("127.0.0.1:{}", receiver.port);
    let data = prose(16 << 20, 5);
    let mut sending = sender(
        engine,
        &to,
        &["--key-file", &key, "--compress", "zstd:1", "--reconnect-for", "0"],
        None,
    );
    let stdin = sending.stdin.take().unwrap();
    let fed = data.clone();
    thread::spawn(move || feed(stdin, &fed, 1 << 20));
    let (status, said) = ended(sending);
    let written = output.join().unwrap();
    let (received, heard) = receiver.end();
    assert_eq!(received.code(), Some(1), "receiver: {heard}");
    assert!(heard.contains("did not decompress"), "receiver: {heard}");
    assert!(!heard.contains("panicked"), "receiver: {heard}");
    assert!(written.len() >= 2 << 20 && written.len() < data.len(), "{} written", written.len());
    assert_same(&written, &data[..written.len()], "what came before the damaged frame");
    assert_eq!(status.code(), Some(3), "sender: {said}");
    assert!(said.contains("delivered (confirmed by the receiver)"), "sender: {said}");
    // The receiver's Abort may be read, or the connection found reset first; when it is
    // read, the bytes it says were sent are the breakdown's: delivered and not confirmed.
    if let Some(sent) = count_before(&said, " were sent") {
        let delivered = count_before(&said, " delivered (confirmed").expect("delivered");
        let unconfirmed = count_before(&said, " sent but not confirmed").expect("not confirmed");
        assert_eq!(sent, delivered + unconfirmed, "sender: {said}");
    }
}

/// The count in the `(N bytes)` just before `words` in `said`, if `words` are there.
fn count_before(said: &str, words: &str) -> Option<u64> {
    let before = &said[..said.find(words)?];
    let count = before.strip_suffix(" bytes)")?.rsplit('(').next()?;
    Some(count.parse().unwrap_or_else(|_| panic!("not a count before {words}: {said}")))
}

/// The most bytes a sender's connections held unsent (`ss -tni`'s `notsent`), looked at
/// over and over from a thread while the sender runs; and how many looks found a connection.
struct Unsent {
    stop: Arc<AtomicBool>,
    looking: thread::JoinHandle<(usize, u64)>,
}

impl Unsent {
    /// Starts looking at the connections to `to` from `netns`.
    fn watch(netns: &Netns, to: &str) -> Unsent {
        let stop = Arc::new(AtomicBool::new(false));
        let args = ["-tni", "dst", to].map(str::to_owned);
        let (name, stopped) = (netns.name.clone(), stop.clone());
        let looking = thread::spawn(move || {
            let (mut seen, mut most) = (0, 0);
            while !stopped.load(Ordering::Relaxed) {
                let mut ss = Command::new("ip");
                let out = ss.args(["netns", "exec", &name, "ss"]).args(&args).output().unwrap();
                assert!(out.status.success(), "ss: {}", String::from_utf8_lossy(&out.stderr));
                let text = String::from_utf8_lossy(&out.stdout);
                seen += usize::from(text.contains(&args[2]));
                let unsent = text.split_whitespace().filter_map(|w| w.strip_prefix("notsent:"));
                most = unsent.map(|n| n.parse::<u64>().unwrap()).fold(most, u64::max);
                // A look every 20 ms: a sample, not a wait for anything.
                thread::sleep(Duration::from_millis(20));
            }
            (seen, most)
        });
        Unsent { stop, looking }
    }

    /// Stops looking: the looks that found a connection, and the most unsent.
    fn end(self) -> (usize, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.looking.join().unwrap()
    }
}

/// `auto` follows the link: across a link of 20 Mbit/s (two namespaces, tbf) the level rises
/// above level 1, where it starts (`--debug` says so, and why), and the wire carries fewer
/// bytes than the stream; the socket holds few bytes unsent all along, so that what the
/// level is judged on is the link, not the socket's buffer; on loopback, where the link is
/// never the bottleneck, it does not stay high: most of the time at the lowest levels, or
/// storing.
///
/// The link is slow enough that level 1 on prose (about 10 MiB/s of the stream on it) leaves
/// the compressing thread room on a loaded machine: at 50 Mbit/s, with the test suite beside
/// it, level 1 went no faster than the link took it, and the first climb came late.
#[test]
fn auto_follows_the_link() {
    let Some(veth) = Veth::new("zauto", 35) else { return };
    veth.limit("20mbit");
    let dir = Scratch::new("compress-auto");
    let key = make_key(&dir, "k");
    let json = dir.path("sender.json");
    // Prose goes 4 to 1: 22 MiB on the wire, 9 s of the link, most of it past the socket's
    // buffer and the queue.
    let data = prose(96 << 20, 9);
    let mut receiver =
        Receiver::start("auto", &veth.b.addr, &["--key-file", &key], Some(&veth.b.netns));
    let output = receiver.output();
    let to = format!("{}:{}", veth.b.addr, receiver.port);
    let json_arg = format!("--json={}", json.display());
    let args = ["--key-file", &key, "--compress", "auto", &json_arg, "--debug"];
    let mut child = sender("auto", &to, &args, Some(&veth.a.netns));
    let stdin = child.stdin.take().unwrap();
    let fed = data.clone();
    thread::spawn(move || feed(stdin, &fed, 1 << 20));
    let unsent = Unsent::watch(&veth.a.netns, &veth.b.addr);
    let (status, debug) = ended(child);
    let (seen, most_unsent) = unsent.end();
    assert!(status.success(), "sender: {status}: {debug}");
    assert_same(&output.join().unwrap(), &data, "across 20 Mbit/s");
    let (status, said) = receiver.end();
    assert!(status.success(), "receiver: {status}: {said}");
    // The socket held few bytes unsent (`TCP_NOTSENT_LOWAT`, 512 KiB, and the write that
    // found it below that): a send buffer left to autotuning took 16 MiB of the stream at
    // level 1 before the level was judged (8 MB unsent, read the same way, without the hold).
    assert!(seen > 0, "ss never showed the sender's connection");
    assert!(most_unsent < 2 << 20, "{most_unsent} bytes unsent at most, in {seen} looks");
    let text = std::fs::read_to_string(&json).unwrap();
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let wire = &summary["outputs"][0]["wire"];
    // --debug says each change, and why: one of them above level 1, where it starts.
    let changes = debug.lines().filter_map(|l| l.strip_prefix("accel: --compress auto: "));
    let climbed = changes.filter_map(|change| change.split_once(" -> level ")).any(|(_, to)| {
        to.split_once(':').is_some_and(|(to, why)| {
            to.parse::<i32>().is_ok_and(|to| to > 1) && why.contains("the link refused bytes")
        })
    });
    assert!(climbed, "{wire}: {debug}");
    let levels = wire["levels"].as_array().unwrap();
    let compressed: f64 =
        levels.iter().filter(|l| l["level"].is_i64()).map(|l| l["seconds"].as_f64().unwrap()).sum();
    let all: f64 = levels.iter().map(|l| l["seconds"].as_f64().unwrap()).sum();
    assert!(compressed > all / 2.0, "50 Mbit/s: mostly compressed: {wire}");
    assert!(wire["ratio"].as_f64().unwrap() > 2.0, "50 Mbit/s: {wire}");
    // Loopback: the link never refuses bytes for long.
    let (loopback, _) = across("auto", &dir, "auto", &prose(256 << 20, 10), "loopback");
    let levels = loopback["levels"].as_array().unwrap();
    let high: f64 = levels
        .iter()
        .filter(|l| l["level"].as_i64().is_some_and(|level| level > 1))
        .map(|l| l["seconds"].as_f64().unwrap())
        .sum();
    let all: f64 = levels.iter().map(|l| l["seconds"].as_f64().unwrap()).sum();
    assert!(high < all / 2.0, "loopback: stayed high: {loopback}");
}

per_engine!(
    every_setting_carries_every_kind_of_data,
    frames_refer_to_the_stream_before_them,
    several_threads_carry_every_kind_of_data,
    a_frame_that_does_not_decompress_fails_cleanly
);

/// Bad `--compress` values are refused before anything happens (status 2), naming the value
/// and what is accepted; so is compression over plain TCP, and on a receiver.
#[test]
fn bad_settings_are_refused() {
    let dir = Scratch::new("compress-bad");
    let key = make_key(&dir, "k");
    let refused = |args: &[&str]| {
        let out = Command::new(ACCEL).args(args).stdin(Stdio::null()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let to = ["--to", "127.0.0.1:9", "--key-file", key.as_str()];
    for (how, why) in [
        ("lz4", "expected auto, none, zstd or zstd:LEVEL (e.g. zstd:3, zstd:-1)"),
        ("zstd:fast", "not a level: expected zstd:LEVEL, e.g. zstd:3; levels are -7 to 22"),
        ("zstd:23", "no such level: levels are -7 to 22 (negative: faster)"),
        ("zstd:-8", "no such level: levels are -7 to 22"),
    ] {
        let (code, said) = refused(&[&to[..], &["--compress", how]].concat());
        assert_eq!(code, Some(2), "{how}: {said}");
        assert!(said.starts_with(&format!("accel: --compress {how}: {why}")), "{how}: {said}");
        assert_eq!(said.lines().count(), 1, "{how}: {said}");
    }
    let (code, said) = refused(&["--to", "127.0.0.1:9", "--insecure", "--compress", "zstd"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("plain TCP (--insecure) is a raw stream"), "{said}");
    let (code, said) =
        refused(&["--from", "127.0.0.1:0", "--key-file", &key, "--compress", "auto"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("--compress") && said.contains("--to"), "{said}");
}

/// The protocol changed with compression (version 4), and again with compressed frames
/// that keep the session's history (version 6, 7 with several connections; only a sender
/// that compresses speaks them): a receiver of an older version answers a sender of a later
/// one with its own preamble and nothing else (as it answers any other version), and the
/// sender says the versions differ (status 6, nothing sent), naming `--compress none` when
/// only the history is what the receiver lacks; a sender of version 3 gets this receiver's
/// preamble, which tells it the same, and the receiver goes on waiting for its sender,
/// having said who it dropped.
#[test]
fn a_peer_of_the_protocol_before_compression_is_refused_clearly() {
    let dir = Scratch::new("compress-version");
    let key = make_key(&dir, "k");
    // A receiver of version `answer`: what the sender said first, and what it said after.
    let older = |answer: &'static [u8; 8], args: &[&str]| {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let to = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        let old = thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut preamble = [0u8; 8];
            socket.read_exact(&mut preamble).unwrap();
            socket.write_all(answer).unwrap();
            socket.write_all(&[0, 0]).unwrap();
            preamble
        });
        let mut sending =
            sender("auto", &to, &[&["--key-file", key.as_str()], args].concat(), None);
        drop(sending.stdin.take());
        let (status, said) = ended(sending);
        assert_eq!(status.code(), Some(6), "{said}");
        (old.join().unwrap(), said)
    };
    let (spoken, said) = older(b"accelN3A", &["--compress", "auto"]);
    assert!(said.contains("the receiver speaks another version of accel's protocol"), "{said}");
    assert_eq!(&spoken[..7], b"accelN6", "a compressing sender's version");
    for (streams, version) in [("1", b"accelN6"), ("4", b"accelN7")] {
        let args = ["--compress", "zstd:3", "--streams", streams];
        let (spoken, said) = older(b"accelN4A", &args);
        assert_eq!(&spoken[..7], version, "{said}");
        assert!(said.contains("the receiver does not take this --compress"), "{said}");
        assert!(said.contains("--compress none talks to it"), "{said}");
    }
    let (spoken, said) = older(b"accelN4A", &["--compress", "none"]);
    assert_eq!(&spoken[..7], b"accelN4", "without compression, version 4: {said}");
    // A sender of version 3, to this receiver.
    let mut receiver = Receiver::start("auto", "127.0.0.1", &["--key-file", &key], None);
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", receiver.port)).unwrap();
    let mut hello = b"accelN3A".to_vec();
    hello.extend_from_slice(&48u16.to_be_bytes());
    hello.extend_from_slice(&[7u8; 48]);
    socket.write_all(&hello).unwrap();
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).unwrap();
    assert_eq!(answer.get(..7), Some(&b"accelN4"[..]), "answer: {answer:?}");
    assert_eq!(answer.get(8..), Some(&[0u8, 0][..]), "an empty answer: {answer:?}");
    let line = receiver.said.line_with("another version of accel's protocol");
    assert!(line.contains("still waiting for the sender"), "{line}");
    assert!(receiver.child.try_wait().unwrap().is_none(), "the receiver goes on waiting");
}

/// `--compress auto` to a receiver of wire version 5 (the debug builds' `ACCEL_TEST_WIRE`
/// hook: it answers a compressing sender's version 6 or 7 as an accel from before the
/// compressed frames' history did, with its own preamble, and drops the connection) is no
/// failure: the sender says once that it sends uncompressed, dials again speaking the
/// version without compression, and the stream crosses whole (sha256 at both ends, byte for
/// byte), none of it compressed in either end's `--json`; over one connection and over two
/// (`--streams 2`, whose further connection speaks the same version as the first). The
/// receiver dropped the one connection it could not take.
#[test]
fn auto_sends_uncompressed_to_an_older_receiver() {
    let dir = Scratch::new("compress-older");
    let key = make_key(&dir, "k");
    let data = prose(4 << 20, 35);
    let digest: String = sha2::Sha256::digest(&data).iter().map(|b| format!("{b:02x}")).collect();
    for streams in ["1", "2"] {
        let context = format!("--streams {streams}");
        let received_json = dir.path(&format!("receiver-{streams}.json"));
        let received_arg = format!("--json={}", received_json.display());
        let mut receiver = Receiver::with_env(
            "auto",
            "127.0.0.1:0",
            &["--key-file", &key, "--hash", "sha256", &received_arg],
            None,
            &[("ACCEL_TEST_WIRE", "5")],
        );
        let output = receiver.output();
        let to = format!("127.0.0.1:{}", receiver.port);
        let json = dir.path(&format!("sender-{streams}.json"));
        let json_arg = format!("--json={}", json.display());
        let args = ["--key-file", &key, "--compress", "auto", "--streams", streams, "--hash"];
        let mut child = sender("auto", &to, &[&args[..], &["sha256", &json_arg]].concat(), None);
        let stdin = child.stdin.take().unwrap();
        let fed = data.clone();
        let feeding = thread::spawn(move || feed(stdin, &fed, 1 << 20));
        let (status, said) = ended(child);
        assert!(status.success(), "{context}: sender: {status}: {said}");
        feeding.join().unwrap().expect("the sender took every byte");
        let notice = format!(
            "accel: {to}: the receiver speaks an older version of accel's protocol, without \
             compression; sending uncompressed"
        );
        assert_eq!(said.lines().filter(|line| *line == notice).count(), 1, "{context}: {said}");
        let written = output.join().unwrap();
        let (status, heard) = receiver.end();
        assert!(status.success(), "{context}: receiver: {status}: {heard}");
        assert_same(&written, &data, &context);
        let dropped = heard.lines().filter(|line| line.contains("another version of accel's"));
        assert_eq!(dropped.count(), 1, "{context}: {heard}");
        let (sent, received) = (summary_in(&json, &context), summary_in(&received_json, &context));
        for (side, summary) in [("sender", &sent), ("receiver", &received)] {
            assert_eq!(summary["hashes"][0]["hex"], digest, "{context}: the {side}'s: {summary}");
        }
        let wire = &sent["outputs"][0]["wire"];
        assert_eq!(wire["compressing"], false, "{context}: {wire}");
        assert_eq!(wire["levels"], serde_json::json!([]), "{context}: {wire}");
        let (bytes, stream) =
            (number(wire, "bytes", &context), number(wire, "stream_bytes", &context));
        assert!(stream == data.len() as u64 && bytes > stream, "{context}: {wire}");
        let wire = &received["input_wire"];
        assert!(wire.is_null() || wire["compressing"] == false, "{context}: {wire}");
    }
}

/// A level asked for (`zstd:3`) is not changed behind the user's back: to the same older
/// receiver it stays a failure (status 6, nothing sent), with the words that name
/// `--compress none`, over one connection and over two; the receiver goes on waiting.
#[test]
fn a_level_asked_for_stays_refused_by_an_older_receiver() {
    let dir = Scratch::new("compress-older-level");
    let key = make_key(&dir, "k");
    for streams in ["1", "2"] {
        let mut receiver = Receiver::with_env(
            "auto",
            "127.0.0.1:0",
            &["--key-file", &key],
            None,
            &[("ACCEL_TEST_WIRE", "5")],
        );
        let output = receiver.output();
        let to = format!("127.0.0.1:{}", receiver.port);
        let args = ["--key-file", &key, "--compress", "zstd:3", "--streams", streams];
        let mut child = sender("auto", &to, &args, None);
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(&prose(1 << 20, 36));
        drop(stdin);
        let (status, said) = ended(child);
        assert_eq!(status.code(), Some(6), "--streams {streams}: {said}");
        assert!(said.contains("the receiver does not take this --compress"), "{said}");
        assert!(said.contains("--compress none talks to it; nothing was sent"), "{said}");
        assert!(!said.contains("sending uncompressed"), "{said}");
        receiver.said.line_with("another version of accel's protocol");
        assert!(receiver.child.try_wait().unwrap().is_none(), "the receiver goes on waiting");
        let _ = receiver.child.kill();
        assert!(output.join().unwrap().is_empty(), "--streams {streams}: nothing written");
    }
}
