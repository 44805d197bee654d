//! The handshakes of a stream over several connections (wire version 5): a further
//! connection is taken only when it proves the key and names the stream (a receiver of
//! version 4's refusal is tests/streams.rs's, through the program).

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::*;
use crate::log::Log;
use crate::net::key::Key;
use crate::net::socket;
use crate::net::wire::{Hello, Join};
use crate::stop::Stop;

/// Connects to `to` and handshakes as connection `index` of 4 of `stream`, with `key`.
fn join(to: SocketAddr, key: &Key, stream: [u8; 16], index: u8) -> Result<(), Failure> {
    let hello = Hello { stream, offset: 0, resuming: false };
    let opening = Opening::joining(key, hello, Some(Join { index, streams: 4, window: 0 }), false);
    let stop = Stop::default();
    let deadline = Instant::now() + Duration::from_secs(30);
    let socket = socket::connect(to, None, &stop, deadline).expect("loopback");
    initiate(opening, socket, &stop, deadline, None).map(|channel| {
        assert_eq!(channel.joined().map(|join| join.window), Some(1 << 22), "the window");
    })
}

/// Issue 36: once a stream over several connections has begun, a stranger that connects
/// as one more of its connections, without the key, is dropped, and so is a sender of
/// another stream; the stream's own further connection is taken, with its place.
#[test]
fn a_stranger_joining_a_stream_is_dropped() {
    let listener = socket::listen("127.0.0.1:0".parse().unwrap(), false, None).unwrap();
    let to = socket::local_address(&listener).unwrap();
    let (key, stranger_key) = (Arc::new(Key::generate().unwrap()), Key::generate().unwrap());
    let stream = new_stream().unwrap();
    let mut dropped = 0;
    let log = Log::new(true, false);
    let terms = Terms { stream: Some(stream), window: 1 << 22 };
    let them = {
        let key = Arc::clone(&key);
        thread::spawn(move || {
            // In turn, so that the receiver's verdicts come in this order.
            let stranger = join(to, &stranger_key, stream, 1);
            let other = join(to, &key, new_stream().unwrap(), 1);
            let ours = join(to, &key, stream, 2);
            (stranger, other, ours)
        })
    };
    let deadline = Some(Instant::now() + Duration::from_secs(60));
    let (_, taken) = accept_sender(
        std::slice::from_ref(&listener),
        Some(&key),
        terms,
        deadline,
        &mut dropped,
        &log,
        &Stop::default(),
    )
    .expect("the stream's own connection");
    let taken = taken.expect("a session");
    assert_eq!(taken.stream(), stream);
    assert_eq!(taken.joined().map(|join| (join.index, join.streams)), Some((2, 4)));
    let (stranger, other, ours) = them.join().unwrap();
    assert_eq!(stranger, Err(Failure::WrongKey));
    assert_eq!(other, Err(Failure::Busy));
    assert_eq!(ours, Ok(()));
    assert_eq!(dropped, 2, "the stranger and the other stream's sender");
}

/// Issue 36: a further connection whose Hello comes before the first connection of its
/// stream has proved itself (the sender dials it the moment the first is answered) waits
/// in the lobby unanswered, and is taken once the lobby knows the stream, rather than
/// refused as a stream this receiver never had.
#[test]
fn a_further_connection_before_the_first_is_proved_waits_for_it() {
    let listener = socket::listen("127.0.0.1:0".parse().unwrap(), false, None).unwrap();
    let to = socket::local_address(&listener).unwrap();
    let key = Arc::new(Key::generate().unwrap());
    let stream = new_stream().unwrap();
    let (mut dropped, log, stop) = (0, Log::new(true, false), Stop::default());
    let terms = Terms { stream: None, window: 1 << 22 };
    let mut lobby =
        Lobby::open(std::slice::from_ref(&listener), &key, terms, &mut dropped, &log, &stop);
    let further = {
        let key = Arc::clone(&key);
        thread::spawn(move || join(to, &key, stream, 1))
    };
    // The listener defers a connection until it has sent something: readable, the further
    // connection's Hello is in, before the first connection even connects.
    let mut ready = [rustix::event::PollFd::new(&listener, rustix::event::PollFlags::IN)];
    let generous = rustix::event::Timespec { tv_sec: 60, tv_nsec: 0 };
    assert_eq!(rustix::event::poll(&mut ready, Some(&generous)).unwrap(), 1);
    let first = {
        let key = Arc::clone(&key);
        thread::spawn(move || join(to, &key, stream, 0))
    };
    let deadline = Some(Instant::now() + Duration::from_secs(60));
    let (_, taken) = lobby.next_sender(deadline).expect("the first connection");
    assert_eq!(taken.joined().map(|join| join.index), Some(0));
    lobby.expect(Terms { stream: Some(stream), window: 1 << 22 });
    let (_, taken) = lobby.next_sender(deadline).expect("the further connection");
    assert_eq!(taken.joined().map(|join| join.index), Some(1));
    drop(lobby);
    assert_eq!(first.join().unwrap(), Ok(()));
    assert_eq!(further.join().unwrap(), Ok(()));
    assert_eq!(dropped, 0);
}
