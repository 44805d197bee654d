//! The final report, and the verdict that names the bottleneck.
//!
//! Every pipeline buffer can say how many bytes went by; what accel can say besides is which side
//! held the other up, because the meter timed both kinds of wait: input held back by a full
//! buffer, and output waiting on an empty one. The meter judges ([`judge`]); this module says
//! the verdict in words and lays out the `--stats` lines around it. It is pure: everything it
//! says comes from one [`Snapshot`], so the caller decides where the lines go and what
//! prefixes them.

use std::time::Duration;

use crate::meter::{Delivery, Judgement, Snapshot, Stream, Wire, judge};
use crate::size::{Bytes, share};
use crate::watch::Names;
use crate::watch::control::show_rate;
use crate::watch::line::{average_input, average_output, per_second, rate};
use crate::words::{byte_count, span};

/// What a Linux pipe holds by default: 16 pages of 4 KiB. A buffer that never held more did
/// nothing a plain `|` would not have done.
const PIPE_SIZE: u64 = 64 << 10;

/// The verdict in plain words, one line that fits 80 columns in the usual cases, e.g.
/// `bottleneck: consumer - buffer full 83% of the time, producer held back 41.0 s`: it is
/// what a progress line leaves under it at the end.
pub fn verdict(snapshot: &Snapshot, names: &Names) -> String {
    let full = share_of_run(snapshot.producer_blocked, snapshot.elapsed);
    let empty = share_of_run(snapshot.consumer_starved, snapshot.elapsed);
    // With several readers, the consumer side is the slowest of them: say which.
    let consumer = match snapshot.slowest() {
        Some(slowest) if names.readers() > 1 => format!("consumer ({})", names.reader(slowest)),
        _ => "consumer".to_owned(),
    };
    match judge(snapshot) {
        Judgement::TooShort => {
            format!("no bottleneck: the run was too short to tell ({})", span(snapshot.elapsed))
        }
        Judgement::Idle => "no bottleneck: no data passed".to_string(),
        Judgement::Consumer if held_to(snapshot.limits.output, average_output(snapshot)) => {
            format!(
                "bottleneck: the output rate limit (-r {}) - buffer full {full} of the time, \
                 producer held back {}",
                show_rate(snapshot.limits.output),
                span(snapshot.producer_blocked)
            )
        }
        Judgement::Consumer => format!(
            "bottleneck: {consumer} - buffer full {full} of the time, producer held back {}",
            span(snapshot.producer_blocked)
        ),
        Judgement::Producer if held_to(snapshot.limits.input, average_input(snapshot)) => {
            format!(
                "bottleneck: the input rate limit (--input-rate {}) - buffer empty {empty} of \
                 the time, consumer waited {}",
                show_rate(snapshot.limits.input),
                span(snapshot.consumer_starved)
            )
        }
        Judgement::Producer => format!(
            "bottleneck: producer - buffer empty {empty} of the time, consumer waited {}",
            span(snapshot.consumer_starved)
        ),
        Judgement::InTurn => format!(
            "no bottleneck: the sides took turns (full {full}, empty {empty}); a larger -m \
             may help"
        ),
        Judgement::Neither if snapshot.peak_held <= PIPE_SIZE => format!(
            "no bottleneck: neither side waited long; accel was not needed (peak {})",
            Bytes(snapshot.peak_held)
        ),
        Judgement::Neither => format!(
            "no bottleneck: neither side waited long; the buffer absorbed up to {}",
            Bytes(snapshot.peak_held)
        ),
    }
}

/// Whether a side that averaged `average` bytes a second was held to its rate `limit` (0 for
/// none): it came within a tenth of it, so the limit, not the other process, set the pace.
fn held_to(limit: u64, average: f64) -> bool {
    limit > 0 && average >= limit as f64 * 0.9
}

/// The `--stats` report: a few aligned lines, the verdict last, without trailing newline or
/// prefix; the caller adds a name or whatever it likes to each line. With several readers
/// (outputs, hashes), each gets a line of its own.
pub fn report(snapshot: &Snapshot, names: &Names) -> String {
    details(snapshot, names) + &verdict(snapshot, names)
}

/// The report so far, for SIGUSR1, in the shape of [`report`]: a first line that says the run
/// goes on, and a verdict that says it is one so far, so that it cannot be taken for the end.
pub fn so_far(snapshot: &Snapshot, names: &Names) -> String {
    format!(
        "report so far, at {}; the run goes on\n{}so far, {}",
        span(snapshot.elapsed),
        details(snapshot, names),
        verdict(snapshot, names)
    )
}

