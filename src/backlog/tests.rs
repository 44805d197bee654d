//! The backlog on its own: order, space, memory, and readers that go at their own pace.

use std::thread;
use std::time::{Duration, Instant};

use super::producer::MemorySpace;
use super::segments::Store;
use super::*;

fn backlog_for(capacity: usize, readers: usize) -> (Producer, Vec<Reader>) {
    gated(capacity, readers, Gates::default())
}

fn gated(capacity: usize, readers: usize, gates: Gates) -> (Producer, Vec<Reader>) {
    let meter = Arc::new(Meter::new(capacity as u64, readers));
    backlog(capacity, readers, gates, None, meter, Arc::new(Log::default())).unwrap()
}

fn one(capacity: usize) -> (Producer, Reader) {
    let (producer, mut readers) = backlog_for(capacity, 1);
    (producer, readers.pop().unwrap())
}

fn page() -> usize {
    rustix::param::page_size()
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// The memory the next reservation gives (these backlogs have no spill).
fn memory_space(producer: &mut Producer) -> MemorySpace<'_> {
    match producer.reserve().unwrap().expect("a reader is there") {
        Space::Memory(space) => space,
        Space::Spill(_) => panic!("no spill in these tests"),
    }
}

/// Puts as much of `bytes` as one reservation takes; how much that was.
fn put(producer: &mut Producer, bytes: &[u8]) -> usize {
    let mut space = memory_space(producer);
    let n = bytes.len().min(space.as_mut_slice().len());
    space.as_mut_slice()[..n].copy_from_slice(&bytes[..n]);
    space.commit(n);
    n
}

/// Takes what one `next` offers; `None` at the end.
fn take(reader: &mut Reader) -> Option<Vec<u8>> {
    let bytes = match reader.front()? {
        Front::Memory(filled) => filled.as_slice().to_vec(),
        Front::Pipe(..) | Front::Spill(..) => panic!("only memory was put in"),
    };
    reader.consume(bytes.len());
    Some(bytes)
}

/// Waits (for another thread) until `condition` holds; a minute means a hang.
fn eventually(mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out");
        thread::sleep(Duration::from_millis(1));
    }
}

impl Shared {
    /// What the producer waits for right now, for tests that must know it waits.
    fn producer_waiting(&self) -> Option<Shortage> {
        self.lock().producer_waiting
    }

    /// Bytes of memory mapped for the backlog right now, spares included.
    fn mapped(&self) -> usize {
        let state = self.lock();
        let in_segments = state.segments.iter().map(|s| match &s.store {
            Store::Memory(chunk) => chunk.size(),
            Store::Owned { .. } | Store::Pipe(_) | Store::Spill { .. } => 0,
        });
        let kept = state.spare_chunks.iter().chain(&state.lent_chunks).map(|c| c.size());
        in_segments.chain(kept).sum()
    }
}

/// Whether bytes are ahead of `reader` now.
fn has_data_now(reader: &Reader) -> bool {
    let state = reader.shared.lock();
    state.cursors[reader.index].is_some_and(|cursor| cursor < state.produced)
}

#[test]
fn bytes_come_out_in_order() {
    let (mut producer, mut reader) = one(page() + 10);
    let data = pattern(page() + 20);
    assert_eq!(put(&mut producer, &data[..5]), 5);
    assert_eq!(put(&mut producer, &data[5..]), page() + 5, "capacity limits the space");
    assert_eq!(take(&mut reader).unwrap(), &data[..page() + 10]);
    drop(producer);
    assert_eq!(take(&mut reader), None, "the end, once everything was taken");
}

#[test]
fn a_tiny_buffer_holds_a_page() {
    for asked in [1, 100, page() - 1] {
        let (mut producer, _reader) = one(asked);
        assert_eq!(put(&mut producer, &pattern(2 * page())), page(), "-m {asked}");
    }
}

#[test]
fn every_read_is_offered_at_least_a_page() {
    // A chunk's tail shorter than a page is skipped, and a backlog with less than a page of
    // space waits: a packet-mode pipe would discard what does not fit in a read.
    let (mut producer, mut reader) = one(3 * page());
    put(&mut producer, &pattern(2 * page() + page() / 2));
    let shared = Arc::clone(&producer.shared);
    let input = thread::spawn(move || memory_space(&mut producer).len);
    eventually(|| shared.producer_waiting() == Some(Shortage::Space));
    assert_eq!(take(&mut reader).unwrap().len(), 2 * page() + page() / 2);
    assert!(input.join().unwrap() >= page());
}

