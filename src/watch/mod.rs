//! Watching the pipeline from the side: the progress line, the final line and verdict, the
//! report, NDJSON events and the stall watchdog.
//!
//! Everything here reads [`Snapshot`]s of the meter on its own thread (or the signal thread);
//! nothing here can slow or block the data path. If the terminal stalls, only this thread
//! waits.
//!
//! Progress goes to stderr, or to `--progress-fd`: redrawn in place on a terminal (shared with
//! other accels there, [`board`]), a line per interval into a file or pipe, or a number per
//! interval (`-n`). When the transfer is over, the run [`closes`](Watch::close) the display: the final
//! line is left standing, as pv leaves it, and accel's last messages follow it; then
//! [`report`](Watch::report) adds the verdict (or, with `-v`, the report) and the JSON summary.
//!
//! This file is the watcher: its thread, each tick, the report at the end, what the signal
//! thread asks of it. The drawing is `draw.rs`, the stall watchdog's words `stall.rs`, the
//! NDJSON events `events.rs`, where progress is written `sink.rs`.

pub mod board;
pub mod control;
mod draw;
mod events;
pub mod line;
pub mod report;
mod sink;
mod stall;

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use crate::engine::Event;
use crate::engine::digest::{Algorithm, Digest};
use crate::engine::pace::Limits;
use crate::exit::{BROKEN_PIPE, Exit, TERMINATING_SIGNALS};
use crate::meter::{Meter, Motion, RateLimits, Snapshot};
use crate::watch::control::Control;
use board::Board;
use draw::Mode;
use events::{with_lines, write_json};
use line::Rates;
use sink::{Sink, fitted, terminal_size};

/// How often the progress line is redrawn on a terminal, unless `--interval` says.
const REDRAW: Duration = Duration::from_millis(500);

/// How often a line or number goes into a file or pipe, and a JSON progress event is written,
/// unless `--interval` says.
const SECOND: Duration = Duration::from_secs(1);

/// How often the watchdog looks, at least, and the clock learns of a stop.
const WATCHDOG: Duration = Duration::from_millis(500);

/// The longest an output's name gets on the progress line; a longer one is cut, ending in `~`.
pub const SHORT: usize = 20;

/// When the progress line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Never (`-q`, or stderr is not a terminal).
    Off,
    /// While accel's job holds the terminal's foreground (pv's rule: nothing from a
    /// background job).
    Foreground,
    /// Whenever stderr is a terminal (`-p`).
    Always,
}

/// Where `--json` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonTarget {
    /// `--json`: stderr, beside any messages.
    Stderr,
    /// `--json=FILE`.
    File(PathBuf),
}

/// How a run is watched: what is shown, where and how often, and when a run that no longer
/// moves has stalled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watching {
    /// Whether and when to draw the progress line.
    pub progress: Visibility,
    /// Progress as numbers, a line per interval (`-n`).
    pub numeric: bool,
    /// The descriptor progress goes to instead of stderr (`--progress-fd`), checked open.
    pub progress_fd: Option<RawFd>,
    /// How often progress is updated, when the user said (`--interval`).
    pub interval: Option<Duration>,
    /// Where NDJSON goes, if anywhere.
    pub json: Option<JsonTarget>,
    /// Print the report at the end (`-v`).
    pub stats: bool,
    /// Print nothing but errors (`-q`).
    pub quiet: bool,
    /// The run has stalled once nothing has moved for this long (`--stall-timeout`).
    pub stall_timeout: Option<Duration>,
    /// How progress looks, where pv's switches chose (accel run as pv).
    pub look: Look,
}

/// How progress looks where pv's switches chose it (accel run as pv); accel's own by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Look {
    /// The parts of the line shown (`-p -t -e -r -a -b -T`).
    pub parts: line::LineParts,
    /// What each `-n` line holds besides its figure (`-n` with `-t`, `-b`, `-r`).
    pub figures: Figures,
    /// Nothing is shown before this (`-W`, `-D`).
    pub hold: Hold,
    /// The width of a line, instead of the terminal's (`-w`).
    pub width: Option<usize>,
}

/// What each `-n` line holds, as pv writes it: by default only the percent done (or, with
/// no size, the count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Figures {
    /// The seconds so far first, to four decimals (pv's `-n -t`).
    pub elapsed: bool,
    /// The count (bytes, or lines) even with a size (pv's `-n -b`).
    pub count: bool,
    /// The rate after it, per second (pv's `-n -r`).
    pub rate: bool,
}