/// One line for a run stopped by `signal` (`SIGTERM`): how many bytes were read but not
/// delivered, and so are lost. With several outputs, those of the output furthest behind.
pub fn stopped(snapshot: &Snapshot, names: &Names, signal: &str) -> String {
    let outputs = &snapshot.readers[..names.outputs.len().min(snapshot.readers.len())];
    // The one furthest behind among those still there; if none is, among all.
    let behind = |live: bool| {
        outputs
            .iter()
            .enumerate()
            .filter(|(_, reader)| !live || !reader.gone)
            .min_by_key(|(_, reader)| reader.delivered())
    };
    let Some((index, reader)) = behind(true).or_else(|| behind(false)) else {
        return format!("stopped by {signal}; {} read", byte_count(snapshot.bytes_in));
    };
    let delivered = reader.delivered().min(snapshot.bytes_in);
    let lost = byte_count(snapshot.bytes_in - delivered);
    let delivered_all = reader.delivered_all(snapshot.bytes_in);
    let delivered = byte_count(delivered);
    if delivered_all {
        return format!("stopped by {signal}; all {delivered} read were delivered");
    }
    if reader.delivery != Delivery::Written {
        // A network output: what its receiver confirmed, and what was only sent.
        let counts = crate::exit::counts(reader, snapshot.bytes_in);
        return match outputs.len() {
            1 => format!("stopped by {signal}; {counts}"),
            _ => format!(
                "stopped by {signal}; to {}, the output furthest behind: {counts}",
                names.outputs[index]
            ),
        };
    }
    if outputs.len() > 1 {
        format!(
            "stopped by {signal}; {delivered} delivered to {}, the output furthest behind, \
             {lost} read but not delivered to it",
            names.outputs[index]
        )
    } else {
        format!("stopped by {signal}; {delivered} delivered, {lost} read but not delivered")
    }
}

/// What stands under the final line when the reader of an output went away (EPIPE) and accel
/// ends by SIGPIPE, as `cat` does: whose reader, after how much, and what it did not get.
/// With several outputs, the one furthest behind among those gone.
pub fn reader_went_away(snapshot: &Snapshot, names: &Names) -> String {
    let outputs = &snapshot.readers[..names.outputs.len().min(snapshot.readers.len())];
    let gone = outputs.iter().enumerate().filter(|(_, reader)| reader.gone);
    let (index, bytes) = gone
        .min_by_key(|(_, reader)| reader.bytes)
        .map_or((0, snapshot.bytes_out), |(index, reader)| (index, reader.bytes));
    let name = names.outputs.get(index).map_or("stdout", String::as_str);
    let lost = snapshot.bytes_in.saturating_sub(bytes);
    let written = format!("{} written to it", byte_count(bytes));
    if lost == 0 {
        format!("the reader of {name} went away: {written}, all that was read")
    } else {
        format!(
            "the reader of {name} went away: {written}, {} read but not delivered",
            byte_count(lost)
        )
    }
}

/// The report's lines above the verdict, each ending in a newline.
fn details(snapshot: &Snapshot, names: &Names) -> String {
    let count_width = snapshot.bytes_in.max(snapshot.bytes_out).to_string().len();
    let counted = |bytes: u64, per_second: f64| {
        format!(
            "{bytes:>count_width$} bytes  {:>8}  {:>10} on average",
            Bytes(bytes).to_string(),
            rate(per_second)
        )
    };
    let mut lines = vec![("in".to_owned(), counted(snapshot.bytes_in, average_input(snapshot)))];
    if names.readers() > 1 {
        for (index, reader) in snapshot.readers.iter().enumerate() {
            let label = match names.outputs.get(index) {
                Some(name) => format!("out {name}"),
                None => format!("hash {}", names.hashes[index - names.outputs.len()]),
            };
            let mut text = counted(reader.bytes, per_second(reader.bytes, snapshot.elapsed));
            if reader.gone {
                text += ", stopped early";
            }
            lines.push((label, text));
        }
    } else {
        lines.push(("out".to_owned(), counted(snapshot.bytes_out, average_output(snapshot))));
    }
    lines.extend([
        ("time".to_owned(), span(snapshot.elapsed)),
        (
            "producer".to_owned(),
            format!(
                "held back {}, {} of the run: the buffer was full",
                span(snapshot.producer_blocked),
                share_of_run(snapshot.producer_blocked, snapshot.elapsed)
            ),
        ),
        (
            "consumer".to_owned(),
            format!(
                "waited {}, {} of the run: the buffer was empty",
                span(snapshot.consumer_starved),
                share_of_run(snapshot.consumer_starved, snapshot.elapsed)
            ),
        ),
        ("peak fill".to_owned(), peak_held(snapshot)),
    ]);
    let limits = snapshot.limits;
    if limits.output + limits.input > 0 {
        let (output, input) = (show_rate(limits.output), show_rate(limits.input));
        lines.push(("rate limit".to_owned(), format!("output {output}, input {input}")));
    }
    for (index, reader) in snapshot.readers.iter().enumerate() {
        let outages = reader.outages;
        if outages.reconnections > 0 {
            let label = format!("to {}", names.reader(index));
            let text = format!(
                "connected again {}, longest outage {}; {} sent again",
                times(outages.reconnections),
                span(outages.longest),
                byte_count(outages.resent)
            );
            lines.push((label, text));
        }
    }
    for (index, wire) in snapshot.wires.iter().enumerate() {
        if let Some(wire) = wire.as_ref().filter(|wire| wire.compressing) {
            lines.push((format!("wire {}", names.reader(index)), on_the_wire(wire)));
        }
    }
    for (index, streams) in snapshot.streams.iter().enumerate() {
        if streams.len() > 1 {
            lines.push((format!("streams to {}", names.reader(index)), per_stream(streams)));
        }
    }
    if snapshot.input_streams.len() > 1 {
        let text = per_stream(&snapshot.input_streams);
        lines.push((format!("streams from {}", names.input), text));
    }
    if let Some(wire) = snapshot.input_wire.as_ref().filter(|wire| wire.compressing) {
        lines.push((format!("wire {}", names.input), on_the_wire(wire)));
    }
    let outages = snapshot.input_outages;
    if outages.reconnections > 0 {
        let text = format!(
            "the sender came back {}, longest outage {}",
            times(outages.reconnections),
            span(outages.longest)
        );
        lines.push((format!("from {}", names.input), text));
    }
    let padded: u64 = snapshot.readers.iter().map(|r| r.padded).sum();
    if padded > 0 {
        let padding = format!("{} of zeros filled the last block", byte_count(padded));
        lines.push(("padding".to_owned(), padding));
    }
    // Only where something went another way than through memory.
    if snapshot.tiers.through + snapshot.tiers.pipes + snapshot.tiers.disk > 0 {
        lines.push(("bytes went".to_owned(), snapshot.tiers.to_string()));
    }
    let label_width = lines.iter().map(|(label, _)| label.len()).max().unwrap_or(0);
    lines.iter().map(|(label, text)| format!("{label:<label_width$}  {text}\n")).collect()
}