#[test]
fn spans_chunks_and_gives_memory_back() {
    let (mut producer, mut reader) = one(3 * MAX_CHUNK);
    let block = vec![7u8; MAX_CHUNK];
    for _ in 0..3 {
        assert_eq!(put(&mut producer, &block), MAX_CHUNK);
    }
    let shared = Arc::clone(&producer.shared);
    assert_eq!(shared.mapped(), 3 * MAX_CHUNK);
    for _ in 0..3 {
        assert_eq!(take(&mut reader).unwrap().len(), MAX_CHUNK);
    }
    // Kept for reuse while the reader has not yet found the backlog at its end...
    assert_eq!(shared.mapped(), 3 * MAX_CHUNK);
    // ...then given back, bar the back chunk (input goes there next) and a spare.
    drop(producer);
    assert!(take(&mut reader).is_none());
    assert!(shared.mapped() <= (1 + SPARES_WHEN_DRAINED) * MAX_CHUNK, "{}", shared.mapped());
}

#[test]
fn rewinds_when_empty() {
    let (mut producer, mut reader) = one(1 << 20);
    put(&mut producer, b"abc");
    take(&mut reader);
    let space = memory_space(&mut producer);
    assert_eq!(space.offset, 0);
    assert_eq!(space.len, 1 << 20);
}

/// Takes what one `next` offers, lending its bytes; `None` at the end.
fn lend(reader: &mut Reader) -> Option<Lent> {
    let lent = match reader.front()? {
        Front::Memory(filled) => filled.lend(filled.as_slice().len()),
        Front::Pipe(..) | Front::Spill(..) => panic!("only memory was put in"),
    };
    reader.consume(lent.len());
    Some(lent)
}

#[test]
fn lent_bytes_stay_when_a_drained_backlog_rewinds() {
    let (mut producer, mut reader) = one(1 << 20);
    put(&mut producer, b"abc");
    let lent = lend(&mut reader).unwrap();
    // Drained, but the back chunk's bytes are lent: the producer writes into another.
    put(&mut producer, &[b'x'; 4096]);
    assert_eq!(lent.as_slice(), b"abc");
    assert_eq!(lent.cut(1..3).as_slice(), b"bc");
    assert_eq!(take(&mut reader).unwrap(), [b'x'; 4096]);
    // Given back, the chunk is a spare again, and the next drain rewinds as before.
    drop(lent);
    let space = memory_space(&mut producer);
    assert_eq!(space.offset, 0);
}

#[test]
fn lent_bytes_stay_when_every_reader_passed_their_chunk() {
    let (mut producer, mut reader) = one(2 * MAX_CHUNK);
    let data = pattern(3 * MAX_CHUNK);
    let mut lent = Vec::new();
    let mut at = 0;
    // Fill past a chunk, lend everything, and fill again: the chunks passed are not reused
    // while lent.
    while at < 2 * MAX_CHUNK {
        at += put(&mut producer, &data[at..2 * MAX_CHUNK]);
        while let Some(bytes) = lend_now(&mut reader) {
            lent.push(bytes);
        }
    }
    let shared = Arc::clone(&producer.shared);
    while at < data.len() {
        at += put(&mut producer, &data[at..]);
        while take_now(&mut reader).is_some() {}
    }
    let together: Vec<u8> = lent.iter().flat_map(|bytes| bytes.as_slice().to_vec()).collect();
    assert!(together == data[..2 * MAX_CHUNK], "lent bytes were written over");
    assert!(!shared.lock().lent_chunks.is_empty());
    // Given back, they are spares: no new chunk mapped for the next fill.
    drop(lent);
    let mapped = shared.mapped();
    for _ in 0..2 {
        put(&mut producer, &data[..MAX_CHUNK]);
        while take_now(&mut reader).is_some() {}
    }
    assert_eq!(shared.mapped(), mapped);
}

/// A buffer of `bytes` from `pool`, moved in whole from `from`.
fn owned(pool: &Arc<Pool>, bytes: &[u8], from: usize) -> Owned {
    let mut buffer = pool.take();
    buffer[..bytes.len()].copy_from_slice(bytes);
    let mut owned = Owned::new(buffer, 0..bytes.len());
    owned.advance(from);
    owned
}