/// When progress is first shown: nothing before the first byte (pv's `-W`), or before so
/// long into the run (pv's `-D`), so that a short run shows nothing at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hold {
    /// Until the first byte has come.
    pub first_byte: bool,
    /// Until this long into the run.
    pub delay: Option<Duration>,
}

impl Hold {
    /// Whether what `snapshot` says lets progress be shown.
    fn over(&self, snapshot: &Snapshot) -> bool {
        (!self.first_byte || snapshot.bytes_in > 0)
            && self.delay.is_none_or(|delay| snapshot.elapsed >= delay)
    }
}

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
        // A process substitution, `-o >(gzip > f)`, is `/dev/fd/63`: `fd 63`, not `63`.
        let by_number = ["/dev/fd", "/proc/self/fd"].map(std::path::Path::new);
        let base = match path.parent() {
            Some(parent) if by_number.contains(&parent) => format!("fd {base}"),
            _ => base,
        };
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

/// The run watched: what the watcher is told of it besides its counters.
pub struct Watched {
    /// What the sides are called.
    pub names: Names,
    /// The engine, for the summary.
    pub engine: String,
    /// The rate limits, shown, and changed through the control socket.
    pub limits: Arc<Limits>,
    /// The lines taken in, where they are counted (accel as `pv -l`).
    pub lines: Option<Arc<AtomicU64>>,
}

/// The watcher of one run.
pub struct Watch {
    meter: Arc<Meter>,
    names: Names,
    /// The engine, for the summary.
    engine: String,
    limits: Arc<Limits>,
    lines: Option<Arc<AtomicU64>>,
    look: Look,
    /// The control socket (`-R`), once the run listens ([`Watch::serve`]): looked at at each
    /// tick, served on a thread of its own from the first client on.
    control: OnceLock<Control>,
    /// Where the watchdog says the run has stalled.
    events: Mutex<Option<mpsc::Sender<Event>>>,
    progress: Visibility,
    mode: Mode,
    sink: Sink,
    /// How often the line (or number) and the JSON progress events are written.
    line_every: Duration,
    json_every: Duration,
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
    /// A redrawn line is on the terminal now, to be cleared or redrawn.
    drawn: bool,
    /// Progress was shown at some point: the final line is left standing at the end.
    shown: bool,
    /// The hold is over (`-W`, `-D`): progress may be shown.
    released: bool,
    /// The final line stands, and the verdict may follow it.
    standing: bool,
    /// The terminal shared with other accels, once this one has drawn.
    board: Option<Board>,
    /// Whether joining the board was tried (once).
    board_tried: bool,
    /// When this accel last got a SIGCONT, by the machine's monotonic clock, until it draws.
    continued_at: Option<u64>,
    json: Option<Box<dyn Write + Send>>,
    /// When the line and the JSON progress are next due.
    line_due: Instant,
    json_due: Instant,
    /// When the watcher last looked, and how long the interval before that was: a stop
    /// (Ctrl-Z, SIGSTOP) lies in one of the two when a SIGCONT is seen.
    last_tick: Instant,
    last_gap: Duration,
    /// When the counters last moved, for the stall watchdog.
    motion: Motion,
    /// The transfer is over: the final progress is down and nothing more is drawn.
    closed: bool,
    /// The end was reported; nothing more is written.
    finished: bool,
}

