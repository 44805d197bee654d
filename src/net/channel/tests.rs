//! The secure channel's tests: both sides of a session over a loopback connection.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, FromRawFd};
use std::thread;

use super::*;
use crate::net::compress::{Compress, Compressor, MOST_PACKED};
use crate::net::key::Key;
use crate::net::socket;
use crate::net::wire::Cipher;

/// A session's two ends, as a handshake would leave them, over `sender` and `receiver`.
pub(crate) fn session(cipher: Cipher, sender: Socket, receiver: Socket) -> (Channel, Channel) {
    let key = Key::generate().unwrap();
    let mut initiator = wire::handshake(cipher, &key, true);
    let mut responder = wire::handshake(cipher, &key, false);
    let (mut message, mut payload) = (vec![0u8; 1024], vec![0u8; 1024]);
    let n = initiator.write_message(&[], &mut message).unwrap();
    responder.read_message(&message[..n], &mut payload).unwrap();
    let n = responder.write_message(&[], &mut message).unwrap();
    initiator.read_message(&message[..n], &mut payload).unwrap();
    let ends = |socket, noise: snow::HandshakeState| {
        Channel::new(Arc::new(socket), noise.into_transport_mode().unwrap(), &[])
    };
    (ends(sender, initiator), ends(receiver, responder))
}

/// Everything the receiver gets until the end, reading into `size`-byte buffers.
fn receive_all(receiver: &mut Channel, size: usize) -> io::Result<Vec<u8>> {
    let (mut got, mut buf) = (Vec::new(), vec![0u8; size]);
    loop {
        match receiver.receive(&mut buf, &Stop::default())? {
            0 => return Ok(got),
            n => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Sends `data` in pieces of `piece`, then ends the stream; what `finish` said.
fn send_all(sender: Channel, data: Vec<u8>, piece: usize) -> io::Result<()> {
    send_packed(sender, data, piece, &mut Compressor::none())
}

/// As [`send_all`], each frame packed by `compressor`.
fn send_packed(
    mut sender: Channel,
    data: Vec<u8>,
    piece: usize,
    compressor: &mut Compressor,
) -> io::Result<()> {
    for mut chunk in data.chunks(piece) {
        while !chunk.is_empty() {
            let n = sender.send(chunk, &Stop::default(), compressor)?;
            chunk = &chunk[n..];
        }
    }
    sender.end_stream(&Stop::default(), &mut |_, _| {})
}

/// Text, then random bytes, then text again: what compresses and what does not, in turn.
fn mixed(len: usize) -> Vec<u8> {
    let words = b"accel: a pipeline buffer; zfs send | accel --to host | zfs receive\n";
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..len)
        .map(|i| {
            if (len / 3..2 * len / 3).contains(&i) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            } else {
                words[i % words.len()]
            }
        })
        .collect()
}

#[test]
fn compressed_frames_arrive_as_the_stream_they_were() {
    // Reading into buffers smaller than a frame (through the scratch buffer) and larger.
    for (setting, size) in [
        (Compress::Zstd(1), 1 << 20),
        (Compress::Zstd(-5), 1000),
        (Compress::Zstd(3), 7),
        (Compress::Auto, 70_000),
        (Compress::None, 1 << 20),
    ] {
        let (near, far) = socket::pair();
        let (sender, mut receiver) = session(Cipher::AesGcm, near, far);
        let sent = mixed(3_000_017);
        let expected = sent.clone();
        let sending = thread::spawn(move || {
            let mut compressor = Compressor::new(setting, None);
            send_packed(sender, sent, 200_000, &mut compressor).map(|()| compressor.wire())
        });
        let got = receive_all(&mut receiver, size).unwrap();
        assert!(got == expected, "{setting}: the bytes differ");
        receiver.acknowledge_end().unwrap();
        let wire = sending.join().unwrap().expect("the receiver confirmed the end");
        assert_eq!(wire.stream, expected.len() as u64, "{setting}");
        if setting == Compress::Auto {
            // It starts at level 1 and may leave it on loopback: never more than as it is.
            assert!(wire.bytes <= wire.stream + wire.stream / 200, "{setting}: {wire:?}");
        } else if setting == Compress::None {
            assert!(wire.bytes > wire.stream, "{setting}: {wire:?}");
        } else {
            // A third is random: at best a little over a third is sent.
            assert!(wire.bytes < wire.stream / 2, "{setting}: {wire:?}");
            assert!(wire.stored >= 10, "{setting}: the random third went as it was: {wire:?}");
        }
    }
}

#[test]
fn a_version_4_senders_frames_each_a_whole_zstd_frame_are_read() {
    // A sender of version 4 compressed each frame on its own, a whole zstd frame in a Zstd
    // frame: each starts the receiver's context afresh, and is read as before. A ZstdMore
    // frame with no Zstd frame before it in the session is refused.
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    let (stop, sent) = (Stop::default(), mixed(200_000));
    let mut at = 0;
    for piece in sent.chunks(50_000) {
        let whole = zstd::bulk::compress(piece, 3).unwrap();
        sender.seal(Kind::Zstd, at, &whole);
        at += piece.len() as u64;
    }
    sender.flush(&stop, None).unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 70_000];
    while got.len() < sent.len() {
        let n = receiver.receive(&mut buf, &stop).unwrap();
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got == sent, "the bytes differ");
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    let whole = zstd::bulk::compress(&sent[..1000], 3).unwrap();
    sender.seal(Kind::ZstdMore, 0, &whole);
    sender.flush(&stop, None).unwrap();
    let refused = receiver.receive(&mut buf, &stop).unwrap_err();
    assert!(refused.to_string().contains("a zstd frame that did not start"), "{refused}");
}