#[test]
fn buffers_moved_in_come_out_in_order_with_bytes_read_between() {
    let (mut producer, mut readers) = backlog_for(1 << 20, 2);
    let pool = Pool::new(64, 4);
    put(&mut producer, b"ab");
    producer.adopt(owned(&pool, b"xcde", 1));
    put(&mut producer, b"fg");
    producer.adopt(owned(&pool, b"hij", 0));
    let shared = Arc::clone(&producer.shared);
    assert_eq!(shared.lock().held_memory, 10);
    drop(producer);
    // The first reader lends a buffer's bytes: they stay while lent.
    let mut out = Vec::new();
    let mut lent = Vec::new();
    while let Some(bytes) = lend(&mut readers[0]) {
        out.extend_from_slice(bytes.as_slice());
        lent.push(bytes);
    }
    assert_eq!(out, b"abcdefghij");
    lent.retain(|bytes| bytes.as_slice() == b"cde");
    // A block across them, then the second reader takes them one at a time.
    let mut block = [0; 9];
    assert_eq!(readers[1].copy_out(&mut block).unwrap(), 9);
    assert_eq!(&block, b"abcdefghi");
    let mut out = Vec::new();
    while let Some(bytes) = take(&mut readers[1]) {
        out.extend_from_slice(&bytes);
    }
    assert_eq!(out, b"abcdefghij");
    assert_eq!(shared.lock().held_memory, 0);
    // Every reader passed them: the buffer still lent is not back in its pool, nor the
    // back segment's (the producer's place), until the next bytes come.
    assert_eq!(pool.spares(), 0);
    assert_eq!(lent.len(), 1);
    drop(lent);
    assert_eq!(pool.spares(), 1);
}

/// What [`lend`] finds, when bytes are there.
fn lend_now(reader: &mut Reader) -> Option<Lent> {
    if has_data_now(reader) { lend(reader) } else { None }
}

/// What [`take`] finds, when bytes are there.
fn take_now(reader: &mut Reader) -> Option<Vec<u8>> {
    if has_data_now(reader) { take(reader) } else { None }
}

#[test]
fn a_full_backlog_holds_the_producer_until_the_slowest_reader_takes() {
    let (mut producer, mut readers) = backlog_for(page(), 2);
    let data = pattern(2 * page());
    put(&mut producer, &data[..page()]);
    let shared = Arc::clone(&producer.shared);
    let rest = data[page()..].to_vec();
    let input = thread::spawn(move || put(&mut producer, &rest));
    eventually(|| shared.producer_waiting() == Some(Shortage::Space));
    // The fast reader taking everything makes no space: the slow one still needs it.
    assert_eq!(take(&mut readers[0]).unwrap(), &data[..page()]);
    assert_eq!(shared.producer_waiting(), Some(Shortage::Space));
    assert_eq!(take(&mut readers[1]).unwrap(), &data[..page()]);
    assert_eq!(input.join().unwrap(), page());
    for reader in &mut readers {
        assert_eq!(take(reader).unwrap(), &data[page()..]);
    }
}

#[test]
fn a_fast_reader_is_never_paced_by_a_slow_one() {
    // Within the buffer, the fast reader takes everything before the slow one takes a byte.
    let (mut producer, mut readers) = backlog_for(8 << 20, 3);
    let data = pattern(6 << 20);
    let sent = data.clone();
    let input = thread::spawn(move || {
        let mut at = 0;
        while at < sent.len() {
            at += put(&mut producer, &sent[at..]);
        }
    });
    let mut fast = Vec::new();
    while fast.len() < data.len() {
        fast.extend(take(&mut readers[0]).unwrap());
    }
    input.join().unwrap();
    assert_eq!(fast, data);
    assert_eq!(take(&mut readers[0]), None);
    for slow in &mut readers[1..] {
        let mut got = Vec::new();
        while let Some(bytes) = take(slow) {
            got.extend(bytes);
        }
        assert_eq!(got, data);
    }
}

#[test]
fn memory_is_held_once_whatever_the_readers() {
    let (mut producer, readers) = backlog_for(3 * MAX_CHUNK, 4);
    for _ in 0..3 {
        put(&mut producer, &vec![1u8; MAX_CHUNK]);
    }
    assert_eq!(producer.shared.mapped(), 3 * MAX_CHUNK);
    drop(readers);
}

