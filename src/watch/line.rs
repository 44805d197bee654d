//! The progress line: one pv-like line on stderr, redrawn about twice a second.
//!
//! This module owns what the line says and how it shrinks, and the smoothing that turns
//! successive snapshots into rates. It is pure: time comes only from
//! [`Snapshot::elapsed`], never from a clock of its own, so tests drive it with hand-built
//! snapshots and the watcher thread decides when to sample. Writing the line, the `\r` and the
//! clearing are the caller's business.
//!
//! The line shows the pipeline left to right, `in ... buf 42% out ...`, then, when the size is
//! known, a pv-like `[====>   ] 39% ETA 0:00:01`. When the terminal is narrow, parts are dropped
//! by importance, not position: percent done and ETA stay longest when there is a size, bytes
//! out when there is none, since they are what the consumer has actually received.

use std::time::Duration;

use crate::meter::Snapshot;
use crate::size::Bytes;
use crate::watch::Names;
use crate::words::duration;

/// How long the rates remember, in seconds: the time constant of the exponential smoothing.
///
/// Two seconds, or about four redraws: long enough that a producer writing in bursts does not
/// make the rate jump with every redraw, short enough that a stall shows within a redraw or two
/// and has taken the rate to under 1 % of its old value ten seconds later.
const MEMORY_S: f64 = 2.0;

/// Below this many bytes per second the output is taken as stopped and no ETA is given: the
/// estimate would be years long and meaningless.
const STOPPED: f64 = 1.0;

/// How long a side must have moved nothing for its rate to be 0, and, both sides, for the
/// line to say that nothing moves: the rates' memory. Shorter pauses are a bursty producer's
/// or consumer's, which the smoothing is there to hide; past it, a rate that decays for
/// minutes (`1.21 KiB/s`, an ETA of years) would hide a link that stands still.
const STILL: Duration = Duration::from_secs(2);

/// The widest a [`Bytes`] can print (`1023 KiB`, or `1024 KiB` once rounded), so that counts
/// are padded to it and the line keeps its shape while they change.
const BYTES_WIDTH: usize = 8;

/// The widest a [`rate`] can print (`1024 KiB/s`).
const RATE_WIDTH: usize = BYTES_WIDTH + 2;

/// The narrowest a [`duration`] prints (`0:00:00`); longer only past ten hours.
const DURATION_WIDTH: usize = 7;

/// Input and output rates smoothed over the last couple of seconds.
///
/// Each update weighs the bytes moved since the previous snapshot by how long that interval was,
/// so irregular sampling does no harm: a late redraw simply counts for more. The start of the
/// run, zero bytes at zero elapsed (which the meter guarantees), is the first sample; the very
/// first snapshot therefore already yields the average since the start, not zero.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    /// The previous snapshot's elapsed time and counters.
    last_elapsed: Duration,
    last_in: u64,
    last_out: u64,
    last_lines: u64,
    /// Bytes on the wire of the outputs that compress (`--compress`).
    last_wire: u64,
    /// Exponentially weighted sums of the interval rates, started from zero.
    input: f64,
    output: f64,
    lines: f64,
    wire: f64,
    /// The weight those sums have gathered so far, `1 - e^(-t/MEMORY_S)`; dividing by it undoes
    /// the start from zero, which would otherwise show a rate creeping up for seconds.
    weight: f64,
    /// The elapsed time of the last snapshot in which each side had moved.
    input_moved: Duration,
    output_moved: Duration,
}

/// `e^-x` for `x >= 0`, to within a few parts in 10^13: `e^(-x/2^m)` by its series, where
/// `x/2^m < 1/2`, squared `m` times. Written out because it was the only function accel took
/// from the maths library, and loading that library (its relocations run resolvers across its
/// code) made 0.5 MiB of it resident in every run.
fn exp_of_negative(x: f64) -> f64 {
    if x.is_nan() || x >= 700.0 {
        // Below the smallest f64 (or not a number: no weight to give).
        return 0.0;
    }
    let mut halvings = 0;
    let mut y = x.max(0.0);
    while y > 0.5 {
        y /= 2.0;
        halvings += 1;
    }
    // e^-y = sum of (-y)^k / k!; at y <= 1/2 the 18th term is below 10^-21.
    let (mut sum, mut term) = (1.0, 1.0);
    for k in 1..18 {
        term *= -y / f64::from(k);
        sum += term;
    }
    for _ in 0..halvings {
        sum *= sum;
    }
    sum
}

impl Rates {
    /// Rates that have seen nothing yet: both zero.
    pub fn new() -> Rates {
        Rates::default()
    }

    /// Takes in a snapshot taken after the previous one.
    ///
    /// A snapshot no later than the previous one (zero elapsed, or the same instant twice) is
    /// ignored, and its bytes are counted with the next one instead: a rate over no time is
    /// not a number.
    pub fn update(&mut self, snapshot: &Snapshot) {
        if snapshot.elapsed <= self.last_elapsed {
            return;
        }
        let seconds = (snapshot.elapsed - self.last_elapsed).as_secs_f64();
        let input = snapshot.bytes_in.saturating_sub(self.last_in) as f64 / seconds;
        let output = snapshot.bytes_out.saturating_sub(self.last_out) as f64 / seconds;
        let counted = snapshot.lines.unwrap_or_default();
        let lines = counted.saturating_sub(self.last_lines) as f64 / seconds;
        let on_wire = wire_bytes(snapshot);
        let wire = on_wire.saturating_sub(self.last_wire) as f64 / seconds;
        // The share of memory this interval takes over: an interval of MEMORY_S replaces 63 %.
        let share = 1.0 - exp_of_negative(seconds / MEMORY_S);
        self.input += share * (input - self.input);
        self.output += share * (output - self.output);
        self.lines += share * (lines - self.lines);
        self.wire += share * (wire - self.wire);
        self.weight += share * (1.0 - self.weight);
        if snapshot.bytes_in > self.last_in {
            self.input_moved = snapshot.elapsed;
        }
        if snapshot.bytes_out > self.last_out {
            self.output_moved = snapshot.elapsed;
        }
        self.last_elapsed = snapshot.elapsed;
        self.last_in = snapshot.bytes_in;
        self.last_out = snapshot.bytes_out;
        self.last_lines = counted;
        self.last_wire = on_wire;
    }

    /// Bytes per second on the wire, lately, of the outputs that compress: 0 once the output
    /// has moved nothing for [`STILL`].
    pub fn wire(&self) -> f64 {
        if self.still_since(self.output_moved).is_some() { 0.0 } else { self.unbiased(self.wire) }
    }

    /// Bytes per second read from the producer, lately: 0 once it has read nothing for
    /// [`STILL`].
    pub fn input(&self) -> f64 {
        if self.still_since(self.input_moved).is_some() { 0.0 } else { self.unbiased(self.input) }
    }

    /// Bytes per second written to the consumer, lately: 0 once nothing was written for
    /// [`STILL`].
    pub fn output(&self) -> f64 {
        if self.still_since(self.output_moved).is_some() { 0.0 } else { self.unbiased(self.output) }
    }