impl Watch {
    /// A watcher as `watching` says, of the run `watched`; opens the `--json`
    /// file.
    pub fn new(
        watching: Watching,
        meter: Arc<Meter>,
        watched: Watched,
        expected: Option<u64>,
    ) -> io::Result<Arc<Watch>> {
        let Watched { names, engine, limits, lines } = watched;
        let json: Option<Box<dyn Write + Send>> = match &watching.json {
            None => None,
            Some(JsonTarget::Stderr) => Some(Box::new(io::stderr())),
            Some(JsonTarget::File(path)) => Some(Box::new(File::create(path)?)),
        };
        let sink = Sink(watching.progress_fd);
        let mode = if watching.progress == Visibility::Off {
            Mode::Off
        } else if watching.numeric {
            Mode::Numeric
        } else if rustix::termios::isatty(sink.fd()) {
            Mode::Redrawn
        } else {
            Mode::Lines
        };
        // pv's pace for what is read rather than watched; twice as often for the line.
        let line_every = watching.interval.unwrap_or(match mode {
            Mode::Redrawn => REDRAW,
            _ => SECOND,
        });
        let json_every = watching.interval.unwrap_or(SECOND);
        let now = Instant::now();
        Ok(Arc::new(Watch {
            meter,
            names,
            engine,
            limits,
            lines,
            look: watching.look,
            control: OnceLock::new(),
            events: Mutex::new(None),
            progress: watching.progress,
            mode,
            sink,
            line_every,
            json_every,
            stats: watching.stats,
            quiet: watching.quiet,
            expected,
            stall_timeout: watching.stall_timeout,
            continued: AtomicBool::new(false),
            state: Mutex::new(State {
                rates: Rates::new(),
                drawn: false,
                shown: false,
                released: false,
                standing: false,
                board: None,
                board_tried: false,
                continued_at: None,
                json,
                line_due: now + line_every,
                json_due: now + json_every,
                last_tick: now,
                last_gap: Duration::ZERO,
                motion: Motion::default(),
                closed: false,
                finished: false,
            }),
        }))
    }

    /// Serves the control socket (`-R`) from the next tick on; before [`Watch::start`].
    pub fn serve(&self, control: Control) {
        let _ = self.control.set(control);
    }

    /// Starts the watcher thread, if anything needs watching; the watchdog reports a stall to
    /// `events`.
    pub fn start(self: &Arc<Watch>, events: mpsc::Sender<Event>) -> io::Result<()> {
        *self.events.lock().unwrap_or_else(PoisonError::into_inner) = Some(events);
        let needed = self.mode != Mode::Off
            || self.stats
            || self.lock().json.is_some()
            || self.stall_timeout.is_some()
            || self.control.get().is_some();
        if needed {
            let watch = Arc::clone(self);
            let step = self.line_every.min(self.json_every).min(WATCHDOG);
            thread::Builder::new().name("accel-watch".into()).spawn(move || {
                loop {
                    thread::sleep(step);
                    if !watch.tick(step) {
                        break;
                    }
                }
            })?;
        }
        Ok(())
    }

    /// One look at the counters, `step` after the last; `false` once the run has finished.
    fn tick(self: &Arc<Watch>, step: Duration) -> bool {
        if let Some(control) = self.control.get() {
            control.look(&self.limits, || {
                let watch = Arc::clone(self);
                move || watch.report_so_far()
            });
        }
        let mut state = self.lock();
        if state.closed {
            return false;
        }
        let now = Instant::now();
        let gap = now - state.last_tick;
        state.last_tick = now;
        if self.continued.swap(false, Relaxed) {
            // Stopped and continued: the stop lies in this interval or the one before (when
            // the SIGCONT was seen late). Beyond a step, that time was not running.
            self.meter.pause(gap.max(state.last_gap).saturating_sub(step));
            state.last_gap = Duration::ZERO;
        } else {
            state.last_gap = gap;
        }
        let snapshot = self.snapshot();
        state.rates.update(&snapshot);
        if let Some(why) = self.stalled(&mut state, &snapshot) {
            // The run's end is decided where the run is followed; the watcher only tells. The
            // line stays: the display closes on it, and the message goes under it.
            let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(events) = events.as_ref() {
                let _ = events.send(Event::Stalled(why));
            }
            return false;
        }
        if due(&mut state.json_due, self.json_every, now) {
            let mut event = self.progress_event(&snapshot, &state.rates);
            with_lines(&mut event, &snapshot);
            write_json(&mut state, &event);
        }
        if due(&mut state.line_due, self.line_every, now) {
            self.show(&mut state, &snapshot);
        }
        true
    }

