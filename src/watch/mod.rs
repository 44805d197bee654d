//! Watching the pipeline from the side: the progress line, the final report, NDJSON events and
//! the stall watchdog.
//!
//! Everything here reads [`Snapshot`]s of the meter on its own thread (or the signal thread);
//! nothing here can slow or block the data path. If the terminal stalls, only this thread
//! waits.

pub mod board;
pub mod line;
pub mod report;

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::config::{Config, JsonTarget, Progress};
use crate::digest::{Algorithm, Digest};
use crate::engine::Event;
use crate::exit::Exit;
use crate::meter::{Meter, Snapshot};
use crate::size::Bytes;
use line::Rates;

/// How often the progress line is redrawn and the watchdog looks.
const TICK: Duration = Duration::from_millis(500);

/// NDJSON progress events go out every this many ticks (once a second).
const JSON_EVERY: u64 = 2;

/// The longest an output's name gets on the progress line; a longer one is cut, ending in `~`.
pub const SHORT: usize = 20;

/// Erases the line the cursor is on: back to column 0, clear to its end.
const CLEAR_LINE: &str = "\r\x1b[K";

/// What the sides of a run are called, for the line, the report and JSON.
#[derive(Debug, Clone, Default)]
pub struct Names {
    /// This accel, when the user named it (`-N`).
    pub name: Option<String>,
    /// The input: `stdin` or the path.
    pub input: String,
    /// The outputs, in order: `stdout` or the paths. The meter counts them first...
    pub outputs: Vec<String>,
    /// ...then the hashes, in order.
    pub hashes: Vec<Algorithm>,
}

impl Names {
    /// How the report calls reader `index`: an output's name, or `the sha256 hash`.
    pub fn reader(&self, index: usize) -> String {
        match self.outputs.get(index) {
            Some(name) => name.clone(),
            None => format!("the {} hash", self.hashes[index - self.outputs.len()]),
        }
    }

    /// How the progress line calls reader `index`, in a few columns: an output's file name
    /// (`copy.img` for `/mnt/b/copy.img`), cut to [`SHORT`] characters, or `sha256`.
    pub fn short(&self, index: usize) -> String {
        let Some(name) = self.outputs.get(index) else {
            return self.hashes[index - self.outputs.len()].to_string();
        };
        let path = std::path::Path::new(name);
        let base =
            path.file_name().map_or(name.clone(), |base| base.to_string_lossy().into_owned());
        if base.chars().count() <= SHORT {
            base
        } else {
            base.chars().take(SHORT - 1).chain(['~']).collect()
        }
    }

    /// Readers of the backlog: outputs and hashes.
    pub fn readers(&self) -> usize {
        self.outputs.len() + self.hashes.len()
    }
}

/// The watcher of one run.
pub struct Watch {
    meter: Arc<Meter>,
    names: Names,
    /// The engine, for the summary.
    engine: String,
    /// Where the watchdog says the run has stalled.
    events: Mutex<Option<mpsc::Sender<Event>>>,
    progress: Progress,
    stats: bool,
    quiet: bool,
    expected: Option<u64>,
    stall_timeout: Option<Duration>,
    /// A SIGCONT came: the next look takes the stop out of the clock.
    continued: AtomicBool,
    state: Mutex<State>,
}

struct State {
    rates: Rates,
    /// A progress line is on the terminal now.
    drawn: bool,
    /// A progress line was shown at some point: the report follows at the end.
    shown: bool,
    json: Option<Box<dyn Write + Send>>,
    /// When the watcher last looked, and how long the interval before that was: a stop
    /// (Ctrl-Z, SIGSTOP) lies in one of the two when a SIGCONT is seen.
    last_tick: Instant,
    last_gap: Duration,
    /// The counters (bytes in, bytes taken by all readers) when they last moved, and when
    /// (by the meter's clock).
    last_motion: (u64, u64, Duration),
    /// The end was reported; nothing more is drawn or written.
    finished: bool,
}

impl Watch {
    /// A watcher for `config`'s display options, of a run whose sides are `names`, moved by
    /// `engine`; opens the `--json` file.
    pub fn new(
        config: &Config,
        meter: Arc<Meter>,
        names: Names,
        engine: String,
        expected: Option<u64>,
    ) -> io::Result<Arc<Watch>> {
        let json: Option<Box<dyn Write + Send>> = match &config.json {
            None => None,
            Some(JsonTarget::Stderr) => Some(Box::new(io::stderr())),
            Some(JsonTarget::File(path)) => Some(Box::new(File::create(path)?)),
        };
        Ok(Arc::new(Watch {
            meter,
            names,
            engine,
            events: Mutex::new(None),
            progress: config.progress,
            stats: config.stats,
            quiet: config.quiet,
            expected,
            stall_timeout: config.stall_timeout,
            continued: AtomicBool::new(false),
            state: Mutex::new(State {
                rates: Rates::new(),
                drawn: false,
                shown: false,
                json,
                last_tick: Instant::now(),
                last_gap: Duration::ZERO,
                last_motion: (0, 0, Duration::ZERO),
                finished: false,
            }),
        }))
    }