    /// How long nothing has moved, either side, as of the last snapshot: once that is
    /// [`STILL`] at least.
    pub fn still_for(&self) -> Option<Duration> {
        self.still_since(self.input_moved.max(self.output_moved))
    }

    /// How long since `moved`, when that is [`STILL`] at least.
    fn still_since(&self, moved: Duration) -> Option<Duration> {
        Some(self.last_elapsed.saturating_sub(moved)).filter(|still| *still >= STILL)
    }

    /// Lines per second taken in, lately (where lines are counted).
    pub fn lines(&self) -> f64 {
        self.unbiased(self.lines)
    }

    /// The averages over the whole run, as rates: what the final line shows, as pv's does.
    pub fn over_the_run(snapshot: &Snapshot) -> Rates {
        Rates {
            input: average_input(snapshot),
            output: average_output(snapshot),
            lines: per_second(snapshot.lines.unwrap_or_default(), snapshot.elapsed),
            weight: 1.0,
            ..Rates::default()
        }
    }

    fn unbiased(&self, sum: f64) -> f64 {
        if self.weight > 0.0 { sum / self.weight } else { 0.0 }
    }
}

/// Bytes per second read over the whole run; zero for a run of no time.
pub fn average_input(snapshot: &Snapshot) -> f64 {
    per_second(snapshot.bytes_in, snapshot.elapsed)
}

/// Bytes per second written over the whole run; zero for a run of no time.
pub fn average_output(snapshot: &Snapshot) -> f64 {
    per_second(snapshot.bytes_out, snapshot.elapsed)
}

/// `bytes` per second over `elapsed`; zero for no time.
pub fn per_second(bytes: u64, elapsed: Duration) -> f64 {
    if elapsed.is_zero() { 0.0 } else { bytes as f64 / elapsed.as_secs_f64() }
}

/// A rate as people read it: `95.3 MiB/s`. Negative and NaN rates show as `0 B/s`.
pub fn rate(bytes_per_s: f64) -> String {
    // `as` saturates: NaN and negatives become 0, anything past u64::MAX becomes u64::MAX.
    format!("{}/s", Bytes(bytes_per_s as u64))
}

/// What the line says besides the counters: whose it is, and what is expected.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The sides' names, and this accel's own (`-N`).
    pub names: &'a Names,
    /// The total the user said is coming (or stdin's size): percent done, a bar, an ETA. In
    /// lines, where lines are counted.
    pub expected: Option<u64>,
    /// The run is over: the final line, which has no ETA.
    pub ended: bool,
    /// Which parts are shown.
    pub parts: LineParts,
}

/// The parts of the line shown: accel's line has all but the average rate; accel run as pv
/// shows the parts pv's display switches name (`-b -r -a -T -t -p -e`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineParts {
    /// Bytes (or lines) in and out (`-b`).
    pub counts: bool,
    /// Rates in and out, and the caps on them (`-r`).
    pub rates: bool,
    /// The output's average rate over the run (`-a`).
    pub average: bool,
    /// The buffer's fill, and the bytes spilled to disk (`-T`).
    pub fill: bool,
    /// The time so far (`-t`).
    pub elapsed: bool,
    /// The bar and the percent done, with a size (`-p`).
    pub bar: bool,
    /// The ETA, with a size (`-e`).
    pub eta: bool,
}

impl LineParts {
    /// accel's own line.
    pub const ACCEL: LineParts = LineParts {
        counts: true,
        rates: true,
        average: false,
        fill: true,
        elapsed: true,
        bar: true,
        eta: true,
    };

    /// None at all, for pv's switches to add to.
    pub const NONE: LineParts = LineParts {
        counts: false,
        rates: false,
        average: false,
        fill: false,
        elapsed: false,
        bar: false,
        eta: false,
    };
}

impl Default for LineParts {
    fn default() -> LineParts {
        LineParts::ACCEL
    }
}

/// One progress line of at most `width` characters, without newline or escape codes.
///
/// Laid out as the pipeline runs, left to right: this accel's name (`-N`), the input, the
/// buffer's fill (`buf  42%`, a number, so that it never reads as progress), the output (the
/// slowest one, named, when there are several), the time so far, and, when a total is
/// expected, a pv-like bar, the percent done and the ETA. Numbers are padded to their widest
/// so that the line keeps its shape while they change; the bar takes whatever width is left.
///
/// When the line does not fit, the least important parts go first. With a total expected,
/// what a person looks for comes first: percent done, then what is unusual (bytes on disk
/// with the fill, rate caps), ETA, the bar, bytes and rate out, the fill, the time, the input.
/// Without one: bytes out, what is unusual, rate out, the fill, the input, the time. The name
/// always stays; everything is cut short only below a dozen columns.
pub fn render(snapshot: &Snapshot, rates: &Rates, subject: &Subject, width: usize) -> String {
    let fields = fields(snapshot, rates, subject);
    let out = out_label(snapshot, subject.names);
    // Adding a field only lengthens the line, so the first fit from the fullest down is best.
    for shown in (1..=fields.len()).rev() {
        let (line, elastic) = compose(&fields, &out, shown, 0);
        if line.chars().count() <= width {
            let room = width - line.chars().count();
            return if elastic { compose(&fields, &out, shown, room).0 } else { line };
        }
    }
    compose(&fields, &out, 1, 0).0.chars().take(width).collect()
}

/// Bytes on the wire of the outputs that compress.
fn wire_bytes(snapshot: &Snapshot) -> u64 {
    wires_shown(snapshot).map(|wire| wire.bytes).sum()
}

/// The wires the line shows: the outputs' that compress; where none does, the input's, once
/// a frame came compressed (a receiver, `--from`).
fn wires_shown(snapshot: &Snapshot) -> impl Iterator<Item = &crate::meter::Wire> {
    let outputs = || snapshot.wires.iter().flatten().filter(|wire| wire.compressing);
    let input = snapshot.input_wire.iter().filter(|wire| wire.compressing);
    let input = input.filter(move |_| outputs().next().is_none());
    outputs().chain(input)
}

/// Where a field sits on the line: fields of a group are separated by one space, groups by two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Name,
    Input,
    Buffer,
    Output,
    Stalled,
    Elapsed,
    Done,
}

/// One part of the line.
#[derive(Debug)]
struct Field {
    group: Group,
    /// 0 for the most important; fields are shown from 0 up to what fits.
    rank: usize,
    text: Text,
}

#[derive(Debug)]
enum Text {
    Fixed(String),
    /// The bar: done as a fraction, drawn as wide as the room allows.
    Bar(f64),
}

/// The narrowest the bar may be, inside its brackets: a tenth of the way each cell.
const BAR_MIN: usize = 10;