    /// Reports the end, once: closes the display, then (unless `-q`) the full report with
    /// `-v`, or else the verdict under a final line left standing; for a run stopped by a
    /// signal, one line of what was read but not delivered; then the NDJSON summary, with the
    /// `digests` of a complete input.
    pub fn report(&self, exit: Exit, digests: &[Digest]) {
        let mut state = self.lock();
        if state.finished {
            return;
        }
        self.close_locked(&mut state);
        state.finished = true;
        let snapshot = self.snapshot();
        let signal = match exit {
            Exit::Signal(signal) if TERMINATING_SIGNALS.contains(&signal) => Some(signal),
            _ => None,
        };
        if !self.quiet {
            let stderr = rustix::stdio::stderr();
            if self.stats {
                let report = self.prefixed(&report::report(&snapshot, &self.names));
                eprint!("{}", fitted(&report, stderr));
            } else if state.standing && signal.is_none() {
                // A consumer that went away is not a run that finished: say so, under the
                // line, where a verdict would read as if it had.
                let verdict = if exit == BROKEN_PIPE {
                    report::reader_went_away(&snapshot, &self.names)
                } else {
                    report::verdict(&snapshot, &self.names)
                };
                let verdict = self.prefixed(&verdict);
                self.sink.put(&fitted(&verdict, self.sink.fd()));
            }
            if let Some(signal) = signal {
                let stopped = report::stopped(&snapshot, &self.names, signal_name(signal));
                let stopped = match &self.names.name {
                    Some(name) => format!("accel: {name}: {stopped}\n"),
                    None => format!("accel: {stopped}\n"),
                };
                eprint!("{}", fitted(&stopped, stderr));
            }
        }
        let mut event = self.summary_event(&snapshot, exit, digests);
        with_lines(&mut event, &snapshot);
        if let (Some(total), Some(map)) = (self.expected, event.as_object_mut()) {
            // In lines, where lines are counted: what the size was given in.
            let field = if snapshot.lines.is_some() { "expected_lines" } else { "expected_bytes" };
            map.insert(field.into(), total.into());
        }
        write_json(&mut state, &event);
    }

    /// SIGUSR1: the report so far, as `dd` does; the run goes on.
    pub fn report_now(&self) {
        if self.quiet {
            return;
        }
        self.say(&fitted(&self.report_so_far(), rustix::stdio::stderr()));
    }

    /// The report so far, as SIGUSR1 prints it and the control socket sends it.
    pub fn report_so_far(&self) -> String {
        self.prefixed(&report::so_far(&self.snapshot(), &self.names))
    }

    /// Writes `text` (whole lines) on stderr without garbling the progress line: above the
    /// block of lines on a shared terminal, or in place of the line, which the next redraw
    /// brings back.
    pub fn say(&self, text: &str) {
        let mut state = self.lock();
        let text = if text.ends_with('\n') { text.to_owned() } else { format!("{text}\n") };
        let on_the_line = state.drawn && !state.closed && self.sink.is_stderr();
        if !on_the_line {
            eprint!("{text}");
            return;
        }
        let (_, height) = terminal_size(self.sink.fd());
        let said = match &mut state.board {
            Some(board) => self.sink.with(|out| board.say(out, &text, height.saturating_sub(1))),
            None => Err(io::ErrorKind::NotFound.into()),
        };
        if said.is_err() {
            self.clear(&mut state);
            eprint!("{text}");
        }
    }

    /// SIGCONT: the job goes on after a stop (Ctrl-Z, SIGSTOP); the time it was stopped,
    /// found by the watcher's next look to within a tick, does not count as running, and the
    /// line is drawn anew where the cursor now is.
    pub fn resume(&self) {
        self.continued.store(true, Relaxed);
        self.lock().continued_at = Some(board::monotonic_ns());
    }

    /// `text` with this accel's name (`-N`) before each line, when it has one; and a final
    /// newline.
    fn prefixed(&self, text: &str) -> String {
        let mut out: String = match &self.names.name {
            Some(name) => text.lines().map(|line| format!("{name}: {line}\n")).collect(),
            None => text.lines().map(|line| format!("{line}\n")).collect(),
        };
        if out.is_empty() {
            out.push('\n');
        }
        out
    }

    /// The counters now, with the rate limits in force and the lines counted.
    fn snapshot(&self) -> Snapshot {
        let mut snapshot = self.meter.snapshot();
        snapshot.limits = RateLimits {
            output: self.limits.output.load(Relaxed),
            input: self.limits.input.load(Relaxed),
        };
        snapshot.lines = self.lines.as_ref().map(|lines| lines.load(Relaxed));
        snapshot
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Whether what is due at `due`, every `every`, is due at `now`; if so, when it is next.
fn due(due: &mut Instant, every: Duration, now: Instant) -> bool {
    if now < *due {
        return false;
    }
    // On the beat, unless the watcher fell behind (a stop, a busy machine): then from now.
    *due = if *due + every > now { *due + every } else { now + every };
    true
}

/// `SIGTERM`, as the summary and the messages call a signal.
fn signal_name(signal: i32) -> &'static str {
    signal_hook::low_level::signal_name(signal).unwrap_or("an unknown signal")
}