#[test]
fn a_reader_that_leaves_no_longer_holds_the_backlog() {
    let (mut producer, mut readers) = backlog_for(page(), 2);
    put(&mut producer, &pattern(page()));
    assert_eq!(take(&mut readers[0]).unwrap().len(), page());
    let shared = Arc::clone(&producer.shared);
    let input = thread::spawn(move || put(&mut producer, &pattern(page())));
    eventually(|| shared.producer_waiting() == Some(Shortage::Space));
    // The slow reader goes (its output failed): the fast one alone sets the space.
    readers.pop();
    assert_eq!(input.join().unwrap(), page());
    assert_eq!(take(&mut readers[0]).unwrap().len(), page());
}

#[test]
fn the_last_reader_leaving_releases_a_waiting_producer() {
    let (mut producer, reader) = one(1);
    put(&mut producer, &pattern(page()));
    let shared = Arc::clone(&producer.shared);
    let input = thread::spawn(move || producer.reserve().unwrap().is_none());
    // Left only once the producer is known to wait, so that leaving is what releases it.
    eventually(|| shared.producer_waiting() == Some(Shortage::Space));
    drop(reader);
    assert!(input.join().unwrap(), "with no reader left, the producer gets no space");
}

#[test]
fn the_end_comes_after_the_data() {
    let (mut producer, mut readers) = backlog_for(page(), 2);
    put(&mut producer, b"abc");
    drop(producer);
    for reader in &mut readers {
        assert_eq!(take(reader).unwrap(), b"abc");
        assert_eq!(take(reader), None);
    }
}

impl Shared {
    /// Readers waiting for data right now.
    fn readers_waiting(&self) -> usize {
        self.lock().readers_waiting
    }
}

#[test]
fn a_reader_waits_for_its_start_watermark_each_time_it_runs_empty() {
    let gates = Gates { start_at: 4 * page(), ..Gates::default() };
    let (mut producer, mut readers) = gated(8 * page(), 1, gates);
    let mut reader = readers.pop().unwrap();
    let shared = Arc::clone(&producer.shared);
    put(&mut producer, &pattern(2 * page()));
    let taker = thread::spawn(move || {
        let first = take(&mut reader).unwrap();
        (first, reader)
    });
    // Two pages are there, and still the reader waits for four.
    eventually(|| shared.readers_waiting() == 1);
    put(&mut producer, &pattern(2 * page()));
    let (first, mut reader) = taker.join().unwrap();
    assert_eq!(first.len(), 4 * page(), "all four pages at once, once they were there");
    // Run empty: the watermark holds it again, until the input ends.
    put(&mut producer, &pattern(page()));
    let taker = thread::spawn(move || take(&mut reader).map(|bytes| bytes.len()));
    eventually(|| shared.readers_waiting() == 1);
    drop(producer);
    assert_eq!(taker.join().unwrap(), Some(page()), "the end of input opens it");
}

#[test]
fn a_full_backlog_resumes_only_below_the_resume_watermark() {
    let gates = Gates { resume_at: Some(2 * page()), ..Gates::default() };
    let (mut producer, mut readers) = gated(8 * page(), 1, gates);
    put(&mut producer, &pattern(8 * page()));
    let shared = Arc::clone(&producer.shared);
    let input = thread::spawn(move || producer.wait_for_space().unwrap().space);
    eventually(|| shared.producer_waiting() == Some(Shortage::Space));
    // Taken a page at a time, as a slow consumer would: input resumes only at 2 pages held.
    while !input.is_finished() {
        // Once it has resumed, the input thread drops the producer: the input has ended, and
        // the reader may find that before the thread is seen finished.
        let Some(front) = readers[0].front() else { break };
        let Front::Memory(filled) = front else { unreachable!() };
        let n = filled.as_slice().len().min(page());
        readers[0].consume(n);
        thread::sleep(Duration::from_millis(1));
    }
    assert!(input.join().unwrap() >= 6 * page(), "resumed with the buffer down to two pages");
}

#[test]
fn input_blocks_are_offered_exactly() {
    let gates = Gates { read_block: Some(3 * page() + 1), ..Gates::default() };
    let (mut producer, _reader) = gated(16 * page(), 1, gates);
    for _ in 0..4 {
        let mut space = memory_space(&mut producer);
        assert_eq!(space.as_mut_slice().len(), 3 * page() + 1);
        space.commit(100);
    }
}