/// The fields of the line in layout order, ranked by importance.
fn fields(snapshot: &Snapshot, rates: &Rates, subject: &Subject) -> Vec<Field> {
    let (names, parts) = (subject.names, subject.parts);
    let output_rate = rates.output();
    // (group, text, importance with and without a total expected; lower is more important)
    let mut parts_shown: Vec<(Group, Text, usize, usize)> = Vec::new();
    if let Some(name) = &names.name {
        parts_shown.push((Group::Name, Text::Fixed(format!("{name}:")), 0, 0));
    }
    let counted = |bytes: u64| format!("{:>BYTES_WIDTH$}", Bytes(bytes).to_string());
    let per_second = |rate_: f64| format!("{:>RATE_WIDTH$}", rate(rate_));
    // A rate limit follows the rate it caps, and bytes waiting on disk follow the fill; each
    // goes with the part it qualifies.
    let limit = |limit: u64| {
        (parts.rates && limit > 0).then(|| Text::Fixed(format!("max {}", rate(limit as f64))))
    };
    let disk = (parts.fill && snapshot.held_disk > 0)
        .then(|| Text::Fixed(format!("+ {} on disk", Bytes(snapshot.held_disk))));
    // What is unusual about this run (bytes on disk, a rate cap) outranks the routine: right
    // after the figure a person looks for first (bytes out, or percent done), it stays when
    // the rates, the input and the time go. The fill goes up with the bytes on disk, which
    // qualify it.
    let unusual = |at: usize| (10 + at, 10 + at);
    let spilling = disk.is_some();
    // Where lines are counted (pv's -l), the input's side counts lines taken in: what percent
    // done and the ETA then go by. The output's side stays in bytes, what was delivered.
    let lines = snapshot.lines;
    let (done, done_rate) = match lines {
        Some(lines) => (lines, rates.lines()),
        None => (snapshot.bytes_out, output_rate),
    };
    let in_count = match lines {
        Some(lines) => format!("{:>COUNT_WIDTH$} lines", count(lines)),
        None => counted(snapshot.bytes_in),
    };
    let in_rate = match lines {
        Some(_) => format!("{:>COUNT_WIDTH$} lines/s", count(rates.lines() as u64)),
        None => per_second(rates.input()),
    };
    // The figure a person looks for first without a total: the lines, or the bytes out.
    let (in_rank, out_rank) = if lines.is_some() { (0, 50) } else { (50, 0) };
    if parts.counts {
        parts_shown.push((Group::Input, Text::Fixed(in_count), 90, in_rank));
    }
    if parts.rates {
        parts_shown.push((Group::Input, Text::Fixed(in_rate), 80, 40));
    }
    let (known, unknown) = unusual(4);
    parts_shown
        .extend(limit(snapshot.limits.input).map(|text| (Group::Input, text, known, unknown)));
    let (known, unknown) = if spilling { unusual(1) } else { (60, 30) };
    if parts.fill {
        parts_shown.push((Group::Buffer, Text::Fixed(fill(snapshot)), known, unknown));
    }
    let (known, unknown) = unusual(2);
    parts_shown.extend(disk.map(|text| (Group::Buffer, text, known, unknown)));
    if parts.counts {
        parts_shown.push((Group::Output, Text::Fixed(counted(snapshot.bytes_out)), 40, out_rank));
    }
    if parts.rates {
        parts_shown.push((Group::Output, Text::Fixed(per_second(output_rate)), 50, 20));
    }
    if parts.average {
        let average = match lines {
            Some(lines) => {
                format!("avg {} lines/s", count(self::per_second(lines, snapshot.elapsed) as u64))
            }
            None => format!("avg {}", rate(average_output(snapshot))),
        };
        parts_shown.push((Group::Output, Text::Fixed(average), 55, 25));
    }
    let (known, unknown) = unusual(3);
    parts_shown
        .extend(limit(snapshot.limits.output).map(|text| (Group::Output, text, known, unknown)));
    // Compressing on the wire (`--compress`): what the link carries, and the ratio so far.
    let (stream, on_wire) =
        wires_shown(snapshot).fold((0, 0), |(s, w), wire| (s + wire.stream, w + wire.bytes));
    if parts.rates && on_wire > 0 {
        let ratio = stream as f64 / on_wire as f64;
        let text = format!("wire {} \u{d7}{ratio:.1}", rate(rates.wire()));
        parts_shown.push((Group::Output, Text::Fixed(text), 57, 27));
    }
    // A stream over several connections (`--streams`): how many carry it.
    let sent_over = snapshot.streams.iter().map(Vec::len).max().unwrap_or(0);
    let over = [(Group::Input, snapshot.input_streams.len()), (Group::Output, sent_over)];
    for (group, streams) in over.into_iter().filter(|(_, streams)| *streams > 1) {
        parts_shown.push((group, Text::Fixed(format!("{streams} streams")), 58, 28));
    }
    // A connection down outranks everything but the name: it is why nothing moves.
    if let Some((_, lasted)) = snapshot.input_outages.down {
        let text = format!("waiting for the sender ({})", duration(lasted));
        parts_shown.push((Group::Input, Text::Fixed(text), 1, 1));
    }
    let down = snapshot.readers.iter().filter_map(|reader| reader.outages.down).next();
    if let Some((tries, lasted)) = down {
        let text = match tries {
            0 => format!("reconnecting ({})", duration(lasted)),
            _ => format!("reconnecting ({} try, {})", ordinal(tries), duration(lasted)),
        };
        parts_shown.push((Group::Output, Text::Fixed(text), 1, 1));
    }
    // Nothing moves: for how long, as important as a connection down, which says why instead.
    let outage = snapshot.input_outages.down.is_some() || down.is_some();
    if let Some(still) = rates.still_for().filter(|_| !subject.ended && !outage) {
        let text = Text::Fixed(format!("stalled {}", duration(still)));
        parts_shown.push((Group::Stalled, text, 1, 1));
    }
    if parts.elapsed {
        parts_shown.push((
            Group::Elapsed,
            Text::Fixed(format!("{:>DURATION_WIDTH$}", duration(snapshot.elapsed))),
            70,
            60,
        ));
    }
    if let Some(total) = subject.expected {
        if parts.bar {
            parts_shown.push((Group::Done, Text::Bar(fraction(done, total)), 30, 0));
            parts_shown.push((
                Group::Done,
                Text::Fixed(format!("{:>3}%", percent(done, total))),
                0,
                0,
            ));
        }
        let remaining = total.saturating_sub(done);
        if parts.eta && remaining > 0 && !subject.ended {
            // While the output stands still there is no estimate, but the place is kept, so
            // that the bar does not jump.
            let eta = (done_rate >= STOPPED)
                .then(|| Duration::try_from_secs_f64(remaining as f64 / done_rate).ok())
                .flatten()
                .map_or_else(|| "-:--:--".to_owned(), duration);
            parts_shown.push((Group::Done, Text::Fixed(format!("ETA {eta}")), 20, 0));
        }
    }
    let known = subject.expected.is_some();
    let mut order: Vec<usize> = (0..parts_shown.len()).collect();
    order.sort_by_key(|&at| if known { parts_shown[at].2 } else { parts_shown[at].3 });
    let mut ranks = vec![0; parts_shown.len()];
    for (rank, at) in order.into_iter().enumerate() {
        ranks[at] = rank;
    }
    parts_shown
        .into_iter()
        .zip(ranks)
        .map(|((group, text, _, _), rank)| Field { group, rank, text })
        .collect()
}