fn data(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn a_stream_arrives_whole_and_its_end_is_confirmed() {
    for (cipher, piece, size) in
        [(Cipher::AesGcm, 300_000, 1 << 20), (Cipher::ChaChaPoly, 70_000, 1000)]
    {
        let (near, far) = socket::pair();
        let (sender, mut receiver) = session(cipher, near, far);
        let sent = data(1_000_003);
        let expected = sent.clone();
        let sending = thread::spawn(move || send_all(sender, sent, piece));
        let got = receive_all(&mut receiver, size).unwrap();
        assert_eq!(got.len(), expected.len(), "{cipher:?}");
        assert!(got == expected, "{cipher:?}: the bytes differ");
        receiver.acknowledge_end().unwrap();
        sending.join().unwrap().expect("the receiver confirmed the end");
    }
}

#[test]
fn a_message_that_does_not_fit_after_some_bytes_waits_for_the_next_buffer() {
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    let (stop, sent) = (Stop::default(), data(3000));
    // Three frames of 1000 bytes, far less than a loopback socket holds.
    for piece in sent.chunks(1000) {
        assert_eq!(sender.send(piece, &stop, &mut Compressor::none()).unwrap(), 1000);
    }
    let wire = 3 * (2 + 1000 + wire::TAG + 2 + SEALED_TRAILER);
    while receiver.unread.len() < wire {
        receiver.read_sealed(&stop, None).unwrap();
    }
    // Room for two and a half: the third is not opened into the scratch buffer and copied
    // out in part, but opened whole into the next buffer.
    let mut buf = vec![0u8; 2500];
    assert_eq!(receiver.receive(&mut buf, &stop).unwrap(), 2000);
    assert!(receiver.pending.is_empty());
    assert_eq!(buf[..2000], sent[..2000]);
    assert_eq!(receiver.receive(&mut buf, &stop).unwrap(), 1000);
    assert_eq!(buf[..1000], sent[2000..]);
    // A buffer too small for a whole message still gets its bytes, through the scratch one.
    sender.send(&sent[..1000], &stop, &mut Compressor::none()).unwrap();
    assert_eq!(receiver.receive(&mut buf[..300], &stop).unwrap(), 300);
    assert_eq!(receiver.receive(&mut buf, &stop).unwrap(), 700);
}

#[test]
fn the_short_frame_at_the_end_of_a_piece_goes_with_its_batch() {
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    // What the backlog hands out: 1 MiB, 16 full payloads and 272 bytes.
    let piece = data(1 << 20);
    assert_eq!(piece.len(), 16 * MAX_PAYLOAD + 272);
    let expected = piece.clone();
    let receiving = thread::spawn(move || {
        let got = receive_all(&mut receiver, 1 << 20).unwrap();
        receiver.acknowledge_end().unwrap();
        got
    });
    let taken = sender.send(&piece, &Stop::default(), &mut Compressor::none()).unwrap();
    assert_eq!(taken, piece.len(), "one batch takes the whole piece");
    // A larger piece is still cut after a batch's worth of frames.
    let more = data(20 * MAX_PAYLOAD);
    let taken = sender.send(&more, &Stop::default(), &mut Compressor::none()).unwrap();
    assert_eq!(taken, 16 * MAX_PAYLOAD);
    let rest = more[taken..].to_vec();
    let mut sent = expected;
    sent.extend_from_slice(&more);
    let ending = thread::spawn(move || send_all(sender, rest, 1 << 20));
    let got = receiving.join().unwrap();
    assert!(got == sent, "the bytes differ");
    ending.join().unwrap().expect("the receiver confirmed the end");
}

#[test]
fn keys_change_in_step_and_a_side_that_does_not_follow_fails() {
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    sender.rekey_every = 3;
    receiver.rekey_every = 3;
    let sent = data(200_000);
    let expected = sent.clone();
    let sending = thread::spawn(move || send_all(sender, sent, 5000));
    assert!(receive_all(&mut receiver, 4096).unwrap() == expected);
    receiver.acknowledge_end().unwrap();
    sending.join().unwrap().unwrap();

    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    sender.rekey_every = 3;
    let sending = thread::spawn(move || send_all(sender, data(200_000), 5000));
    let error = receive_all(&mut receiver, 4096).unwrap_err();
    assert!(error.to_string().contains("failed authentication"), "{error}");
    drop(receiver);
    assert!(sending.join().unwrap().is_err());
}

#[test]
fn the_sender_hears_what_was_delivered_and_the_end_only_once_acknowledged() {
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::ChaChaPoly, near, far);
    let stop = Stop::default();
    // Less than a loopback socket holds: it is sent before anyone reads.
    assert_eq!(sender.send(&data(20_000), &stop, &mut Compressor::none()).unwrap(), 20_000);
    let mut got = vec![0u8; 20_000];
    let mut at = 0;
    while at < got.len() {
        at += receiver.receive(&mut got[at..], &stop).unwrap();
    }
    // Before the End, the Ack cannot be sent; a delivery count can.
    assert!(receiver.acknowledge_end().is_err());
    receiver.deliver(8_000).unwrap();
    let ended = thread::spawn(move || {
        let mut heard = Vec::new();
        let result = sender.end_stream(&stop, &mut |count, awaiting| heard.push((count, awaiting)));
        (result, heard, sender.confirmed())
    });
    assert_eq!(receiver.receive(&mut [0u8; 16], &Stop::default()).unwrap(), 0, "the End");
    receiver.deliver(20_000).unwrap();
    receiver.acknowledge_end().unwrap();
    let (result, heard, confirmed) = ended.join().unwrap();
    result.expect("the end confirmed");
    assert_eq!(confirmed, 20_000);
    assert_eq!(heard.last(), Some(&(20_000, false)), "{heard:?}");
    assert!(heard.contains(&(8_000, true)), "the first delivery: {heard:?}");
    assert!(heard.contains(&(20_000, true)), "the delivery before the Ack: {heard:?}");
    assert!(heard.windows(2).all(|w| w[0].0 <= w[1].0), "{heard:?}");
}