#[test]
fn blocks_are_assembled_across_chunks() {
    // A chunk holds 2 MiB: a block straddling two chunks is copied out whole.
    let (mut producer, mut reader) = one(4 * MAX_CHUNK);
    let data = pattern(MAX_CHUNK + 3000);
    let mut at = 0;
    while at < data.len() {
        at += put(&mut producer, &data[at..]);
    }
    reader.consume(MAX_CHUNK - 1000);
    let mut block = vec![0u8; 3000];
    assert!(
        matches!(reader.front_of_at_least(3000), Some(Front::Memory(f)) if f.as_slice().len() == 1000)
    );
    assert_eq!(reader.copy_out(&mut block).unwrap(), 3000);
    assert_eq!(block, &data[MAX_CHUNK - 1000..MAX_CHUNK + 2000]);
}

#[test]
fn coalescing_sleeps_only_while_more_can_come() {
    let (mut producer, reader) = one(4 * MAX_CHUNK);
    let short = Duration::from_millis(50);
    // Less than wanted, input open: the reader lets pieces coalesce until the time given.
    put(&mut producer, &pattern(100));
    let start = Instant::now();
    reader.coalesce(1000, start + short);
    assert!(start.elapsed() >= short, "returned after {:?}", start.elapsed());
    // Enough ahead already: no sleep (half a minute would show).
    put(&mut producer, &pattern(900));
    let start = Instant::now();
    reader.coalesce(1000, start + Duration::from_secs(30));
    assert!(start.elapsed() < Duration::from_secs(15));
    // Nothing more can come once the input has ended, however little is ahead.
    let (producer, reader) = one(4 * MAX_CHUNK);
    drop(producer);
    let start = Instant::now();
    reader.coalesce(1000, start + Duration::from_secs(30));
    assert!(start.elapsed() < Duration::from_secs(15));
}

/// A backlog of `capacity` bytes whose one reader keeps what it passes, filled: its
/// producer, its reader and that reader's Keep, and the bytes put in.
fn full_and_kept(capacity: usize) -> (Producer, Reader, Keep, Vec<u8>) {
    let (mut producer, reader) = one(capacity);
    let keep = reader.keep();
    let data = pattern(capacity);
    let mut put_in = 0;
    while put_in < data.len() {
        put_in += put(&mut producer, &data[put_in..]);
    }
    (producer, reader, keep, data)
}

/// Issue 20: a reader that keeps what it passed holds it against the buffer's size until its
/// Keep releases it, and can be sent back to any of it, or on past bytes delivered another
/// way; bytes taken again are not counted out twice; and it can be stopped while it waits.
#[test]
fn kept_bytes_are_held_until_released_and_can_be_taken_again() {
    let capacity = 4 * page();
    let (producer, mut reader, keep, data) = full_and_kept(capacity);
    let mut taken = Vec::new();
    while taken.len() < data.len() {
        taken.extend(take(&mut reader).unwrap());
    }
    assert!(taken == data);
    // Everything was taken, nothing released: the backlog is full.
    let meter = Arc::clone(&reader.shared.meter);
    assert_eq!(meter.snapshot().readers[0].bytes, capacity as u64);
    let held = || meter.snapshot().held_memory;
    assert_eq!(held(), capacity as u64, "kept bytes fill the buffer");
    // Back to a kept byte: the same bytes again, not counted out again.
    let back = page() as u64 + 5;
    keep.go_on_from(back).unwrap();
    let again = take(&mut reader).unwrap();
    assert!(again[..] == data[back as usize..back as usize + again.len()]);
    assert_eq!(meter.snapshot().readers[0].bytes, capacity as u64);
    // Released up to `back`: that much space, and nothing before it can be asked for.
    keep.release(back);
    assert_eq!(held(), capacity as u64 - back);
    assert!(keep.go_on_from(back - 1).is_err(), "released bytes are gone");
    assert!(keep.go_on_from(capacity as u64 + 1).is_err(), "never read");
    // On past bytes delivered another way: they count as taken.
    keep.go_on_from(capacity as u64).unwrap();
    keep.release(capacity as u64);
    drop(producer);
    assert!(take(&mut reader).is_none(), "nothing past the end");
    assert_eq!(held(), 0);
    // A reader stopped from another thread finds no more data, even while it waits.
    let (mut producer, mut reader) = one(capacity);
    let keep = reader.keep();
    put(&mut producer, b"line\n");
    assert_eq!(take(&mut reader).unwrap(), b"line\n");
    let waiting = thread::spawn(move || take(&mut reader));
    keep.stop_reader();
    assert!(waiting.join().unwrap().is_none());
    drop(producer);
}