/// What each connection of a stream over several carried (`--streams`), and, for one that
/// dropped, the times it came back and what went again on the others.
fn per_stream(streams: &[Stream]) -> String {
    let each = streams.iter().enumerate().map(|(index, stream)| {
        let mut text = format!("{} {}", index + 1, crate::size::Bytes(stream.bytes));
        if stream.reconnections + stream.resent > 0 {
            text += &format!(
                " (back {}, {} sent again)",
                times(stream.reconnections),
                crate::size::Bytes(stream.resent)
            );
        }
        text
    });
    format!("{} connections: {}", streams.len(), each.collect::<Vec<_>>().join(", "))
}

/// What an output that compresses (`--compress`) sent: the bytes on the wire for the
/// stream, the ratio, the frames stored as they were, and the time at each level; or what
/// an input received of a sender that compresses (it knows no levels).
fn on_the_wire(wire: &Wire) -> String {
    let levels: Vec<String> = wire
        .levels
        .iter()
        .map(|(level, time)| match level {
            Some(level) => format!("level {level} {}", span(*time)),
            None => format!("stored {}", span(*time)),
        })
        .collect();
    let mut text = format!(
        "{} for {} of the stream (x{:.2}); {} of {} frames stored as they were",
        Bytes(wire.bytes),
        Bytes(wire.stream),
        wire.ratio(),
        wire.stored,
        wire.frames,
    );
    if !levels.is_empty() {
        text = format!("{text}; {}", levels.join(", "));
    }
    text
}

/// `text` with each line longer than `width` columns broken between words, so that a terminal
/// never cuts a number or a word in two, nor a number from its unit or from the parenthesis
/// after it (`406 MiB (425197568 bytes)`, `501 MiB (49%)`: see [`unbreakable`]). A line of the
/// report continues under its text (past the label and the spaces that follow it); any other
/// line, two columns in. A piece wider than a whole line stays whole on a line of its own, for
/// the terminal to wrap.
pub fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (line, newline) = match line.strip_suffix('\n') {
            Some(line) => (line, "\n"),
            None => (line, ""),
        };
        if line.chars().count() <= width {
            out += line;
            out += newline;
            continue;
        }
        // Where the text after a label begins: after the first run of two spaces or more.
        let indent = line
            .find("  ")
            .and_then(|at| line[at..].find(|c| c != ' ').map(|past| at + past))
            .filter(|&at| at <= width / 2)
            .map_or(2, |at| line[..at].chars().count());
        let mut column = 0;
        for (at, piece) in unbreakable(line).into_iter().enumerate() {
            let wide = piece.chars().count();
            if wide > 0 && column > indent && column + 1 + wide > width {
                out.push('\n');
                out.extend(std::iter::repeat_n(' ', indent));
                column = indent;
            } else if at > 0 {
                out.push(' ');
                column += 1;
            }
            out += piece;
            column += wide;
        }
        out += newline;
    }
    out
}