#[test]
fn the_end_unconfirmed_is_an_error() {
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    let stop = Stop::default();
    sender.send(&data(1000), &stop, &mut Compressor::none()).unwrap();
    let ended = thread::spawn(move || sender.end_stream(&Stop::default(), &mut |_, _| {}));
    assert_eq!(receive_all(&mut receiver, 4096).unwrap().len(), 1000);
    drop(receiver);
    let error = ended.join().unwrap().unwrap_err();
    assert!(error.to_string().contains("without confirming the end of the stream"), "{error}");
}

#[test]
fn a_stream_cut_short_is_not_an_end() {
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    assert_eq!(
        sender.send(&data(100_000), &Stop::default(), &mut Compressor::none()).unwrap(),
        100_000
    );
    drop(sender);
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0;
    let error = loop {
        match receiver.receive(&mut buf, &Stop::default()) {
            Ok(n) => got += n,
            Err(error) => break error,
        }
    };
    assert_eq!(got, 100_000, "what arrived is passed on");
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
    assert!(error.to_string().ends_with("ended before the sender's end-of-stream mark"));
}

/// Issue 20: a new session goes on where the receiver says, which must be a byte the
/// sender still holds; the stream's end carries over to it.
#[test]
fn a_new_session_goes_on_where_the_receiver_says() {
    let stop = Stop::default();
    let (near, far) = socket::pair();
    let (mut sender, mut receiver_again) = session(Cipher::AesGcm, near, far);
    receiver_again.resume_from(7_000, false).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    assert_eq!(sender.await_resume(5_000, 9_000, &stop, deadline).unwrap(), 7_000);
    assert_eq!((sender.sent(), sender.confirmed()), (7_000, 5_000));
    // Data goes on at 7000, as the receiver expects.
    assert_eq!(sender.send(&data(100), &stop, &mut Compressor::none()).unwrap(), 100);
    let mut got = [0u8; 100];
    assert_eq!(receiver_again.receive(&mut got, &stop).unwrap(), 100);
    assert_eq!(receiver_again.handed_out(), 7_100);
    // A Resume outside what the sender holds is refused.
    let (near, far) = socket::pair();
    let (mut sender, mut stranger) = session(Cipher::ChaChaPoly, near, far);
    stranger.resume_from(12_000, true).unwrap();
    let error = sender.await_resume(5_000, 9_000, &stop, deadline).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
    // The end carried over: the Ack may be sent without a new End.
    assert!(stranger.acknowledge_end().is_ok());
}

