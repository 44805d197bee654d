//! The library's watcher: the caller's progress callback at its interval, and the stall
//! timeout, on one thread that ends with the run.
//!
//! A stall is what the command line's watchdog calls one, followed by the same tracker
//! ([`Motion`]): nothing read and nothing taken by any output for the timeout. The engine is
//! told, as the command line's watchdog tells it, and ends the run; the words are the
//! library's own (a program's reader and writer).

use std::io;
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::{Progress, ProgressCallback};
use crate::engine::Event;
use crate::meter::{Meter, Motion, Snapshot};
use crate::size::Bytes;
use crate::words::duration;

/// How often the stall timeout is looked at, when no progress interval is shorter.
const LOOK: Duration = Duration::from_millis(100);

/// The watcher of one run, when it needs one.
pub(super) struct Watchdog {
    /// Where the run's last counters are sent, which ends the thread; the thread's handle.
    running: Option<(mpsc::Sender<Snapshot>, JoinHandle<()>)>,
}

impl Watchdog {
    /// Starts watching `meter` when a stall timeout or a progress callback was asked for.
    pub(super) fn start(
        meter: Arc<Meter>,
        mut stall_timeout: Option<Duration>,
        progress: Option<(Duration, Arc<Mutex<ProgressCallback>>)>,
        events: mpsc::Sender<Event>,
        input: String,
        outputs: Vec<String>,
    ) -> io::Result<Watchdog> {
        if stall_timeout.is_none() && progress.is_none() {
            return Ok(Watchdog { running: None });
        }
        let step = match (&progress, stall_timeout) {
            (Some((every, _)), _) => (*every).min(LOOK).max(Duration::from_millis(1)),
            (None, _) => LOOK,
        };
        let (end, ended) = mpsc::channel::<Snapshot>();
        let handle = thread::Builder::new().name("accel-watchdog".into()).spawn(move || {
            let mut motion = Motion::default();
            let mut next_show = Duration::ZERO;
            let show = |snapshot: Snapshot| {
                if let Some((_, callback)) = &progress {
                    let mut callback = callback.lock().unwrap_or_else(PoisonError::into_inner);
                    callback(&Progress::of(snapshot, outputs.len()));
                }
            };
            // The run's last counters, or a step gone by: never a busy wait.
            loop {
                let snapshot = match ended.recv_timeout(step) {
                    Err(mpsc::RecvTimeoutError::Timeout) => meter.snapshot(),
                    Ok(last) => break show(last),
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                };
                if let Some(timeout) = stall_timeout {
                    if let Some(why) = stalled(&snapshot, &mut motion, timeout, &input, &outputs) {
                        let _ = events.send(Event::Stalled(why));
                        stall_timeout.take();
                    }
                }
                if let Some((every, _)) = &progress {
                    if snapshot.elapsed >= next_show {
                        next_show = snapshot.elapsed + *every;
                        show(snapshot);
                    }
                }
            }
        })?;
        Ok(Watchdog { running: Some((end, handle)) })
    }

    /// The run is over: one last progress call with its `last` counters, and the thread
    /// ends.
    pub(super) fn end(self, last: Snapshot) {
        if let Some((end, handle)) = self.running {
            let _ = end.send(last);
            let _ = handle.join();
        }
    }
}

/// Once nothing has moved for `timeout`, which side is stuck, in words.
fn stalled(
    snapshot: &Snapshot,
    motion: &mut Motion,
    timeout: Duration,
    input: &str,
    outputs: &[String],
) -> Option<String> {
    let still = duration(motion.still(snapshot, timeout)?);
    Some(match snapshot.slowest() {
        Some(slowest) if snapshot.held() > 0 => format!(
            "stalled: nothing written to {} for {still} with {} waiting; its writer is not \
             taking it",
            outputs.get(slowest).map_or("an output", String::as_str),
            Bytes(snapshot.held())
        ),
        _ => format!("stalled: no input from {input} for {still}; the reader gives nothing"),
    })
}