/// The pieces of `line` between which it may break, in order, split at single spaces (a run
/// of spaces gives empty pieces, so that alignment is kept). A number stays with the word
/// after it, its unit (`406 MiB`, `24.1 s`), and a parenthesis that opens with a number stays
/// with the word before it (`MiB (425197568 bytes)`, `MiB (49%)`): read apart, each half of
/// such a pair means nothing, and a count of bytes stays one piece.
fn unbreakable(line: &str) -> Vec<&str> {
    let is_number = |word: &str| {
        let digits = word.strip_prefix('(').unwrap_or(word);
        digits.starts_with(|c: char| c.is_ascii_digit())
            && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
    };
    let opens_with_number = |word: &str| {
        word.strip_prefix('(').is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    };
    let mut pieces = Vec::new();
    let (mut start, mut at) = (0, 0);
    let mut previous: Option<&str> = None;
    for word in line.split(' ') {
        let kept = previous.is_some_and(|previous| {
            !previous.is_empty()
                && !word.is_empty()
                && (is_number(previous) || opens_with_number(word))
        });
        if previous.is_some() && !kept {
            pieces.push(&line[start..at - 1]);
            start = at;
        }
        previous = Some(word);
        at += word.len() + 1;
    }
    pieces.push(&line[start..]);
    pieces
}

/// The most the buffer held: in memory, a share of the buffer (`64 MiB, 100% of the 64 MiB
/// buffer`); when it spilled, what of it was on disk, so that a peak above the buffer's size
/// does not read as a contradiction.
/// `once`, `3 times`.
fn times(n: u64) -> String {
    if n == 1 { "once".into() } else { format!("{n} times") }
}

fn peak_held(snapshot: &Snapshot) -> String {
    // Clamped, like the bar: the fill may pass the capacity by part of a read.
    let of_buffer = |bytes: u64| share(bytes.min(snapshot.capacity), snapshot.capacity);
    if snapshot.peak_disk == 0 {
        return format!(
            "{}, {} of the {} buffer",
            Bytes(snapshot.peak_held),
            of_buffer(snapshot.peak_held),
            Bytes(snapshot.capacity)
        );
    }
    format!(
        "{} in memory and on disk: up to {} in memory ({} of the {} buffer), up to {} on disk",
        Bytes(snapshot.peak_held),
        Bytes(snapshot.peak_memory),
        of_buffer(snapshot.peak_memory),
        Bytes(snapshot.capacity),
        Bytes(snapshot.peak_disk)
    )
}