/// A confirmation that comes while the reader still holds the piece it confirms (written,
/// not yet consumed: the receiver answers within microseconds on loopback) lets that piece go
/// once the reader passes it. It was cut to the reader's place and lost: a buffer one piece
/// fills (`-m 1M`) stayed full of confirmed bytes, the input waiting, until the next
/// confirmation, which nothing asked for (a heartbeat, 5 s, later).
#[test]
fn a_confirmation_of_a_piece_still_held_lets_it_go_once_passed() {
    let capacity = 4 * page();
    let (mut producer, mut reader, keep, _) = full_and_kept(capacity);
    let meter = Arc::clone(&reader.shared.meter);
    let held = || meter.snapshot().held_memory;
    let mut passed = 0;
    while passed < capacity {
        let len = match reader.front().expect("bytes ahead") {
            Front::Memory(filled) => filled.as_slice().len(),
            Front::Pipe(..) | Front::Spill(..) => panic!("only memory was put in"),
        };
        // The piece went; its confirmation comes before the reader passes it.
        keep.release((passed + len) as u64);
        assert_eq!(held(), (capacity - passed) as u64, "nothing let go before it is passed");
        reader.consume(len);
        passed += len;
        assert_eq!(held(), (capacity - passed) as u64, "let go once passed");
    }
    assert_eq!(held(), 0, "the buffer is free again for the input");
    assert_eq!(put(&mut producer, b"more"), 4);
}

/// The input pauses only while every reader has bytes to take, and a reader that runs out
/// ends the pause at once: its consumer may be waiting (issue 22). Ordering, not a clock: the
/// pause asked for is far longer than the test's patience.
#[test]
fn a_reader_that_runs_out_ends_the_pause() {
    let (mut producer, mut reader) = one(1 << 20);
    assert!(!producer.pause(Duration::from_secs(3600), true), "nothing held: no pause");
    put(&mut producer, &pattern(page()));
    let taking = thread::spawn(move || {
        let got = take(&mut reader).unwrap();
        // Runs out, and waits for more: the producer's pause ends.
        (got, take(&mut reader))
    });
    // Whether the reader ran out before the pause began (no pause) or during it, the
    // producer goes on: it does not wait out the hour.
    producer.pause(Duration::from_secs(3600), true);
    drop(producer);
    let (got, rest) = taking.join().unwrap();
    assert_eq!(got, pattern(page()));
    assert_eq!(rest, None);
}

/// Bytes already read that the producer queues ([`Producer::queue`]) go to the spill once
/// memory is full, as a read's would, and come out in order.
#[test]
fn queued_bytes_spill_when_memory_is_full() {
    let dir = tempfile::tempdir().unwrap();
    let spill = Arc::new(spill::SpillFile::create(dir.path(), None).unwrap());
    let capacity = 16 * page();
    let meter = Arc::new(Meter::new(capacity as u64, 1));
    let log = Arc::new(Log::default());
    let (mut producer, mut readers) =
        backlog(capacity, 1, Gates::default(), Some(spill), meter, log).unwrap();
    let mut reader = readers.pop().unwrap();
    let data = pattern(64 * page() + 123);
    producer.queue(&data).unwrap();
    drop(producer);
    let (mut got, mut spilled) = (Vec::new(), 0);
    while let Some(front) = reader.front() {
        let bytes = match front {
            Front::Memory(filled) => filled.as_slice().to_vec(),
            Front::Spill(range) => {
                let mut bytes = vec![0; range.len()];
                assert_eq!(range.read(&mut bytes).unwrap(), bytes.len());
                spilled += bytes.len();
                bytes
            }
            Front::Pipe(..) => panic!("no pipe was put in"),
        };
        reader.consume(bytes.len());
        got.extend_from_slice(&bytes);
    }
    assert!(got == data, "{} bytes out of {}, in order", got.len(), data.len());
    assert!(spilled >= data.len() - capacity, "only {spilled} bytes went to the spill");
}
