//! The progress line: one pv-like line on stderr, redrawn about twice a second.
//!
//! This module owns what the line says and how it shrinks, and the smoothing that turns
//! successive snapshots into rates. It is pure: time comes only from
//! [`Snapshot::elapsed`], never from a clock of its own, so tests drive it with hand-built
//! snapshots and the watcher thread decides when to sample. Writing the line, the `\r` and the
//! clearing are the caller's business.
//!
//! The line shows the pipeline left to right, `in ... buf [...] ... out ...`, but when the
//! terminal is narrow, parts are dropped by importance, not position: the ETA goes first and
//! bytes out stay last, since they are what the consumer has actually received.

use std::time::Duration;

use crate::meter::Snapshot;
use crate::size::Bytes;

/// How long the rates remember, in seconds: the time constant of the exponential smoothing.
///
/// Two seconds, or about four redraws: long enough that a producer writing in bursts does not
/// make the rate jump with every redraw, short enough that a stall shows within a redraw or two
/// and has taken the rate to under 1 % of its old value ten seconds later.
const MEMORY_S: f64 = 2.0;

/// Below this many bytes per second the output is taken as stopped and no ETA is given: the
/// estimate would be years long and meaningless.
const STOPPED: f64 = 1.0;

/// Cells in the fill bar; ten, so that each `#` is a tenth of the buffer.
const BAR: usize = 10;

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
    /// Exponentially weighted sums of the interval rates, started from zero.
    input: f64,
    output: f64,
    /// The weight those sums have gathered so far, `1 - e^(-t/MEMORY_S)`; dividing by it undoes
    /// the start from zero, which would otherwise show a rate creeping up for seconds.
    weight: f64,
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
        // The share of memory this interval takes over: an interval of MEMORY_S replaces 63 %.
        let share = 1.0 - (-seconds / MEMORY_S).exp();
        self.input += share * (input - self.input);
        self.output += share * (output - self.output);
        self.weight += share * (1.0 - self.weight);
        self.last_elapsed = snapshot.elapsed;
        self.last_in = snapshot.bytes_in;
        self.last_out = snapshot.bytes_out;
    }

    /// Bytes per second read from the producer, lately.
    pub fn input(&self) -> f64 {
        self.unbiased(self.input)
    }

    /// Bytes per second written to the consumer, lately.
    pub fn output(&self) -> f64 {
        self.unbiased(self.output)
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

/// A span of time as `h:mm:ss`, or `Nd h:mm:ss` from a day on; fractions of a second are cut.
pub fn duration(d: Duration) -> String {
    let total = d.as_secs();
    let (days, hours) = (total / 86_400, total / 3_600 % 24);
    let (minutes, seconds) = (total / 60 % 60, total % 60);
    if days > 0 {
        format!("{days}d {hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{hours}:{minutes:02}:{seconds:02}")
    }
}

/// A rate as people read it: `95.3 MiB/s`. Negative and NaN rates show as `0 B/s`.
pub fn rate(bytes_per_s: f64) -> String {
    // `as` saturates: NaN and negatives become 0, anything past u64::MAX becomes u64::MAX.
    format!("{}/s", Bytes(bytes_per_s as u64))
}

/// One progress line of at most `width` characters, without newline or escape codes.
///
/// `expected` is the total the user said is coming; with it the line also shows the share done
/// and, while the output moves, the time left at the current output rate. Numbers are padded to
/// their widest so that the line keeps its shape while they change. When the line does not fit,
/// parts go in this order: the ETA, the share done, the elapsed time, bytes in, the input rate,
/// the fill bar, the output rate; bytes out stay, cut short only below a dozen columns.
pub fn render(snapshot: &Snapshot, rates: &Rates, expected: Option<u64>, width: usize) -> String {
    let parts = parts(snapshot, rates, expected);
    // Adding a part only lengthens the line, so the first fit from the fullest down is the best.
    for shown in (1..=parts.len()).rev() {
        let line = compose(&parts, shown);
        if line.chars().count() <= width {
            return line;
        }
    }
    compose(&parts, 1).chars().take(width).collect()
}

/// The pieces of the line, most important first.
#[derive(Debug)]
struct Parts {
    bytes_out: String,
    output_rate: String,
    buffer: String,
    input_rate: String,
    bytes_in: String,
    elapsed: String,
    done: Option<String>,
    eta: Option<String>,
}

impl Parts {
    /// How many parts there are to show, counting only those that exist.
    fn len(&self) -> usize {
        6 + self.done.is_some() as usize + self.eta.is_some() as usize
    }
}

fn parts(snapshot: &Snapshot, rates: &Rates, expected: Option<u64>) -> Parts {
    let output_rate = rates.output();
    let (done, eta) = match expected {
        None => (None, None),
        Some(total) => {
            let remaining = total.saturating_sub(snapshot.bytes_out);
            let eta = (remaining > 0 && output_rate >= STOPPED)
                .then(|| Duration::try_from_secs_f64(remaining as f64 / output_rate).ok())
                .flatten()
                .map(|left| format!("ETA {}", duration(left)));
            (Some(format!("{:>3}%", percent(snapshot.bytes_out, total))), eta)
        }
    };
    Parts {
        bytes_out: format!("{:>BYTES_WIDTH$}", Bytes(snapshot.bytes_out).to_string()),
        output_rate: format!("{:>RATE_WIDTH$}", rate(output_rate)),
        buffer: fill_bar(snapshot),
        input_rate: format!("{:>RATE_WIDTH$}", rate(rates.input())),
        bytes_in: format!("{:>BYTES_WIDTH$}", Bytes(snapshot.bytes_in).to_string()),
        elapsed: format!("{:>DURATION_WIDTH$}", duration(snapshot.elapsed)),
        done,
        eta,
    }
}

/// The line with the `shown` most important parts, laid out in pipeline order.
fn compose(parts: &Parts, shown: usize) -> String {
    // Ranks follow the fields of `Parts`: 0 bytes out, 1 output rate, 2 fill bar, 3 input rate,
    // 4 bytes in, 5 elapsed, 6 share done, 7 ETA.
    let has = |rank: usize| shown > rank;
    let mut groups = Vec::new();
    if has(3) || has(4) {
        let mut group = String::from("in");
        if has(4) {
            group += &format!(" {}", parts.bytes_in);
        }
        if has(3) {
            group += &format!(" {}", parts.input_rate);
        }
        groups.push(group);
    }
    if has(2) {
        groups.push(format!("buf {}", parts.buffer));
    }
    let mut out = format!("out {}", parts.bytes_out);
    if has(1) {
        out += &format!(" {}", parts.output_rate);
    }
    groups.push(out);
    if has(5) {
        groups.push(parts.elapsed.clone());
    }
    if let (true, Some(done)) = (has(6), &parts.done) {
        let mut group = done.clone();
        if let (true, Some(eta)) = (has(7), &parts.eta) {
            group += &format!(" {eta}");
        }
        groups.push(group);
    }
    groups.join("  ")
}

/// `[######    ]  61%`: how full the buffer is now; while bytes wait in the spill file,
/// followed by how many, `+ 2.5 GiB on disk`.
///
/// Clamped at full: the fill can pass the capacity for a moment (a read lands whole before the
/// writer catches up), and a bar longer than its frame would only break the line. Both the bar
/// and the percentage round down, so that a full bar and `100%` mean really full, the state in
/// which the producer is held back (or spills).
fn fill_bar(snapshot: &Snapshot) -> String {
    let percent = percent(snapshot.fill(), snapshot.capacity);
    let cells = (percent as usize * BAR / 100).min(BAR);
    let bar = format!("[{}{}] {percent:>3}%", "#".repeat(cells), " ".repeat(BAR - cells));
    match snapshot.held_disk {
        0 => bar,
        disk => format!("{bar} + {} on disk", Bytes(disk)),
    }
}

/// `part` as a whole percentage of `whole`, rounded down and capped at 100; an empty whole
/// counts as all done, since there is nothing left of it.
fn percent(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 100;
    }
    // In u128, so that huge counts cannot overflow the multiplication.
    (u128::from(part) * 100 / u128::from(whole)).min(100) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::Tiers;

    const MIB: u64 = 1 << 20;

    /// A snapshot at `seconds` into the run; the clock is whatever the test says.
    fn at(seconds: f64, bytes_in: u64, bytes_out: u64) -> Snapshot {
        Snapshot {
            elapsed: Duration::from_secs_f64(seconds),
            capacity: 100 * MIB,
            bytes_in,
            bytes_out,
            peak_fill: bytes_in - bytes_out,
            producer_blocked: Duration::ZERO,
            consumer_starved: Duration::ZERO,
            tiers: Tiers { memory: bytes_in, ..Tiers::default() },
            ..Snapshot::default()
        }
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
    fn a_stall_decays_toward_zero() {
        let mut rates = Rates::new();
        for step in 1..=20u64 {
            rates.update(&at(step as f64 / 2.0, step * MIB, step * MIB));
        }
        let before = rates.output();
        let mut previous = before;
        // Nothing moves for ten seconds.
        for step in 21..=40u64 {
            rates.update(&at(step as f64 / 2.0, 20 * MIB, 20 * MIB));
            assert!(rates.output() < previous, "a stalled rate must keep falling");
            previous = rates.output();
        }
        assert!(rates.output() < before * 0.01, "{} after ten stalled seconds", rates.output());
        assert!(rates.input() < before * 0.01);
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

    #[test]
    fn eta_from_the_output_rate() {
        // 2 MiB/s out, 10 of 50 MiB done: 40 MiB left is 20 s.
        let rates = steady_rates(MIB);
        let line = render(&at(5.0, 10 * MIB, 10 * MIB), &rates, Some(50 * MIB), 200);
        assert!(line.ends_with(" 20% ETA 0:00:20"), "{line}");
    }

    #[test]
    fn no_eta_when_done_or_stopped() {
        let rates = steady_rates(MIB);
        let done = render(&at(5.0, 10 * MIB, 10 * MIB), &rates, Some(10 * MIB), 200);
        assert!(done.ends_with("100%") && !done.contains("ETA"), "{done}");
        // More than expected: still 100 %, not more.
        let over = render(&at(5.0, 20 * MIB, 20 * MIB), &rates, Some(10 * MIB), 200);
        assert!(over.ends_with("100%") && !over.contains("ETA"), "{over}");
        let stopped = render(&at(5.0, 0, 0), &Rates::new(), Some(10 * MIB), 200);
        assert!(stopped.ends_with("  0%") && !stopped.contains("ETA"), "{stopped}");
    }

    #[test]
    fn percent_and_eta_only_when_a_total_is_expected() {
        let rates = steady_rates(MIB);
        let line = render(&at(5.0, 10 * MIB, 10 * MIB), &rates, None, 200);
        assert!(!line.contains("ETA") && !line.ends_with('%'), "{line}");
        assert!(line.ends_with("0:00:05"), "{line}");
    }

    fn with_fill(fill: u64) -> Snapshot {
        at(1.0, 200 * MIB + fill, 200 * MIB)
    }

    #[test]
    fn fill_bar_and_percent() {
        assert_eq!(fill_bar(&with_fill(0)), "[          ]   0%");
        assert_eq!(fill_bar(&with_fill(50 * MIB)), "[#####     ]  50%");
        assert_eq!(fill_bar(&with_fill(100 * MIB)), "[##########] 100%");
        // Just short of full is not shown as full.
        assert_eq!(fill_bar(&with_fill(100 * MIB - 1)), "[######### ]  99%");
        // Past the capacity, which happens for a moment, is clamped.
        assert_eq!(fill_bar(&with_fill(300 * MIB)), "[##########] 100%");
        let line = render(&with_fill(300 * MIB), &Rates::new(), None, 200);
        assert!(line.contains("buf [##########] 100%"), "{line}");
    }

    #[test]
    fn bytes_on_disk_follow_the_bar() {
        let snapshot = Snapshot { held_disk: 2560 * MIB, ..with_fill(3000 * MIB) };
        assert_eq!(fill_bar(&snapshot), "[##########] 100% + 2.5 GiB on disk");
        let line = render(&snapshot, &Rates::new(), None, 200);
        assert!(line.contains("buf [##########] 100% + 2.5 GiB on disk  out"), "{line}");
    }

    #[test]
    fn a_buffer_of_no_size_does_not_divide_by_zero() {
        let snapshot = Snapshot { capacity: 0, ..with_fill(0) };
        assert_eq!(fill_bar(&snapshot), "[##########] 100%");
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
            render(&snapshot, &rates, Some(2772 * MIB), 200),
            "in 1.52 GiB  120 MiB/s  buf [###       ]  30%  out 1.22 GiB   96 MiB/s  \
             0:00:13   45% ETA 0:00:15"
        );
    }

    #[test]
    fn narrow_lines_keep_the_most_important_parts() {
        let (snapshot, rates) = busy();
        let expected = Some(2772 * MIB);
        assert_eq!(render(&snapshot, &rates, expected, 20), "out 1.22 GiB");
        assert_eq!(render(&snapshot, &rates, expected, 30), "out 1.22 GiB   96 MiB/s");
        let line = render(&snapshot, &rates, expected, 60);
        assert_eq!(line, "buf [###       ]  30%  out 1.22 GiB   96 MiB/s");
        let line = render(&snapshot, &rates, expected, 61);
        assert_eq!(line, "in  120 MiB/s  buf [###       ]  30%  out 1.22 GiB   96 MiB/s");
        let line = render(&snapshot, &rates, expected, 80);
        assert!(line.ends_with("96 MiB/s  0:00:13"), "{line}");
        assert_eq!(render(&snapshot, &rates, expected, 12), "out 1.22 GiB");
        assert_eq!(render(&snapshot, &rates, expected, 5), "out 1");
    }

    #[test]
    fn never_wider_than_asked() {
        let (snapshot, rates) = busy();
        let huge = Snapshot {
            elapsed: Duration::from_secs(10 * 365 * 86_400),
            capacity: u64::MAX,
            bytes_in: u64::MAX,
            bytes_out: u64::MAX - 1,
            peak_fill: u64::MAX,
            ..snapshot.clone()
        };
        let mut huge_rates = Rates::new();
        huge_rates.update(&Snapshot { elapsed: Duration::from_nanos(1), ..huge.clone() });
        for (snapshot, rates) in
            [(snapshot, &rates), (huge.clone(), &huge_rates), (at(0.0, 0, 0), &rates)]
        {
            for expected in [None, Some(0), Some(u64::MAX)] {
                for width in [0, 1, 2, 11, 12, 19, 20, 21, 30, 40, 59, 60, 80, 99, 100, 200] {
                    let line = render(&snapshot, rates, expected, width);
                    assert!(line.chars().count() <= width, "{width}: {line:?}");
                    assert!(line.is_ascii() && !line.contains('\n'), "{line:?}");
                    if width >= 20 {
                        assert!(line.contains("out "), "{width}: {line:?}");
                    }
                }
            }
        }
        assert_eq!(render(&huge, &huge_rates, None, 0), "");
        assert_eq!(render(&huge, &huge_rates, None, 1), "o");
        let wide = render(&huge, &huge_rates, Some(u64::MAX), 200);
        assert!(wide.contains("16 EiB") && wide.contains("3650d 0:00:00"), "{wide}");
    }

    #[test]
    fn the_line_keeps_its_width_while_values_change() {
        // Within the same day and under ten hours, changing counts and rates do not move the
        // parts around: every field is padded to its widest.
        let widths: Vec<usize> = [(1, 1), (1023, 900), (5 * MIB, 3 * MIB), (700 * MIB, 7 * MIB)]
            .iter()
            .map(|&(bytes_in, bytes_out)| {
                let mut rates = Rates::new();
                rates.update(&at(0.5, bytes_in / 3, bytes_out / 7));
                rates.update(&at(1.0, bytes_in, bytes_out));
                render(&at(1.0, bytes_in, bytes_out), &rates, None, 200).len()
            })
            .collect();
        assert!(widths.windows(2).all(|w| w[0] == w[1]), "{widths:?}");
    }
}