/// How much of a run of `elapsed` the wait `part` took, as [`share`] says it.
fn share_of_run(part: Duration, elapsed: Duration) -> String {
    // The ongoing wait is read a moment after the elapsed time, so it may pass it by a hair.
    let part = part.min(elapsed);
    let nanos = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    share(nanos(part), nanos(elapsed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::{Bottleneck, ReaderSnapshot, Tiers, bottleneck};

    const MIB: u64 = 1 << 20;

    /// A finished run of `seconds`, 1 GiB through a 64 MiB buffer, with the given waits.
    fn run(seconds: f64, held_back: f64, waited: f64) -> Snapshot {
        Snapshot {
            elapsed: Duration::from_secs_f64(seconds),
            capacity: 64 * MIB,
            bytes_in: 1 << 30,
            bytes_out: 1 << 30,
            peak_held: 64 * MIB,
            producer_blocked: Duration::from_secs_f64(held_back),
            consumer_starved: Duration::from_secs_f64(waited),
            tiers: Tiers { through: 0, pipes: 160 * MIB, memory: 864 * MIB, disk: 0 },
            readers: vec![ReaderSnapshot {
                bytes: 1 << 30,
                starved: Duration::from_secs_f64(waited),
                gone: false,
                ..ReaderSnapshot::default()
            }],
            ..Snapshot::default()
        }
    }

    /// One output, stdout.
    fn stdout() -> Names {
        Names { input: "stdin".into(), outputs: vec!["stdout".into()], ..Names::default() }
    }

    #[test]
    fn a_slow_consumer_is_named() {
        let snapshot = run(50.0, 41.5, 0.2);
        assert_eq!(bottleneck(&snapshot), Bottleneck::Consumer);
        assert_eq!(
            verdict(&snapshot, &stdout()),
            "bottleneck: consumer - buffer full 83% of the time, producer held back 41.5 s"
        );
    }

    #[test]
    fn a_slow_producer_is_named() {
        let snapshot = Snapshot { peak_held: 4096, ..run(64.0, 0.0, 62.0) };
        assert_eq!(bottleneck(&snapshot), Bottleneck::Producer);
        assert_eq!(
            verdict(&snapshot, &stdout()),
            "bottleneck: producer - buffer empty 97% of the time, consumer waited 0:01:02"
        );
    }

    #[test]
    fn a_balanced_run_has_no_bottleneck() {
        let small = Snapshot { peak_held: 60 << 10, ..run(10.0, 0.5, 0.9) };
        assert_eq!(bottleneck(&small), Bottleneck::None);
        assert!(
            verdict(&small, &stdout()).starts_with("no bottleneck: neither side"),
            "{}",
            verdict(&small, &stdout())
        );
        assert!(verdict(&small, &stdout()).ends_with("accel was not needed (peak 60 KiB)"));
        // A buffer that held more than a pipe could did its work, even if no one waited.
        let absorbed = run(10.0, 0.5, 0.9);
        assert_eq!(bottleneck(&absorbed), Bottleneck::None);
        assert!(verdict(&absorbed, &stdout()).ends_with("the buffer absorbed up to 64 MiB"));
    }

    #[test]
    fn the_threshold_is_a_tenth_of_the_run() {
        assert_eq!(bottleneck(&run(10.0, 0.99, 0.0)), Bottleneck::None);
        assert_eq!(bottleneck(&run(10.0, 1.0, 0.0)), Bottleneck::Consumer);
        assert_eq!(bottleneck(&run(10.0, 0.0, 1.0)), Bottleneck::Producer);
        // Both significant: the longer wait decides.
        assert_eq!(bottleneck(&run(10.0, 4.0, 3.0)), Bottleneck::Consumer);
        assert_eq!(bottleneck(&run(10.0, 3.0, 4.0)), Bottleneck::Producer);
        let in_turn = run(10.0, 4.0, 4.0);
        assert_eq!(bottleneck(&in_turn), Bottleneck::None);
        assert!(
            verdict(&in_turn, &stdout()).contains("took turns"),
            "{}",
            verdict(&in_turn, &stdout())
        );
    }

    #[test]
    fn short_or_idle_runs_have_no_bottleneck() {
        let zero = run(0.0, 0.0, 0.0);
        assert_eq!(bottleneck(&zero), Bottleneck::None);
        assert_eq!(
            verdict(&zero, &stdout()),
            "no bottleneck: the run was too short to tell (0.0 s)"
        );
        // All waiting, but under a tenth of a second.
        assert_eq!(bottleneck(&run(0.09, 0.09, 0.0)), Bottleneck::None);
        let idle = Snapshot { bytes_in: 0, bytes_out: 0, ..run(30.0, 0.0, 30.0) };
        assert_eq!(bottleneck(&idle), Bottleneck::None);
        assert_eq!(verdict(&idle, &stdout()), "no bottleneck: no data passed");
        // No division by zero anywhere in the report either.
        let report = report(&zero, &stdout());
        assert!(report.contains("0.0 s, 0% of the run"), "{report}");
    }

    #[test]
    fn json_names() {
        let names =
            [Bottleneck::Producer, Bottleneck::Consumer, Bottleneck::None].map(|b| b.as_str());
        assert_eq!(names, ["producer", "consumer", "none"]);
    }

    #[test]
    fn the_report_of_a_consumer_bound_run() {
        let snapshot =
            Snapshot { bytes_in: 1_073_741_824, bytes_out: 1_006_632_960, ..run(50.0, 41.5, 0.2) };
        assert_eq!(
            report(&snapshot, &stdout()),
            "in          1073741824 bytes     1 GiB  20.5 MiB/s on average\n\
             out         1006632960 bytes   960 MiB  19.2 MiB/s on average\n\
             time        50.0 s\n\
             producer    held back 41.5 s, 83% of the run: the buffer was full\n\
             consumer    waited 0.2 s, <1% of the run: the buffer was empty\n\
             peak fill   64 MiB, 100% of the 64 MiB buffer\n\
             bytes went  straight through 0 B (0%), pool pipes 160 MiB (16%), memory 864 MiB (84%)\n\
             bottleneck: consumer - buffer full 83% of the time, producer held back 41.5 s"
        );
    }

    /// The verdict is the line a progress line leaves under it: it fits 80 columns.
    #[test]
    fn verdicts_fit_80_columns() {
        let small = Snapshot { peak_held: 60 << 10, ..run(10.0, 0.5, 0.9) };
        for snapshot in [
            run(50.0, 41.5, 0.2),
            run(3_700.0, 0.0, 3_000.0),
            run(10.0, 4.0, 4.0),
            small,
            run(10.0, 0.5, 0.9),
            run(0.0, 0.0, 0.0),
        ] {
            let verdict = verdict(&snapshot, &stdout());
            assert!(verdict.len() < 80, "{verdict}");
        }
    }

    /// A run that spilled, under rate limits, with counts too long for a narrow terminal.
    fn a_long_run() -> Snapshot {
        use crate::meter::RateLimits;
        Snapshot {
            bytes_in: 33_554_432_000,
            bytes_out: 33_554_431_999,
            peak_held: 1023 * MIB,
            peak_memory: 64 * MIB,
            peak_disk: 959 * MIB,
            limits: RateLimits { output: 10 * MIB, input: 0 },
            ..run(3_700.0, 3_000.0, 0.0)
        }
    }

    #[test]
    fn wrapped_lines_break_between_words_never_inside_a_number() {
        let names = stdout();
        let snapshot = a_long_run();
        let mut stopped_snapshot = snapshot.clone();
        stopped_snapshot.readers[0].bytes = 33_554_432;
        let texts = [
            report(&snapshot, &names),
            so_far(&snapshot, &names),
            stopped(&stopped_snapshot, &names, "SIGTERM"),
        ];
        for width in [40, 60, 80] {
            for text in &texts {
                let wrapped = wrap(text, width);
                let words = |t: &str| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
                assert_eq!(words(&wrapped), words(text), "at {width}:\n{wrapped}");
                for line in wrapped.lines() {
                    assert!(line.chars().count() <= width, "at {width}: {line:?}\n{wrapped}");
                }
                assert_eq!(wrapped.ends_with('\n'), text.ends_with('\n'));
            }
        }
        // A count of bytes is never cut, nor a share from its size.
        let said = "stopped by SIGTERM; 406 MiB (425197568 bytes) delivered, 3.2 MiB (3355443 \
                    bytes) read but not delivered";
        for width in [20, 30, 40, 50, 60] {
            let wrapped = wrap(said, width);
            for count in ["406 MiB (425197568 bytes)", "3.2 MiB (3355443 bytes)"] {
                assert!(wrapped.lines().any(|line| line.contains(count)), "{width}:\n{wrapped}");
            }
        }
        assert_eq!(
            wrap("stopped by SIGTERM; 406 MiB (425197568 bytes) delivered", 40),
            "stopped by SIGTERM;\n  406 MiB (425197568 bytes) delivered"
        );
        assert_eq!(
            wrap("bytes went  pool pipes 150 MiB (15%), memory 501 MiB (49%)", 50),
            "bytes went  pool pipes 150 MiB (15%), memory\n            501 MiB (49%)"
        );
        // A line of the report goes on under its text, past its label.
        let wrapped = wrap("peak fill  1023 MiB in memory and on disk: up to 64 MiB", 42);
        assert_eq!(wrapped, "peak fill  1023 MiB in memory and on disk:\n           up to 64 MiB");
        // A line that fits is left as it is, its alignment too.
        assert_eq!(
            wrap("in    12 bytes\nout   12 bytes\n", 80),
            "in    12 bytes\nout   12 bytes\n"
        );
    }

    #[test]
    fn a_rate_limit_that_set_the_pace_is_named_as_the_bottleneck() {
        use crate::meter::RateLimits;
        // 1 GiB in 100 s is 10.24 MiB/s: held to a limit of 10 MiB/s.
        let limited =
            Snapshot { limits: RateLimits { output: 10 * MIB, input: 0 }, ..run(100.0, 96.0, 0.0) };
        assert_eq!(
            verdict(&limited, &stdout()),
            "bottleneck: the output rate limit (-r 10 MiB/s) - buffer full 96% of the time, \
             producer held back 0:01:36"
        );
        // A consumer slower than the limit is still the consumer.
        let slower =
            Snapshot { limits: RateLimits { output: 50 * MIB, input: 0 }, ..run(100.0, 96.0, 0.0) };
        assert!(verdict(&slower, &stdout()).starts_with("bottleneck: consumer - "));
        let input =
            Snapshot { limits: RateLimits { output: 0, input: 10 * MIB }, ..run(100.0, 0.0, 80.0) };
        assert_eq!(
            verdict(&input, &stdout()),
            "bottleneck: the input rate limit (--input-rate 10 MiB/s) - buffer empty 80% of \
             the time, consumer waited 0:01:20"
        );
    }

    #[test]
    fn after_a_spill_the_peak_says_what_was_in_memory_and_on_disk() {
        let report = report(&a_long_run(), &stdout());
        let peak = report.lines().find(|l| l.starts_with("peak fill")).unwrap();
        assert_eq!(
            peak,
            "peak fill   1023 MiB in memory and on disk: up to 64 MiB in memory (100% of the 64 \
             MiB buffer), up to 959 MiB on disk"
        );
    }

    #[test]
    fn the_report_is_short_and_ends_with_the_verdict() {
        for snapshot in [run(50.0, 41.5, 0.2), run(0.0, 0.0, 0.0), run(3_700.0, 10.0, 3_000.0)] {
            let report = report(&snapshot, &stdout());
            let lines: Vec<&str> = report.lines().collect();
            assert!(lines.len() <= 8, "{report}");
            assert_eq!(*lines.last().unwrap(), verdict(&snapshot, &stdout()));
            assert!(report.contains("1073741824 bytes"), "{report}");
        }
        let long = report(&run(3_700.0, 10.0, 3_000.0), &stdout());
        assert!(long.contains("time        1:01:40\n"), "{long}");
        assert!(long.contains("waited 0:50:00, 81% of the run"), "{long}");
    }

    /// Issue 35: an output that compresses says what went on the wire, and at which levels.
    #[test]
    fn an_output_that_compresses_says_what_went_on_the_wire() {
        let mut snapshot = run(50.0, 0.0, 0.2);
        snapshot.wires = vec![Some(Wire {
            compressing: true,
            stream: 300 << 20,
            bytes: 100 << 20,
            frames: 4800,
            stored: 12,
            level: Some(3),
            levels: vec![(None, Duration::from_secs(2)), (Some(3), Duration::from_secs(48))],
        })];
        let text = details(&snapshot, &stdout());
        let line = text.lines().find(|line| line.starts_with("wire stdout")).expect(&text);
        assert!(
            line.ends_with(
                "100 MiB for 300 MiB of the stream (x3.00); 12 of 4800 frames stored as they \
                 were; stored 2.0 s, level 3 48.0 s"
            ),
            "{line}"
        );
        snapshot.wires = vec![Some(Wire { compressing: false, ..Wire::default() })];
        assert!(!details(&snapshot, &stdout()).contains("wire"));
    }

    /// Issue 35: an input whose sender compresses says what came off the wire; it knows no
    /// levels, and says none.
    #[test]
    fn an_input_of_compressed_frames_says_what_came_off_the_wire() {
        let mut snapshot = run(50.0, 0.0, 0.2);
        let names = Names { input: "from 10.0.0.2".into(), ..stdout() };
        let wire = Wire {
            stream: 300 << 20,
            bytes: 100 << 20,
            frames: 4800,
            stored: 12,
            ..Wire::default()
        };
        snapshot.input_wire = Some(wire.clone());
        assert!(!details(&snapshot, &names).contains("wire"), "no frame came compressed");
        snapshot.input_wire = Some(Wire { compressing: true, ..wire });
        let text = details(&snapshot, &names);
        let line = text.lines().find(|line| line.starts_with("wire from 10.0.0.2")).expect(&text);
        assert!(
            line.ends_with(
                "100 MiB for 300 MiB of the stream (x3.00); 12 of 4800 frames stored as they were"
            ),
            "{line}"
        );
    }

    /// Issue 11, item 5: a report asked for mid-run says it is the report so far.
    #[test]
    fn the_report_so_far_says_so() {
        let snapshot = run(50.0, 41.5, 0.2);
        let text = so_far(&snapshot, &stdout());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "report so far, at 50.0 s; the run goes on");
        assert_eq!(
            *lines.last().unwrap(),
            "so far, bottleneck: consumer - buffer full 83% of the time, producer held back 41.5 s"
        );
        assert_eq!(lines[1..lines.len() - 1].join("\n") + "\n", details(&snapshot, &stdout()));
    }

    /// Issue 11, item 4: stopped by a signal, one line says what was read but not delivered.
    #[test]
    fn a_stopped_run_says_what_was_lost() {
        let reader = |bytes: u64, gone: bool| ReaderSnapshot { bytes, gone, ..Default::default() };
        let snapshot =
            Snapshot { bytes_in: 3 * MIB, readers: vec![reader(MIB, false)], ..run(5.0, 0.0, 0.0) };
        assert_eq!(
            stopped(&snapshot, &stdout(), "SIGTERM"),
            "stopped by SIGTERM; 1 MiB (1048576 bytes) delivered, 2 MiB (2097152 bytes) read but \
             not delivered"
        );
        let all = Snapshot { readers: vec![reader(3 * MIB, false)], ..snapshot.clone() };
        assert_eq!(
            stopped(&all, &stdout(), "SIGINT"),
            "stopped by SIGINT; all 3 MiB (3145728 bytes) read were delivered"
        );
        let names = Names {
            outputs: vec!["stdout".into(), "copy.img".into()],
            hashes: vec![crate::engine::digest::Algorithm::Sha256],
            ..stdout()
        };
        let several = Snapshot {
            readers: vec![reader(2 * MIB, false), reader(MIB, false), reader(0, false)],
            ..snapshot.clone()
        };
        assert_eq!(
            stopped(&several, &names, "SIGHUP"),
            "stopped by SIGHUP; 1 MiB (1048576 bytes) delivered to copy.img, the output \
             furthest behind, 2 MiB (2097152 bytes) read but not delivered to it"
        );
        // An output that failed earlier was told of then; the others' loss is what is left.
        let failed = Snapshot {
            readers: vec![reader(2 * MIB, false), reader(0, true), reader(0, false)],
            ..snapshot
        };
        assert!(stopped(&failed, &names, "SIGHUP").contains("(2097152 bytes) delivered to stdout"));
    }

    /// Issue 17, item 1: a network output's bytes are delivered once its receiver confirms
    /// them; until then, stopped by a signal says they were only sent.
    #[test]
    fn a_signal_claims_only_what_the_receiver_confirmed() {
        let names =
            Names { outputs: vec!["backup:9090".into(), "copy.img".into()], ..Default::default() };
        let network = |bytes: u64, confirmed: u64| ReaderSnapshot {
            bytes,
            confirmed,
            delivery: Delivery::Confirmed,
            ..Default::default()
        };
        let local = ReaderSnapshot { bytes: 3 << 20, ..Default::default() };
        let one = Names { outputs: vec!["backup:9090".into()], ..Default::default() };
        let snapshot = Snapshot {
            bytes_in: 3 << 20,
            readers: vec![network(3 << 20, 1 << 20)],
            ..Default::default()
        };
        assert_eq!(
            stopped(&snapshot, &one, "SIGTERM"),
            "stopped by SIGTERM; 1 MiB (1048576 bytes) delivered (confirmed by the receiver), 2 \
             MiB (2097152 bytes) sent but not confirmed, 0 bytes read but not sent"
        );
        let snapshot = Snapshot { readers: vec![network(3 << 20, 0), local], ..snapshot };
        assert_eq!(
            stopped(&snapshot, &names, "SIGINT"),
            "stopped by SIGINT; to backup:9090, the output furthest behind: 0 bytes delivered \
             (confirmed by the receiver), 3 MiB (3145728 bytes) sent but not confirmed, 0 bytes \
             read but not sent"
        );
        let snapshot = Snapshot { readers: vec![network(3 << 20, 3 << 20), local], ..snapshot };
        assert_eq!(
            stopped(&snapshot, &names, "SIGINT"),
            "stopped by SIGINT; all 3 MiB (3145728 bytes) read were delivered"
        );
        // Over plain TCP nothing is confirmed: all sent is not all delivered.
        let insecure = ReaderSnapshot { delivery: Delivery::Unconfirmed, ..local };
        let snapshot = Snapshot { readers: vec![insecure], ..snapshot };
        assert_eq!(
            stopped(&snapshot, &one, "SIGTERM"),
            "stopped by SIGTERM; 3 MiB (3145728 bytes) sent (not confirmed: --insecure has no \
             confirmations), 0 bytes read but not sent"
        );
    }

    #[test]
    fn a_reader_that_went_away_is_said_with_what_it_missed() {
        let reader = |bytes: u64, gone: bool| ReaderSnapshot { bytes, gone, ..Default::default() };
        let snapshot = Snapshot {
            bytes_in: 3 * MIB,
            bytes_out: MIB,
            readers: vec![reader(MIB, true)],
            ..run(5.0, 0.0, 0.0)
        };
        assert_eq!(
            reader_went_away(&snapshot, &stdout()),
            "the reader of stdout went away: 1 MiB (1048576 bytes) written to it, 2 MiB (2097152 \
             bytes) read but not delivered"
        );
        let names = Names { outputs: vec!["stdout".into(), "copy.img".into()], ..stdout() };
        let several =
            Snapshot { readers: vec![reader(3 * MIB, false), reader(MIB, true)], ..snapshot };
        assert!(reader_went_away(&several, &names).starts_with("the reader of copy.img went"));
    }

    #[test]
    fn tiers_only_when_something_went_without_a_copy() {
        let untiered = Snapshot {
            tiers: Tiers { memory: 1 << 30, ..Tiers::default() },
            ..run(10.0, 0.0, 0.0)
        };
        assert!(!report(&untiered, &stdout()).contains("bytes went"));
        let through = Snapshot {
            tiers: Tiers { through: 800, pipes: 150, memory: 50, disk: 0 },
            ..run(10.0, 0.0, 0.0)
        };
        assert!(report(&through, &stdout()).contains(
            "bytes went  straight through 800 B (80%), pool pipes 150 B (15%), memory 50 B (5%)"
        ));
    }

    #[test]
    fn a_share_of_the_run_is_never_more_than_all_of_it() {
        // A wait read a hair after the elapsed time is the whole run, not more.
        assert_eq!(share_of_run(Duration::from_secs(11), Duration::from_secs(10)), "100%");
    }

    #[test]
    fn several_readers_each_get_a_line_and_the_slowest_is_named() {
        let names = Names {
            input: "stdin".into(),
            outputs: vec!["stdout".into(), "copy.img".into()],
            hashes: vec![crate::engine::digest::Algorithm::Sha256],
            ..Names::default()
        };
        let reader = |bytes: u64, starved: f64, gone: bool| ReaderSnapshot {
            bytes,
            starved: Duration::from_secs_f64(starved),
            gone,
            ..ReaderSnapshot::default()
        };
        let snapshot = Snapshot {
            bytes_out: 900 * MIB,
            readers: vec![
                reader(1 << 30, 30.0, false),
                reader(900 * MIB, 0.1, false),
                reader(1 << 30, 20.0, false),
            ],
            ..run(50.0, 41.5, 0.1)
        };
        assert_eq!(snapshot.slowest(), Some(1));
        let text = report(&snapshot, &names);
        assert!(text.contains("\nout stdout    1073741824 bytes "), "{text}");
        assert!(text.contains("\nout copy.img   943718400 bytes "), "{text}");
        assert!(text.contains("\nhash sha256   1073741824 bytes "), "{text}");
        assert!(
            text.ends_with(
                "bottleneck: consumer (copy.img) - buffer full 83% of the time, producer \
                 held back 41.5 s"
            ),
            "{text}"
        );
        // A reader that stopped early says so, and no longer counts as the slowest.
        let snapshot = Snapshot {
            readers: vec![
                reader(1 << 30, 30.0, false),
                reader(MIB, 0.0, true),
                reader(1 << 30, 20.0, false),
            ],
            ..snapshot
        };
        assert_eq!(snapshot.slowest(), Some(2));
        let text = report(&snapshot, &names);
        assert!(
            text.contains("out copy.img     1048576 bytes ") && text.contains(", stopped early\n"),
            "{text}"
        );
    }
}