/// Issue 17, item 9: the sender's reason for stopping reaches the receiver's terminal
/// with its control characters shown as `?`: no escape sequence of a peer's is printed.
#[test]
fn an_abort_reason_is_printed_without_its_escapes() {
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    sender.abort("\x1b]0;owned\x07 \x1b[2J\rgone\nfor good");
    let error = receiver.receive(&mut [0u8; 4096], &Stop::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "the sender stopped after 0 bytes: ?]0;owned? ?[2J?gone?for good"
    );
}

#[test]
fn altered_bytes_are_caught() {
    // sender -> (this test, which flips one bit) -> receiver
    let (near, middle_in) = socket::pair();
    let (middle_out, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    sender.send(&data(1000), &Stop::default(), &mut Compressor::none()).unwrap();
    // SAFETY: borrowed for the test's own reads and writes; the Sockets keep them open.
    let mut tap = unsafe { TcpStream::from_raw_fd(middle_in.fd().as_raw_fd()) };
    let mut out = unsafe { TcpStream::from_raw_fd(middle_out.fd().as_raw_fd()) };
    tap.set_nonblocking(false).unwrap();
    let mut sealed = vec![0u8; 2 + 1000 + 16 + 2 + 25];
    tap.read_exact(&mut sealed).unwrap();
    sealed[500] ^= 1;
    out.write_all(&sealed).unwrap();
    std::mem::forget((tap, out));
    let error = receiver.receive(&mut [0u8; 4096], &Stop::default()).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::InvalidData);
    assert!(error.to_string().contains("failed authentication"), "{error}");
}

/// Issue 36: units of several connections go in one batch, each at its own offset, in
/// whatever order the dispatcher gave them; the receiver opens each where it belongs, and
/// the stream's first unit comes as two frames, the first short (FIRST_PAYLOAD). The
/// Delivered frame's credit reaches the sender, and a credit older than one heard does
/// not take it back.
#[test]
fn units_in_one_batch_land_where_each_belongs() {
    let (near, far) = socket::pair();
    let (mut sender, mut receiver) = session(Cipher::AesGcm, near, far);
    receiver.join(wire::Join { index: 0, streams: 2, window: 0 });
    let data: Vec<u8> = (0..3 * MOST_PACKED).map(|i| (i * 7 + i / 251) as u8).collect();
    let unit = |n: usize| (n as u64 * MOST_PACKED as u64, &data[n * MOST_PACKED..][..MOST_PACKED]);
    let units = [unit(2), unit(0), unit(1)];
    sender.send_units(&units, &Stop::default(), &mut Compressor::none()).unwrap();
    let mut got = vec![0u8; data.len()];
    let mut frames = Vec::new();
    let mut buf = vec![0u8; MAX_MESSAGE];
    let until = Some(std::time::Instant::now() + std::time::Duration::from_secs(30));
    while frames.iter().map(|(_, len)| len).sum::<usize>() < data.len() {
        match receiver.next_scattered(&mut buf).unwrap() {
            Some(Scattered::Data { at, len }) => {
                got[at as usize..][..len].copy_from_slice(&buf[..len]);
                frames.push((at, len));
            }
            Some(other) => panic!("data, not {other:?}"),
            None => {
                let socket = Arc::clone(receiver.socket());
                crate::stop::wait_for(socket.fd(), PollFlags::IN, &Stop::default(), until)
                    .expect("the batch, within 30 s");
            }
        }
    }
    let first = send::FIRST_PAYLOAD as u64;
    let at: Vec<u64> = frames.iter().map(|&(at, _)| at).collect();
    assert_eq!(at, [2 * MOST_PACKED as u64, 0, first, MOST_PACKED as u64], "as sent");
    assert!(got == data, "each unit where it belongs");
    let credit = wire::Credit { received: 100, limit: 200 };
    receiver.deliver_granting(50, credit).unwrap();
    receiver.deliver_granting(60, wire::Credit { received: 90, limit: 300 }).unwrap();
    let socket = Arc::clone(sender.socket());
    while sender.confirmed() < 60 {
        crate::stop::wait_for(socket.fd(), PollFlags::IN, &Stop::default(), until)
            .expect("the counts, within 30 s");
        sender.take_confirmations_now().unwrap();
    }
    assert_eq!(sender.credit(), Some(wire::Credit { received: 100, limit: 300 }));
}