/// What the output's side is called on the line: `out`, or with several outputs, `out` and
/// the one furthest behind.
fn out_label(snapshot: &Snapshot, names: &Names) -> String {
    match snapshot.slowest() {
        Some(slowest) if names.readers() > 1 => format!("out {}", names.short(slowest)),
        _ => "out".to_owned(),
    }
}

/// The line with the `shown` most important fields, the bar `room` cells wider than its
/// least, the output's side called `out`; and whether it has a bar, which could take more
/// room.
fn compose(fields: &[Field], out: &str, shown: usize, room: usize) -> (String, bool) {
    let mut line = String::new();
    let mut last: Option<Group> = None;
    let mut elastic = false;
    for field in fields.iter().filter(|field| field.rank < shown) {
        let text = match &field.text {
            Text::Fixed(text) => text.clone(),
            Text::Bar(done) => {
                elastic = true;
                bar(*done, BAR_MIN + room)
            }
        };
        match last {
            None => {}
            Some(group) if group == field.group || group == Group::Name => line.push(' '),
            Some(_) => line.push_str("  "),
        }
        // Whichever of a side's fields comes first carries its label.
        if field.group == Group::Input && last != Some(Group::Input) {
            line += "in ";
        }
        if field.group == Group::Output && last != Some(Group::Output) {
            line += out;
            line.push(' ');
        }
        line += &text;
        last = Some(field.group);
    }
    (line, elastic)
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`.
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// `[=======>      ]`: `done` of the way, as pv draws it, `cells` wide inside the brackets.
fn bar(done: f64, cells: usize) -> String {
    let filled = ((done * cells as f64) as usize).min(cells);
    if filled == cells {
        return format!("[{}]", "=".repeat(cells));
    }
    format!("[{}>{}]", "=".repeat(filled), " ".repeat(cells - filled - 1))
}

/// `buf  61%`: how full the buffer is now, as a number, so that it never reads as progress.
///
/// Clamped at full: the fill can pass the capacity for a moment (a read lands whole before the
/// writer catches up). Rounded down, so that `100%` means really full, the state in which the
/// producer is held back.
fn fill(snapshot: &Snapshot) -> String {
    format!("buf {:>3}%", percent(snapshot.held(), snapshot.capacity))
}

/// The widest a [`count`] prints (`999k`, `1.00M`).
const COUNT_WIDTH: usize = 5;

/// A count of lines as pv shows one: as it is up to 999, then to three figures with k, M,
/// G, T (powers of 1000): `12.3k`.
fn count(n: u64) -> String {
    if n < 1000 {
        return n.to_string();
    }
    let mut value = n as f64;
    for unit in ["k", "M", "G", "T", "P"] {
        value /= 1000.0;
        if value < 999.5 || unit == "P" {
            return match value {
                v if v < 9.995 => format!("{v:.2}{unit}"),
                v if v < 99.95 => format!("{v:.1}{unit}"),
                v => format!("{v:.0}{unit}"),
            };
        }
    }
    unreachable!("the last unit takes any value")
}

/// `part` as a fraction of `whole`, at most 1; an empty whole counts as all done.
fn fraction(part: u64, whole: u64) -> f64 {
    if whole == 0 { 1.0 } else { (part as f64 / whole as f64).min(1.0) }
}

/// `part` as a whole percentage of `whole`, rounded down and capped at 100; an empty whole
/// counts as all done, since there is nothing left of it.
pub fn percent(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 100;
    }
    // In u128, so that huge counts cannot overflow the multiplication.
    (u128::from(part) * 100 / u128::from(whole)).min(100) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::{RateLimits, Tiers};

    const MIB: u64 = 1 << 20;

    /// A snapshot at `seconds` into the run; the clock is whatever the test says.
    fn at(seconds: f64, bytes_in: u64, bytes_out: u64) -> Snapshot {
        Snapshot {
            elapsed: Duration::from_secs_f64(seconds),
            capacity: 100 * MIB,
            bytes_in,
            bytes_out,
            peak_held: bytes_in - bytes_out,
            producer_blocked: Duration::ZERO,
            consumer_starved: Duration::ZERO,
            tiers: Tiers { memory: bytes_in, ..Tiers::default() },
            ..Snapshot::default()
        }
    }

    #[test]
    fn exp_of_negative_is_the_maths_librarys() {
        for x in [0.0, 1e-9, 0.001, 0.25, 0.5, 0.75, 1.0, 2.0, 5.0, 30.0, 200.0, 699.0] {
            let (ours, libm) = (exp_of_negative(x), (-x).exp());
            assert!((ours - libm).abs() <= libm * 1e-12, "e^-{x}: {ours} against {libm}");
        }
        assert_eq!(exp_of_negative(1e6), 0.0);
        assert_eq!(exp_of_negative(f64::INFINITY), 0.0);
    }

    fn close(actual: f64, expected: f64) -> bool {
        (actual - expected).abs() <= expected.abs() * 1e-9 + 1e-9
    }

    #[test]
    fn a_steady_stream_shows_its_rate_from_the_first_sample() {
        let mut rates = Rates::new();
        for step in 1..=20u64 {
            // 10 MiB/s in, 8 MiB/s out, sampled every half second.
            rates.update(&at(step as f64 / 2.0, step * 5 * MIB, step * 4 * MIB));
            assert!(close(rates.input(), 10.0 * MIB as f64), "{}", rates.input());
            assert!(close(rates.output(), 8.0 * MIB as f64), "{}", rates.output());
        }
    }

    #[test]
    fn irregular_sampling_does_not_skew_a_steady_rate() {
        let mut rates = Rates::new();
        for seconds in [0.1, 0.15, 1.4, 1.5, 4.0, 4.001] {
            let bytes = (seconds * 1e6) as u64;
            rates.update(&at(seconds, bytes, bytes));
        }
        assert!((rates.output() - 1e6).abs() < 1.0, "{}", rates.output());
    }

    #[test]
    fn a_stall_decays_then_shows_zero() {
        let mut rates = Rates::new();
        for step in 1..=20u64 {
            rates.update(&at(step as f64 / 2.0, step * MIB, step * MIB));
        }
        let before = rates.output();
        let mut previous = before;
        // Nothing moves for ten seconds: the rate falls, and is 0 once it has been still for
        // the rates' memory.
        for step in 21..=40u64 {
            rates.update(&at(step as f64 / 2.0, 20 * MIB, 20 * MIB));
            let still = Duration::from_millis(500 * (step - 20));
            if still < STILL {
                assert!(rates.output() < previous, "a stalled rate must keep falling");
                assert!(rates.output() > 0.0, "{still:?}: still moving, lately");
            } else {
                assert_eq!((rates.input(), rates.output()), (0.0, 0.0), "{still:?}");
            }
            previous = rates.output();
        }
    }

    #[test]
    fn a_stalled_side_falls_while_the_other_keeps_going() {
        let mut rates = Rates::new();
        // The consumer stops at 5 s; the producer goes on for 7.5 s more.
        for step in 1..=25u64 {
            let out = step.min(10) * MIB;
            rates.update(&at(step as f64 / 2.0, step * MIB, out));
        }
        assert!(close(rates.input(), 2.0 * MIB as f64));
        assert!(rates.output() < 0.1 * MIB as f64, "{}", rates.output());
    }

    #[test]
    fn first_and_repeated_samples_give_numbers_not_nan() {
        let mut rates = Rates::new();
        assert_eq!((rates.input(), rates.output()), (0.0, 0.0));
        // A snapshot at zero elapsed carries no time to divide by.
        rates.update(&at(0.0, 5 * MIB, 5 * MIB));
        assert_eq!((rates.input(), rates.output()), (0.0, 0.0));
        // Its bytes count with the next snapshot instead, over the time since the start.
        rates.update(&at(1.0, 6 * MIB, 6 * MIB));
        assert!(close(rates.output(), 6.0 * MIB as f64));
        // The same instant twice, and a clock that seems to go back, are ignored.
        rates.update(&at(1.0, 9 * MIB, 9 * MIB));
        rates.update(&at(0.5, 9 * MIB, 9 * MIB));
        assert!(close(rates.output(), 6.0 * MIB as f64));
        assert!(rates.input().is_finite() && rates.output().is_finite());
        // A first sample with nothing moved is zero.
        let mut idle = Rates::new();
        idle.update(&at(0.5, 0, 0));
        assert_eq!(idle.output(), 0.0);
    }

    #[test]
    fn huge_counts_in_a_tiny_interval_stay_finite() {
        let mut rates = Rates::new();
        rates.update(&Snapshot { elapsed: Duration::from_nanos(1), ..at(0.0, u64::MAX, u64::MAX) });
        assert!(rates.output().is_finite() && rates.output() > 0.0);
        assert_eq!(rate(rates.output()), "16 EiB/s");
    }

    #[test]
    fn averages_over_the_whole_run() {
        let snapshot = at(4.0, 8 * MIB, 4 * MIB);
        assert_eq!(average_input(&snapshot), 2.0 * MIB as f64);
        assert_eq!(average_output(&snapshot), MIB as f64);
        assert_eq!(average_output(&at(0.0, 1, 1)), 0.0);
    }

    #[test]
    fn durations() {
        let shown: Vec<String> = [0, 59, 83, 3_600, 36_000 + 61, 86_399, 86_400 + 3_723]
            .iter()
            .map(|&s| duration(Duration::from_secs(s)))
            .collect();
        assert_eq!(
            shown,
            ["0:00:00", "0:00:59", "0:01:23", "1:00:00", "10:01:01", "23:59:59", "1d 1:02:03"]
        );
        assert_eq!(duration(Duration::from_millis(1_999)), "0:00:01");
        assert_eq!(duration(Duration::from_secs(3_652 * 86_400)), "3652d 0:00:00");
    }

    #[test]
    fn rates_use_byte_units() {
        assert_eq!(rate(99_930_000.0), "95.3 MiB/s");
        assert_eq!(rate(512.0), "512 B/s");
        assert_eq!(rate(0.4), "0 B/s");
        assert_eq!(rate(-3.0), "0 B/s");
        assert_eq!(rate(f64::NAN), "0 B/s");
        assert_eq!(rate(f64::INFINITY), "16 EiB/s");
    }

    fn steady_rates(bytes_per_half_second: u64) -> Rates {
        let mut rates = Rates::new();
        for step in 1..=10u64 {
            let bytes = step * bytes_per_half_second;
            rates.update(&at(step as f64 / 2.0, bytes, bytes));
        }
        rates
    }

    /// One output, stdout, no name.
    fn stdout() -> Names {
        Names { outputs: vec!["stdout".into()], ..Names::default() }
    }

    /// The line of a run to stdout, still going.
    fn line(snapshot: &Snapshot, rates: &Rates, expected: Option<u64>, width: usize) -> String {
        let names = stdout();
        render(
            snapshot,
            rates,
            &Subject { names: &names, expected, ended: false, parts: LineParts::ACCEL },
            width,
        )
    }

    #[test]
    fn eta_from_the_output_rate() {
        // 2 MiB/s out, 10 of 50 MiB done: 40 MiB left is 20 s.
        let rates = steady_rates(MIB);
        let line = line(&at(5.0, 10 * MIB, 10 * MIB), &rates, Some(50 * MIB), 200);
        assert!(line.ends_with("]  20% ETA 0:00:20"), "{line}");
    }

    #[test]
    fn no_eta_when_done_and_a_placeholder_when_stopped() {
        let rates = steady_rates(MIB);
        let done = line(&at(5.0, 10 * MIB, 10 * MIB), &rates, Some(10 * MIB), 200);
        assert!(done.ends_with("=] 100%") && !done.contains("ETA"), "{done}");
        // More than expected: still 100 %, not more.
        let over = line(&at(5.0, 20 * MIB, 20 * MIB), &rates, Some(10 * MIB), 200);
        assert!(over.ends_with("=] 100%") && !over.contains("ETA"), "{over}");
        // Stopped: no estimate, but its place is kept so that the bar does not jump.
        let stopped = line(&at(5.0, 0, 0), &Rates::new(), Some(10 * MIB), 200);
        assert!(stopped.ends_with("[>") || stopped.ends_with(" ]   0% ETA -:--:--"), "{stopped}");
        let moving = line(&at(5.0, 0, 0), &rates, Some(10 * MIB), 200);
        assert_eq!(stopped.len(), moving.len());
    }

    /// Issue 35: an output that compresses shows the rate on the wire and the ratio so far,
    /// `wire 10 MiB/s ×2.7`; nothing of the kind where nothing compresses.
    #[test]
    fn the_wire_rate_and_ratio_of_an_output_that_compresses() {
        let wire = |compressing, stream, bytes| crate::meter::Wire {
            compressing,
            stream,
            bytes,
            ..Default::default()
        };
        let mut rates = Rates::new();
        let mut snapshot = at(1.0, 27 * MIB, 27 * MIB);
        snapshot.wires = vec![Some(wire(true, 27 * MIB, 10 * MIB))];
        rates.update(&snapshot);
        for second in 2..10u64 {
            snapshot = at(second as f64, 27 * MIB * second, 27 * MIB * second);
            snapshot.wires = vec![Some(wire(true, 27 * MIB * second, 10 * MIB * second))];
            rates.update(&snapshot);
        }
        let shown = line(&snapshot, &rates, None, 200);
        assert!(shown.contains("wire 10 MiB/s \u{d7}2.7"), "{shown}");
        snapshot.wires = vec![Some(wire(false, 27 * MIB * 9, 27 * MIB * 9)), None];
        let plain = line(&snapshot, &rates, None, 200);
        assert!(!plain.contains("wire"), "{plain}");
    }

    /// Issue 36: a stream over several connections says how many, at either end; a single
    /// connection says nothing of it.
    #[test]
    fn several_streams_are_said() {
        let mut snapshot = at(5.0, 10 * MIB, 5 * MIB);
        let reader = crate::meter::ReaderSnapshot { bytes: 5 * MIB, ..Default::default() };
        snapshot.readers = vec![reader];
        let rates = steady_rates(MIB);
        snapshot.streams = vec![vec![crate::meter::Stream::default(); 4]];
        let sending = line(&snapshot, &rates, None, 200);
        assert!(sending.contains("4 streams"), "{sending}");
        snapshot.streams = vec![vec![]];
        snapshot.input_streams = vec![crate::meter::Stream::default(); 8];
        let receiving = line(&snapshot, &rates, None, 200);
        assert!(receiving.contains("8 streams"), "{receiving}");
        snapshot.input_streams = vec![];
        let single = line(&snapshot, &rates, None, 200);
        assert!(!single.contains("streams"), "{single}");
    }

    /// Issue 35: a receiver (`--from`) of frames that come compressed shows the same.
    #[test]
    fn the_wire_rate_and_ratio_of_an_input_of_compressed_frames() {
        let wire = |second| crate::meter::Wire {
            compressing: true,
            stream: 27 * MIB * second,
            bytes: 10 * MIB * second,
            ..Default::default()
        };
        let mut rates = Rates::new();
        let mut snapshot = at(1.0, 27 * MIB, 27 * MIB);
        for second in 1..10u64 {
            snapshot = at(second as f64, 27 * MIB * second, 27 * MIB * second);
            snapshot.input_wire = Some(wire(second));
            rates.update(&snapshot);
        }
        let shown = line(&snapshot, &rates, None, 200);
        assert!(shown.contains("wire 10 MiB/s \u{d7}2.7"), "{shown}");
    }

    /// Issue 20: a connection down is said, and outlasts the routine fields in a narrow line.
    #[test]
    fn a_connection_down_is_said() {
        let mut snapshot = at(5.0, 10 * MIB, 5 * MIB);
        let reader = crate::meter::ReaderSnapshot { bytes: 5 * MIB, ..Default::default() };
        snapshot.readers = vec![reader];
        snapshot.readers[0].outages.down = Some((3, Duration::from_secs(12)));
        let rates = steady_rates(MIB);
        let wide = line(&snapshot, &rates, None, 200);
        assert!(wide.contains("reconnecting (3rd try, 0:00:12)"), "{wide}");
        let narrow = line(&snapshot, &rates, None, 50);
        assert!(narrow.contains("reconnecting (3rd try, 0:00:12)"), "{narrow}");
        snapshot.readers[0].outages.down = None;
        snapshot.input_outages.down = Some((0, Duration::from_secs(4)));
        let waiting = line(&snapshot, &rates, None, 200);
        assert!(waiting.contains("waiting for the sender (0:00:04)"), "{waiting}");
        assert!(!waiting.contains("reconnecting"), "{waiting}");
        let ordinals: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101].map(ordinal).into();
        assert_eq!(
            ordinals,
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st"]
        );
    }

    /// Issue 32, item 7: once a side has moved nothing for the rates' memory, its rate is 0
    /// (not a rate that decays for minutes, with an ETA of years), and once neither has,
    /// the line says for how long nothing has moved. A pause shorter than that is no stall,
    /// a side that moves keeps its rate, and the next byte ends the stall.
    #[test]
    fn a_stall_shows_zero_and_how_long_nothing_has_moved() {
        let total = Some(50 * MIB);
        // 2 MiB/s for 5 s, then nothing for 15 s, sampled every half second.
        let mut rates = steady_rates(MIB);
        rates.update(&at(5.5, 10 * MIB, 10 * MIB));
        let paused = line(&at(5.5, 10 * MIB, 10 * MIB), &rates, total, 200);
        assert!(!paused.contains("stalled") && !paused.contains(" 0 B/s"), "{paused}");
        for step in 12..=40u64 {
            rates.update(&at(step as f64 / 2.0, 10 * MIB, 10 * MIB));
        }
        assert_eq!((rates.input(), rates.output()), (0.0, 0.0));
        let stalled = line(&at(20.0, 10 * MIB, 10 * MIB), &rates, total, 120);
        assert_eq!(
            stalled,
            "in   10 MiB      0 B/s  buf   0%  out   10 MiB      0 B/s  stalled 0:00:15  0:00:20  \
             [===>            ]  20% ETA -:--:--"
        );
        let narrow = line(&at(20.0, 10 * MIB, 10 * MIB), &rates, None, 30);
        assert!(narrow.contains("stalled 0:00:15"), "{narrow}");
        // The input moves again, the output not yet: the input's rate, no stall.
        let moving = at(20.5, 11 * MIB, 10 * MIB);
        rates.update(&moving);
        let shown = line(&moving, &rates, total, 200);
        assert!(rates.input() > 0.0 && rates.output() == 0.0, "{shown}");
        assert!(!shown.contains("stalled"), "{shown}");
    }

    #[test]
    fn the_final_line_has_no_eta() {
        let names = stdout();
        let snapshot = at(5.0, 10 * MIB, 5 * MIB);
        let subject = Subject {
            names: &names,
            expected: Some(10 * MIB),
            ended: true,
            parts: LineParts::ACCEL,
        };
        let rates = Rates::over_the_run(&snapshot);
        let last = render(&snapshot, &rates, &subject, 100);
        assert!(last.ends_with("]  50%") && !last.contains("ETA"), "{last}");
        assert!(last.contains("out    5 MiB    1 MiB/s"), "averages over the run: {last}");
    }

    #[test]
    fn percent_and_eta_only_when_a_total_is_expected() {
        let rates = steady_rates(MIB);
        let line = line(&at(5.0, 10 * MIB, 10 * MIB), &rates, None, 200);
        assert!(!line.contains("ETA") && !line.contains('['), "{line}");
        assert!(line.ends_with("0:00:05"), "{line}");
    }

    fn with_fill(fill: u64) -> Snapshot {
        at(1.0, 200 * MIB + fill, 200 * MIB)
    }

    #[test]
    fn the_fill_is_a_number_not_a_bar() {
        assert_eq!(super::fill(&with_fill(0)), "buf   0%");
        assert_eq!(super::fill(&with_fill(50 * MIB)), "buf  50%");
        assert_eq!(super::fill(&with_fill(100 * MIB)), "buf 100%");
        // Just short of full is not shown as full.
        assert_eq!(super::fill(&with_fill(100 * MIB - 1)), "buf  99%");
        // Past the capacity, which happens for a moment, is clamped.
        assert_eq!(super::fill(&with_fill(300 * MIB)), "buf 100%");
        let line = line(&with_fill(300 * MIB), &Rates::new(), None, 200);
        assert!(line.contains("buf 100%") && !line.contains('['), "{line}");
    }

    #[test]
    fn bytes_on_disk_follow_the_fill() {
        let snapshot = Snapshot { held_disk: 2560 * MIB, ..with_fill(3000 * MIB) };
        let shown = line(&snapshot, &Rates::new(), None, 200);
        assert!(shown.contains("buf 100% + 2.5 GiB on disk  out"), "{shown}");
    }

    #[test]
    fn a_rate_limit_follows_the_rate_it_caps() {
        let limits = RateLimits { output: 10 * MIB, input: 0 };
        let snapshot = Snapshot { limits, ..with_fill(0) };
        let shown = line(&snapshot, &Rates::new(), None, 200);
        assert!(shown.contains("/s max 10 MiB/s  0:00:01"), "{shown}");
        assert_eq!(shown.matches("max").count(), 1, "{shown}");
        let limits = RateLimits { output: 0, input: MIB / 2 };
        let shown = line(&Snapshot { limits, ..with_fill(0) }, &Rates::new(), None, 200);
        assert!(shown.contains("/s max 512 KiB/s  buf"), "{shown}");
    }

    #[test]
    fn a_buffer_of_no_size_does_not_divide_by_zero() {
        let snapshot = Snapshot { capacity: 0, ..with_fill(0) };
        assert_eq!(super::fill(&snapshot), "buf 100%");
    }

    #[test]
    fn the_bar_as_pv_draws_it() {
        assert_eq!(bar(0.0, 10), "[>         ]");
        assert_eq!(bar(0.39, 10), "[===>      ]");
        assert_eq!(bar(0.999, 10), "[=========>]");
        assert_eq!(bar(1.0, 10), "[==========]");
        assert_eq!(bar(f64::NAN, 4), "[>   ]");
    }

    fn busy() -> (Snapshot, Rates) {
        let mut rates = Rates::new();
        for step in 1..=26u64 {
            rates.update(&at(step as f64 / 2.0, step * 60 * MIB, step * 48 * MIB));
        }
        (Snapshot { capacity: 1024 * MIB, ..at(13.0, 1560 * MIB, 1248 * MIB) }, rates)
    }

    #[test]
    fn the_full_line() {
        let (snapshot, rates) = busy();
        assert_eq!(
            line(&snapshot, &rates, Some(2772 * MIB), 120),
            "in 1.52 GiB  120 MiB/s  buf  30%  out 1.22 GiB   96 MiB/s  0:00:13  \
             [==============>                  ]  45% ETA 0:00:15"
        );
        assert_eq!(
            line(&snapshot, &rates, None, 120),
            "in 1.52 GiB  120 MiB/s  buf  30%  out 1.22 GiB   96 MiB/s  0:00:13"
        );
    }

    /// The line with only `parts` (pv's display switches).
    fn parts_of(
        snapshot: &Snapshot,
        rates: &Rates,
        expected: Option<u64>,
        parts: LineParts,
    ) -> String {
        let names = stdout();
        render(snapshot, rates, &Subject { names: &names, expected, ended: false, parts }, 120)
    }

    /// pv's switches choose the parts, in accel's layout: `-t` the time alone, `-b` the bytes
    /// on both sides, `-pterb` all but the fill, `-a` the output's average over the run.
    #[test]
    fn pv_switches_choose_the_parts() {
        let (snapshot, rates) = busy();
        let expected = Some(2772 * MIB);
        let only = |parts: LineParts| parts_of(&snapshot, &rates, expected, parts);
        assert_eq!(only(LineParts { elapsed: true, ..LineParts::NONE }), "0:00:13");
        assert_eq!(
            only(LineParts { counts: true, ..LineParts::NONE }),
            "in 1.52 GiB  out 1.22 GiB"
        );
        assert_eq!(
            only(LineParts { rates: true, ..LineParts::NONE }),
            "in  120 MiB/s  out   96 MiB/s"
        );
        assert_eq!(
            only(LineParts { fill: true, eta: true, ..LineParts::NONE }),
            "buf  30%  ETA 0:00:15"
        );
        assert_eq!(
            only(LineParts { average: true, ..LineParts::NONE }),
            format!("out avg {}", rate(1248.0 * MIB as f64 / 13.0))
        );
        let pterb = LineParts { fill: false, ..LineParts::ACCEL };
        let line = only(pterb);
        assert!(line.starts_with("in 1.52 GiB  120 MiB/s  out 1.22 GiB"), "{line}");
        assert!(line.ends_with("]  45% ETA 0:00:15") && !line.contains("buf"), "{line}");
        // Without a size, -p and -e have nothing to show.
        let bar = LineParts { bar: true, eta: true, ..LineParts::NONE };
        assert_eq!(parts_of(&snapshot, &rates, None, bar), "");
    }

    /// Where lines are counted (pv's -l), the input's side counts them, and percent done and
    /// the ETA go by them; the output's side stays in bytes.
    #[test]
    fn counted_lines_show_on_the_input_side() {
        let mut rates = Rates::new();
        let at_lines = |seconds: f64, lines: u64| Snapshot {
            lines: Some(lines),
            ..at(seconds, lines * 100, lines * 100)
        };
        for step in 1..=20u64 {
            rates.update(&at_lines(step as f64 / 2.0, step * 500));
        }
        let snapshot = at_lines(10.0, 10_000);
        let line = parts_of(&snapshot, &rates, Some(40_000), LineParts::ACCEL);
        assert!(line.starts_with("in 10.0k lines 1.00k lines/s  buf   0%  out  977 KiB"), "{line}");
        assert!(line.ends_with("]  25% ETA 0:00:30"), "{line}");
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1.00k");
        assert_eq!(count(12_345), "12.3k");
        assert_eq!(count(999_499), "999k");
        assert_eq!(count(999_500), "1.00M");
        assert_eq!(count(u64::MAX), "18447P");
    }

    /// Issue 11, item 1: at 80 columns, with the size known, percent done and ETA show, after a
    /// pv-like bar; the fill is a number that cannot be read as progress.
    #[test]
    fn at_80_columns_percent_done_and_eta_show() {
        let (snapshot, rates) = busy();
        // The watcher leaves the last column free, so that the terminal never wraps.
        assert_eq!(
            line(&snapshot, &rates, Some(2772 * MIB), 79),
            "buf  30%  out 1.22 GiB   96 MiB/s  0:00:13  [=======>        ]  45% ETA 0:00:15"
        );
        for width in [60, 70, 80, 100] {
            let line = line(&snapshot, &rates, Some(2772 * MIB), width);
            assert!(
                line.contains("] 45% ETA 0:00:15") || line.contains("]  45% ETA 0:00:15"),
                "{width}: {line}"
            );
            assert_eq!(line.len(), width, "the bar takes the room left: {line}");
            assert!(!line.contains('#'), "{line}");
        }
        // Without a size, everything fits.
        assert_eq!(
            line(&snapshot, &rates, None, 79),
            "in 1.52 GiB  120 MiB/s  buf  30%  out 1.22 GiB   96 MiB/s  0:00:13"
        );
    }

    #[test]
    fn narrow_lines_keep_the_most_important_parts() {
        let (snapshot, rates) = busy();
        let expected = Some(2772 * MIB);
        assert_eq!(line(&snapshot, &rates, expected, 4), " 45%");
        assert_eq!(line(&snapshot, &rates, expected, 16), " 45% ETA 0:00:15");
        assert_eq!(line(&snapshot, &rates, expected, 30), "[====>      ]  45% ETA 0:00:15");
        assert_eq!(
            line(&snapshot, &rates, expected, 45),
            "out 1.22 GiB  [=====>      ]  45% ETA 0:00:15"
        );
        assert_eq!(line(&snapshot, &rates, None, 12), "out 1.22 GiB");
        assert_eq!(line(&snapshot, &rates, None, 30), "out 1.22 GiB   96 MiB/s");
        assert_eq!(line(&snapshot, &rates, None, 40), "buf  30%  out 1.22 GiB   96 MiB/s");
        assert_eq!(
            line(&snapshot, &rates, None, 50),
            "in  120 MiB/s  buf  30%  out 1.22 GiB   96 MiB/s",
            "the input's rate, labelled, before its bytes"
        );
        assert_eq!(line(&snapshot, &rates, None, 5), "out 1");
    }

    #[test]
    fn the_name_comes_first_and_stays() {
        let (snapshot, rates) = busy();
        let names = Names { name: Some("gz".into()), ..stdout() };
        let subject =
            Subject { names: &names, expected: None, ended: false, parts: LineParts::ACCEL };
        assert_eq!(render(&snapshot, &rates, &subject, 30), "gz: out 1.22 GiB   96 MiB/s");
        let subject = Subject { expected: Some(2772 * MIB), ..subject };
        assert_eq!(render(&snapshot, &rates, &subject, 20), "gz:  45% ETA 0:00:15");
    }

    #[test]
    fn several_outputs_name_the_slowest() {
        use crate::meter::ReaderSnapshot;
        let (snapshot, rates) = busy();
        let names = Names {
            outputs: vec!["stdout".into(), "/mnt/backup/a-rather-long-file-name.img".into()],
            hashes: vec![crate::engine::digest::Algorithm::Sha256],
            ..Names::default()
        };
        let reader = |bytes| ReaderSnapshot { bytes, ..ReaderSnapshot::default() };
        let snapshot = Snapshot {
            readers: vec![reader(1560 * MIB), reader(1248 * MIB), reader(1500 * MIB)],
            ..snapshot
        };
        let subject =
            Subject { names: &names, expected: None, ended: false, parts: LineParts::ACCEL };
        let line = render(&snapshot, &rates, &subject, 200);
        assert!(line.contains("  out a-rather-long-file-~ 1.22 GiB "), "{line}");
        let snapshot = Snapshot {
            readers: vec![reader(1560 * MIB), reader(1560 * MIB), reader(1248 * MIB)],
            ..snapshot
        };
        let line = render(&snapshot, &rates, &subject, 200);
        assert!(line.contains("  out sha256 1.22 GiB "), "{line}");
        // A process substitution, `-o >(gzip > f)`, by its descriptor's number.
        let names = Names { outputs: vec!["stdout".into(), "/dev/fd/63".into()], ..names.clone() };
        let snapshot = Snapshot {
            readers: vec![reader(1560 * MIB), reader(1248 * MIB), reader(1560 * MIB)],
            ..snapshot
        };
        let subject = Subject { names: &names, ..subject };
        let line = render(&snapshot, &rates, &subject, 200);
        assert!(line.contains("  out fd 63 1.22 GiB "), "{line}");
    }

    #[test]
    fn never_wider_than_asked() {
        let (snapshot, rates) = busy();
        let huge = Snapshot {
            elapsed: Duration::from_secs(10 * 365 * 86_400),
            capacity: u64::MAX,
            bytes_in: u64::MAX,
            bytes_out: u64::MAX - 1,
            peak_held: u64::MAX,
            ..snapshot.clone()
        };
        let mut huge_rates = Rates::new();
        huge_rates.update(&Snapshot { elapsed: Duration::from_nanos(1), ..huge.clone() });
        for (snapshot, rates) in
            [(snapshot, &rates), (huge.clone(), &huge_rates), (at(0.0, 0, 0), &rates)]
        {
            for expected in [None, Some(0), Some(u64::MAX)] {
                for width in [0, 1, 2, 11, 12, 19, 20, 21, 30, 40, 59, 60, 79, 80, 99, 100, 200] {
                    let line = line(&snapshot, rates, expected, width);
                    assert!(line.chars().count() <= width, "{width}: {line:?}");
                    assert!(line.is_ascii() && !line.contains('\n'), "{line:?}");
                    if width >= 20 && expected.is_none() {
                        assert!(line.contains("out "), "{width}: {line:?}");
                    }
                    if width >= 16 && expected.is_some() {
                        assert!(line.contains('%'), "{width}: {line:?}");
                    }
                }
            }
        }
        assert_eq!(line(&huge, &huge_rates, None, 0), "");
        assert_eq!(line(&huge, &huge_rates, None, 1), "o");
        let wide = line(&huge, &huge_rates, Some(u64::MAX), 200);
        assert!(wide.contains("16 EiB") && wide.contains("3650d 0:00:00"), "{wide}");
    }

    #[test]
    fn the_line_keeps_its_width_while_values_change() {
        // Within the same day and under ten hours, changing counts and rates do not move the
        // parts around: every field is padded to its widest.
        for expected in [None, Some(1 << 30)] {
            let widths: Vec<usize> =
                [(1, 1), (1023, 900), (5 * MIB, 3 * MIB), (700 * MIB, 7 * MIB)]
                    .iter()
                    .map(|&(bytes_in, bytes_out)| {
                        let mut rates = Rates::new();
                        rates.update(&at(0.5, bytes_in / 3, bytes_out / 7));
                        rates.update(&at(1.0, bytes_in, bytes_out));
                        line(&at(1.0, bytes_in, bytes_out), &rates, expected, 200).len()
                    })
                    .collect();
            assert!(widths.windows(2).all(|w| w[0] == w[1]), "{widths:?}");
        }
    }

    #[test]
    fn at_80_columns_what_is_unusual_stays() {
        use crate::meter::RateLimits;
        let spilling =
            Snapshot { capacity: 64 * MIB, held_disk: 959 * MIB, ..at(30.0, 1023 * MIB, 64 * MIB) };
        let capped = Snapshot {
            limits: RateLimits { output: 10 * MIB, input: 5 * MIB },
            ..at(30.0, 1023 * MIB, 64 * MIB)
        };
        let mut rates = Rates::new();
        rates.update(&spilling);
        let named = Names { name: Some("backup".into()), ..stdout() };
        for expected in [None, Some(2048 * MIB)] {
            for width in [60, 79] {
                let subject =
                    Subject { names: &named, expected, ended: false, parts: LineParts::ACCEL };
                let line = render(&spilling, &rates, &subject, width);
                assert!(line.contains("buf 100% + 959 MiB on disk"), "{width}: {line}");
                let line = render(&capped, &rates, &subject, width);
                assert!(line.contains("max 10 MiB/s"), "{width}: {line}");
                assert!(line.contains("max 5 MiB/s"), "{width}: {line}");
                assert!(line.contains('%') || expected.is_none(), "{width}: {line}");
                assert!(line.contains("out ") || expected.is_some(), "{width}: {line}");
            }
        }
    }
}