    /// Starts the watcher thread, if anything needs watching; the watchdog reports a stall to
    /// `events`.
    pub fn start(self: &Arc<Watch>, events: mpsc::Sender<Event>) -> io::Result<()> {
        *self.events.lock().unwrap_or_else(PoisonError::into_inner) = Some(events);
        let needed = self.progress != Progress::Off
            || self.stats
            || self.lock().json.is_some()
            || self.stall_timeout.is_some();
        if needed {
            let watch = Arc::clone(self);
            thread::Builder::new().name("accel-watch".into()).spawn(move || {
                for tick in 1.. {
                    thread::sleep(TICK);
                    if !watch.tick(tick) {
                        break;
                    }
                }
            })?;
        }
        Ok(())
    }

    /// One look at the counters; `false` once the run has finished.
    fn tick(&self, tick: u64) -> bool {
        let mut state = self.lock();
        if state.finished {
            return false;
        }
        let now = Instant::now();
        let gap = now - state.last_tick;
        state.last_tick = now;
        if self.continued.swap(false, Relaxed) {
            // Stopped and continued: the stop lies in this interval or the one before (when
            // the SIGCONT was seen late). Beyond a tick, that time was not running.
            self.meter.pause(gap.max(state.last_gap).saturating_sub(TICK));
            state.last_gap = Duration::ZERO;
        } else {
            state.last_gap = gap;
        }
        let snapshot = self.meter.snapshot();
        state.rates.update(&snapshot);
        if let Some(why) = self.stalled(&mut state, &snapshot) {
            // The run's end is decided where the run is followed; the watcher only tells.
            self.clear(&mut state);
            let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(events) = events.as_ref() {
                let _ = events.send(Event::Stalled(why));
            }
            return false;
        }
        if tick % JSON_EVERY == 0 {
            let event = progress_event(&snapshot, &state.rates);
            write_json(&mut state, &event);
        }
        self.draw(&mut state, &snapshot);
        true
    }

    /// The watchdog: once nothing has moved for `--stall-timeout`, which side is stuck, in
    /// words.
    fn stalled(&self, state: &mut State, snapshot: &Snapshot) -> Option<String> {
        let timeout = self.stall_timeout?;
        let taken = snapshot.readers.iter().fold(0u64, |sum, r| sum.wrapping_add(r.bytes));
        let (bytes_in, bytes_taken, since) = state.last_motion;
        if (snapshot.bytes_in, taken) != (bytes_in, bytes_taken) {
            state.last_motion = (snapshot.bytes_in, taken, snapshot.elapsed);
            return None;
        }
        let still = snapshot.elapsed.saturating_sub(since);
        if still < timeout {
            return None;
        }
        let still = line::duration(still);
        Some(match snapshot.slowest() {
            Some(slowest) if snapshot.fill() > 0 => format!(
                "stalled: nothing written to {} for {still} with {} waiting; its reader is not \
                 reading",
                self.names.reader(slowest),
                Bytes(snapshot.fill())
            ),
            _ => format!(
                "stalled: no input from {} for {still}; the producer is not writing",
                self.names.input
            ),
        })
    }

    /// Redraws the progress line, when one is wanted and the terminal is ours.
    fn draw(&self, state: &mut State, snapshot: &Snapshot) {
        let ours = match self.progress {
            Progress::Off => return,
            Progress::Always => true,
            Progress::Foreground => in_foreground(),
        };
        if !ours {
            // A background job draws nothing; what it drew before belongs to the past.
            state.drawn = false;
            return;
        }
        let width = terminal_width().unwrap_or(80).saturating_sub(1);
        let subject = line::Subject { names: &self.names, expected: self.expected, ended: false };
        let text = line::render(snapshot, &state.rates, &subject, width);
        let mut stderr = io::stderr().lock();
        let _ = write!(stderr, "\r{text}\x1b[K");
        let _ = stderr.flush();
        state.drawn = true;
        state.shown = true;
    }

    fn clear(&self, state: &mut State) {
        if state.drawn {
            let _ = io::stderr().write_all(CLEAR_LINE.as_bytes());
            state.drawn = false;
        }
    }