/// A stream whose every frame holds this line many times over: on the wire in the clear, it
/// is there to be found.
const PLAIN: &[u8] = b"the plaintext a direct connection must never show\n";

/// What the sender of a session over `sender` writes for 300 KB of [`PLAIN`], as read raw
/// at `far`, the other end of its socket; and the session's receiving end, over `receiver`.
fn on_the_wire(sender: Socket, far: Socket, receiver: Socket) -> (Vec<u8>, Channel) {
    let (mut sender, receiver) = session(Cipher::AesGcm, sender, receiver);
    // Read as it is written: a socket's buffer may hold less than the stream.
    let reading = thread::spawn(move || {
        let (mut wire, mut buf) = (Vec::new(), vec![0u8; 1 << 16]);
        loop {
            match far.read(&mut buf, &Stop::default(), None).unwrap() {
                0 => return wire,
                n => wire.extend_from_slice(&buf[..n]),
            }
        }
    });
    let data = PLAIN.repeat(300_000 / PLAIN.len());
    let mut piece = &data[..];
    while !piece.is_empty() {
        let n = sender.send(piece, &Stop::default(), &mut Compressor::none()).unwrap();
        piece = &piece[n..];
    }
    drop(sender);
    (reading.join().unwrap(), receiver)
}

fn shows(wire: &[u8], plain: &[u8]) -> bool {
    wire.windows(plain.len()).any(|window| window == plain)
}

#[test]
fn payloads_go_in_the_clear_only_on_a_socket_carried_by_ssh() {
    // A TCP connection: sealed, whatever the session is.
    let (near, far) = socket::pair();
    let (wire, _) = on_the_wire(near, far, socket::pair().0);
    assert!(wire.len() > 300_000 - 300_000 % PLAIN.len(), "{} bytes", wire.len());
    assert!(!shows(&wire, PLAIN), "a TCP connection carried the stream in the clear");
    // Carried by ssh: the same frames, payloads as they are (so the check above can fail).
    let (near, far) = socket::carried_pair();
    let (wire, _) = on_the_wire(near, far, socket::carried_pair().0);
    assert!(shows(&wire, PLAIN), "through ssh, the payloads are not sealed again");
}

#[test]
fn clear_frames_on_a_tcp_connection_are_refused_not_read() {
    // What a sender carried by ssh writes, arriving at the same session's receiver on a TCP
    // connection (a peer that sends payloads unsealed there, or a bug): the receiver fails
    // (authentication), it never hands the bytes out.
    let (near, far) = socket::carried_pair();
    let (writer, reader) = socket::pair();
    let (clear, mut receiver) = on_the_wire(near, far, reader);
    let writing = thread::spawn(move || {
        let _ = writer.write_all(&clear, &Stop::default(), None);
        writer.shut_down();
    });
    let got = receive_all(&mut receiver, 1 << 20);
    writing.join().unwrap();
    let error = got.expect_err("clear frames read on a TCP connection");
    assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
}
#[test]
fn a_stream_carried_by_ssh_arrives_whole_and_confirmed() {
    // A socketpair (the local end's), and pipes read and written directly (the remote's).
    let pairs = [socket::carried_pair as fn() -> _, socket::carried_pipe_pair];
    for (size, pair) in [1 << 20, 1000, 7].into_iter().flat_map(|size| pairs.map(|p| (size, p))) {
        let (near, far) = pair();
        let (sender, mut receiver) = session(Cipher::AesGcm, near, far);
        let sent = mixed(1_000_003);
        let expected = sent.clone();
        let sending = thread::spawn(move || send_all(sender, sent, 100_000));
        let got = receive_all(&mut receiver, size).unwrap();
        assert!(got == expected, "reading {size} at a time: the bytes differ");
        receiver.acknowledge_end().unwrap();
        sending.join().unwrap().expect("the receiver confirmed the end");
    }
}