    /// Reports the end: clears the progress line, prints the report (with `-v`, or after a
    /// progress line) and the NDJSON summary, with the `digests` of a complete input. Only
    /// the first call does anything.
    pub fn finish(&self, exit: Exit, digests: &[Digest]) {
        let mut state = self.lock();
        if state.finished {
            return;
        }
        state.finished = true;
        self.clear(&mut state);
        let snapshot = self.meter.snapshot();
        if (self.stats || state.shown) && !self.quiet {
            eprint!("{}", self.report(&snapshot));
        }
        let mut event = self.summary_event(&snapshot, exit, digests);
        if let (Some(total), Some(map)) = (self.expected, event.as_object_mut()) {
            map.insert("expected_bytes".into(), total.into());
        }
        write_json(&mut state, &event);
    }

    /// SIGUSR1: the report so far, as `dd` does; the run goes on.
    pub fn report_now(&self) {
        if self.quiet {
            return;
        }
        let mut state = self.lock();
        self.clear(&mut state);
        eprint!("{}", self.report(&self.meter.snapshot()));
    }

    /// SIGWINCH: re-fit the line to the new width at once.
    pub fn redraw(&self) {
        let mut state = self.lock();
        if state.drawn && !state.finished {
            let snapshot = self.meter.snapshot();
            self.draw(&mut state, &snapshot);
        }
    }

    /// SIGCONT: the job goes on after a stop (Ctrl-Z, SIGSTOP); the time it was stopped,
    /// found by the watcher's next look to within a tick, does not count as running.
    pub fn resume(&self) {
        self.continued.store(true, Relaxed);
    }

    fn report(&self, snapshot: &Snapshot) -> String {
        let mut text = report::report(snapshot, &self.names);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text
    }

    /// `{"event":"summary",...}`: the whole run, once, at the end.
    fn summary_event(
        &self,
        snapshot: &Snapshot,
        exit: Exit,
        digests: &[Digest],
    ) -> serde_json::Value {
        let tiers = snapshot.tiers;
        let outputs: Vec<serde_json::Value> = self
            .names
            .outputs
            .iter()
            .zip(&snapshot.readers)
            .map(|(name, reader)| {
                json!({
                    "name": name,
                    "bytes": reader.bytes,
                    "starved_s": reader.starved.as_secs_f64(),
                    "complete": !reader.gone,
                })
            })
            .collect();
        let hashes: Vec<serde_json::Value> = digests
            .iter()
            .map(|d| json!({ "algorithm": d.algorithm.name(), "hex": d.hex }))
            .collect();
        let mut event = json!({
            "event": "summary",
            "bytes_in": snapshot.bytes_in,
            "bytes_out": snapshot.bytes_out,
            "seconds": snapshot.elapsed.as_secs_f64(),
            "producer_blocked_s": snapshot.producer_blocked.as_secs_f64(),
            "consumer_starved_s": snapshot.consumer_starved.as_secs_f64(),
            "peak_fill_bytes": snapshot.peak_fill,
            "capacity_bytes": snapshot.capacity,
            "bottleneck": report::bottleneck(snapshot).as_str(),
            "slowest": snapshot.slowest().map(|index| self.names.reader(index)),
            "engine": self.engine,
            "tiers": { "through": tiers.through, "pipes": tiers.pipes, "memory": tiers.memory },
            "input": self.names.input,
            "outputs": outputs,
            "hashes": hashes,
            "exit": exit.code(),
        });
        if let (Exit::Signal(signal), Some(map)) = (exit, event.as_object_mut()) {
            let name = signal_hook::low_level::signal_name(signal).unwrap_or("an unknown signal");
            map.insert("signal".into(), name.into());
        }
        event
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn write_json(state: &mut State, event: &serde_json::Value) {
    if let Some(out) = &mut state.json {
        // One write per line, so that lines from a watcher and a signal never interleave.
        let _ = out.write_all(format!("{event}\n").as_bytes());
        let _ = out.flush();
    }
}

/// `{"event":"progress",...}`: the counters now.
fn progress_event(snapshot: &Snapshot, rates: &Rates) -> serde_json::Value {
    json!({
        "event": "progress",
        "seconds": snapshot.elapsed.as_secs_f64(),
        "bytes_in": snapshot.bytes_in,
        "bytes_out": snapshot.bytes_out,
        "fill_bytes": snapshot.fill(),
        "capacity_bytes": snapshot.capacity,
        "rate_in": rates.input(),
        "rate_out": rates.output(),
        "producer_blocked_s": snapshot.producer_blocked.as_secs_f64(),
        "consumer_starved_s": snapshot.consumer_starved.as_secs_f64(),
    })
}

/// Whether accel's process group holds stderr's terminal (it is not a background job).
fn in_foreground() -> bool {
    let stderr = rustix::stdio::stderr();
    rustix::termios::tcgetpgrp(stderr).is_ok_and(|group| group == rustix::process::getpgrp())
}

/// The width of stderr's terminal.
fn terminal_width() -> Option<usize> {
    let size = rustix::termios::tcgetwinsize(rustix::stdio::stderr()).ok()?;
    (size.ws_col > 0).then_some(usize::from(size.ws_col))
}
