//! accel as a drop-in pv: run under the name `pv` (a link), accel reads pv's command line, so
//! that syncoid's `pv -p -t -e -r -b -s SIZE`, the scripts that call pv, and the fingers that
//! type `pv -pterb` get accel without a change, and pv need not stay installed beside it.
//!
//! pv's command line is read as its getopt_long reads it: short options bundled (`-pterb`), a
//! value glued or separate (`-s100M`, `-s 100M`), long options with `=` or not and shortened
//! to any unique prefix (`--prog`), options and FILE operands in any order, `--` ending the
//! options; and pv's numbers (`1.5G`, `-k` for multiples of 1000, `-s @FILE`). What maps onto
//! accel's own options becomes them (`-L 1m` is `-r 1048576`, `-B` is `-m`), which then go
//! through the same parsing and validation as any accel command line (`usage.rs`,
//! `validate.rs`); what only pv has a use for is set on the [`Config`] after (the parts of the
//! line pv's display switches choose, `-W`/`-D`, `-l`, `-S`).
//!
//! Every option of pv's (1.6 to 1.10) is in [`OPTIONS`], with what accel does for it: done,
//! done with a difference said once at the start (`-I` shows the time left, not the time it
//! ends), accepted with nothing to do (`-c`: accels share a terminal anyway), or refused with
//! the reason (`-E`: accel never turns what cannot be read into zeros). `pv -h` lists them.
//!
//! accel keeps its own promises where pv's differ: it ends with accel's statuses, so a
//! consumer that went away is death by SIGPIPE (pv exits 0, which hides a cut-short stream)
//! and a signal ends it by that signal (pv: status 32); and FILE operands that cannot be read
//! are refused before a byte is read (pv says each when it reaches it, skips it, and exits 2).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::time::Duration;

use crate::cli::usage::{self, Refusal};
use crate::exit::Exit;
use crate::run::config::Config;
use crate::watch::line::LineParts;
use crate::watch::{Figures, Hold, Look};

/// The program name that makes accel read pv's command line.
pub const NAME: &str = "pv";

/// Whether accel was started as `pv` (argv\[0\]'s last component).
pub fn invoked_as(argv0: Option<&OsString>) -> bool {
    crate::cli::started_as(argv0, NAME)
}

/// What accel does with one of pv's options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Taken, doing what the text says.
    Maps(&'static str),
    /// Taken, with a difference from pv that accel says once, at the start (not with `-q`,
    /// nor with `-n`, whose numbers a program reads).
    Differs(&'static str),
    /// Taken, with nothing to do: what it asks for, accel does anyway.
    Accepted(&'static str),
    /// Refused at once, for the reason given.
    Refused(&'static str),
}

/// One option of pv's: its short and long names, the placeholder of its value if it takes
/// one, and what accel does with it.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    /// `p` for `-p`.
    pub short: char,
    /// `progress` for `--progress`; then any other long name for it.
    pub long: &'static [&'static str],
    /// `Some("SIZE")` when it takes a value.
    pub value: Option<&'static str>,
    /// What accel does.
    pub handling: Handling,
}

const fn opt(
    short: char,
    long: &'static [&'static str],
    value: Option<&'static str>,
    handling: Handling,
) -> Opt {
    Opt { short, long, value, handling }
}

/// pv's options (1.10's, which are 1.6's and more), in the order of its `-h`.
pub const OPTIONS: &[Opt] = &[
    opt('p', &["progress"], None, Handling::Maps("the bar and the percent done (with a size)")),
    opt('t', &["timer"], None, Handling::Maps("the time so far")),
    opt('e', &["eta"], None, Handling::Maps("the time left (with a size)")),
    opt(
        'I',
        &["fineta"],
        None,
        Handling::Differs("accel shows the time left (as -e), not the time of day it ends"),
    ),
    opt('r', &["rate"], None, Handling::Maps("the rates in and out")),
    opt(
        'a',
        &["average-rate"],
        None,
        Handling::Maps("the output's average rate over the whole run"),
    ),
    opt('b', &["bytes"], None, Handling::Maps("the bytes (with -l, the lines) in and out")),
    opt('T', &["buffer-percent"], None, Handling::Maps("the buffer's fill")),
    opt(
        'A',
        &["last-written"],
        Some("NUM"),
        Handling::Differs("accel does not show the last bytes written"),
    ),
    opt(
        'F',
        &["format"],
        Some("FORMAT"),
        Handling::Maps(
            "the parts the format names (%p %t %e %I %r %a %b %T %N, and their {long} names), \
             in accel's layout; other text in it is said once, not shown",
        ),
    ),
    opt(
        'n',
        &["numeric"],
        None,
        Handling::Maps(
            "a number per line instead of the line: the percent done, or with no size (or \
             -b) the bytes (with -l, the lines); -t puts the seconds first, -r the rate after",
        ),
    ),
    opt('q', &["quiet"], None, Handling::Maps("nothing on stderr but errors")),
    opt('8', &["bits"], None, Handling::Differs("accel counts bytes, not bits (-b is shown)")),
    opt(
        'k',
        &["si"],
        None,
        Handling::Differs(
            "sizes after it are read in multiples of 1000; accel shows binary units (KiB)",
        ),
    ),
    opt('W', &["wait"], None, Handling::Maps("nothing is shown before the first byte")),
    opt(
        'D',
        &["delay-start"],
        Some("SEC"),
        Handling::Maps("nothing is shown before SEC seconds, so a short run shows nothing"),
    ),
    opt(
        's',
        &["size"],
        Some("SIZE"),
        Handling::Maps(
            "the size expected, for the percent done and the ETA (with -l, in lines); 0 is \
             unknown; @FILE is FILE's size",
        ),
    ),
    opt('g', &["gauge"], None, Handling::Differs("without a size, accel shows no bar")),
    opt(
        'l',
        &["line-mode"],
        None,
        Handling::Maps(
            "count the lines taken in, and show them on the input's side (-s is then in \
             lines); the output's side stays in bytes",
        ),
    ),
    opt('0', &["null"], None, Handling::Maps("as -l, lines ending in a NUL byte")),
    opt('i', &["interval"], Some("SEC"), Handling::Maps("update every SEC seconds (at least 0.1)")),
    opt(
        'm',
        &["average-rate-window"],
        Some("SEC"),
        Handling::Differs("accel's average (-a) is over the whole run"),
    ),
    opt('w', &["width"], Some("WIDTH"), Handling::Maps("lines WIDTH columns wide")),
    opt(
        'H',
        &["height"],
        Some("HEIGHT"),
        Handling::Accepted("accel takes the terminal's height as it is"),
    ),
    opt('N', &["name"], Some("NAME"), Handling::Maps("NAME before the line, report and JSON")),
    opt('u', &["bar-style"], Some("STYLE"), Handling::Differs("accel draws pv's plain bar")),
    opt(
        'x',
        &["extra-display"],
        Some("SPEC"),
        Handling::Differs("accel writes no window or process title"),
    ),
    opt(
        'v',
        &["stats"],
        None,
        Handling::Maps("accel's report at the end (rates, waits, the bottleneck)"),
    ),
    opt(
        'f',
        &["force"],
        None,
        Handling::Maps(
            "progress even when stderr is not a terminal (a line per interval) or accel's job \
             is in the background",
        ),
    ),
    opt(
        'c',
        &["cursor"],
        None,
        Handling::Accepted("accels drawing on one terminal share it, each on a row of its own"),
    ),
    opt('o', &["output"], Some("FILE"), Handling::Maps("write FILE instead of stdout (truncated)")),
    opt(
        'L',
        &["rate-limit"],
        Some("RATE"),
        Handling::Maps(
            "cap the output at RATE bytes per second (in line mode too), smoothly; the input \
             reads ahead into the buffer",
        ),
    ),
    opt(
        'B',
        &["buffer-size"],
        Some("BYTES"),
        Handling::Maps("the buffer's size (accel -m), which decouples the input from the output"),
    ),
    opt('C', &["no-splice"], None, Handling::Maps("never splice (accel --engine copy)")),
    opt(
        'E',
        &["skip-errors"],
        None,
        Handling::Refused(
            "accel never turns what cannot be read into zeros: a read error ends the run \
             (status 1), what was read delivered; dd conv=noerror,sync or ddrescue do that",
        ),
    ),
    opt(
        'Z',
        &["error-skip-block"],
        Some("BYTES"),
        Handling::Refused("it goes with -E, which accel does not do"),
    ),
    opt(
        'S',
        &["stop-at-size"],
        None,
        Handling::Maps("stop after the -s size, as if the input ended there (not with -l)"),
    ),
    opt(
        'Y',
        &["sync"],
        None,
        Handling::Differs("accel flushes file outputs to disk once, before it ends (--sync)"),
    ),
    opt('K', &["direct-io"], None, Handling::Differs("accel does not use O_DIRECT")),
    opt(
        'O',
        &["sparse", "sparse-output"],
        None,
        Handling::Differs("accel writes zeros as they come: the output file is not sparse"),
    ),
    opt('X', &["discard"], None, Handling::Maps("throw the stream away (-o /dev/null)")),
    opt(
        'U',
        &["store-and-forward"],
        Some("FILE"),
        Handling::Refused(
            "accel does not store a stream before it forwards it; accel --spill DIR takes \
             beyond memory what the consumer has not taken yet",
        ),
    ),
    opt(
        'd',
        &["watchfd"],
        Some("PID[:FD]"),
        Handling::Refused("accel moves the data itself: it cannot watch another process's files"),
    ),
    opt(
        'R',
        &["remote"],
        Some("PID"),
        Handling::Maps(
            "with -L, change the rate cap of the accel running as PID (as accel -R PID -r); \
             alone, print its report so far; the other options are not sent",
        ),
    ),
    opt(
        'Q',
        &["query"],
        Some("PID"),
        Handling::Maps("print the report so far of the accel running as PID"),
    ),
    opt(
        'P',
        &["pidfile"],
        Some("FILE"),
        Handling::Refused(
            "accel writes no PID file; accel -R PID reaches a running accel by the PID the \
             shell gives ($!)",
        ),
    ),
    opt('h', &["help"], None, Handling::Maps("print this help")),
    opt('V', &["version"], None, Handling::Maps("print the version")),
];

/// The differences from pv that accel keeps on purpose, as `pv -h` and the man page list them.
pub const DIFFERENCES: &[&str] = &[
    "accel reads ahead into its buffer (32 MiB, or -B) while the output is blocked, where pv \
     stops reading while it writes: the producer and the consumer no longer take turns",
    "the exit status is accel's: 0 when every byte was delivered; a consumer that went away is \
     death by SIGPIPE, as cat's (pv exits 0, and a cut-short stream looks whole); SIGINT, \
     SIGTERM and SIGHUP end it by that signal (pv: 32); a read error is 1 (pv: 16), a write \
     error 3, a usage error or an unreadable FILE 2 (pv 1.6.20: 64 and 10)",
    "every FILE is checked before a byte is read: one missing, a directory or unreadable is \
     refused at the start (status 2), where pv says it when it reaches it, skips it and goes on",
    "with no display switch, the line is accel's: pv's -pterb and the buffer's fill; -b and -r \
     show the input's side and the output's",
    "a line per interval when stderr is not a terminal (-f), not pv's carriage returns; and \
     under the last line, a line of verdict naming the bottleneck (-q: nothing)",
    "-L caps what is written; with -l, it is still bytes per second",
    "-W holds the line back until the first byte, but its time counts from the start; with -l \
     and no -s, no size is expected (pv 1.10 counts the lines of the files first)",
];

/// What pv's command line asks for.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Request {
    /// The parts the display switches chose; how many switches there were (pv's default,
    /// `-pterb`, stands when none).
    parts: LineParts,
    switches: usize,
    format: Option<String>,
    numeric: bool,
    quiet: bool,
    force: bool,
    hold: Hold,
    size: Option<u64>,
    lines: Option<u8>,
    interval: Option<Duration>,
    width: Option<usize>,
    name: Option<OsString>,
    stats: bool,
    output: Option<OsString>,
    discard: bool,
    rate_limit: Option<u64>,
    buffer: Option<u64>,
    no_splice: bool,
    stop_at_size: bool,
    sync: bool,
    remote: Option<u32>,
    /// Multiples of 1000 for the sizes after `-k`.
    si: bool,
    files: Vec<OsString>,
    /// What accel does differently from what was asked, said once at the start.
    pub notes: Vec<String>,
    /// Options given with `-R`, which a running accel does not take.
    unsent: Vec<String>,
}

/// What a command line comes to.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    /// A run.
    Run(Box<Request>),
    /// `-h`, `--help`: [`help`] to stdout.
    Help,
    /// `-V`, `--version`.
    Version,
}

/// Parses pv's command line `args` (the program name first), or says why not: `pv -s lots:
/// <why>`, for `accel: ` to prefix.
pub fn parse(args: &[OsString]) -> Result<Parsed, String> {
    let mut request = Request { parts: LineParts::NONE, ..Request::default() };
    let mut words = args.iter().skip(1);
    while let Some(word) = words.next() {
        let text = word.to_string_lossy();
        if text == "--" {
            request.files.extend(words.cloned());
            break;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, glued) = match long.split_once('=') {
                Some((name, value)) => (name, Some(OsString::from(value))),
                None => (long, None),
            };
            let option = long_option(name)?;
            let typed = format!("--{}", option.long[0]);
            let value =
                match (option.value, glued) {
                    (None, Some(_)) => return Err(format!("pv {typed}: takes no value")),
                    (None, None) => None,
                    (Some(_), Some(value)) => Some(value),
                    (Some(placeholder), None) => Some(words.next().cloned().ok_or_else(|| {
                        format!("pv {typed}: a value {placeholder} must follow it")
                    })?),
                };
            if let Some(shown) = apply(&mut request, option, &typed, value)? {
                return Ok(shown);
            }
            continue;
        }
        let Some(letters) = text.strip_prefix('-').filter(|rest| !rest.is_empty()) else {
            // An operand, `-` among them: options may follow, as GNU getopt permutes them.
            request.files.push(word.clone());
            continue;
        };
        for (at, letter) in letters.char_indices() {
            let option = OPTIONS.iter().find(|o| o.short == letter).ok_or_else(|| {
                format!("pv -{letter}: unknown option; pv -h lists the options accel takes")
            })?;
            let typed = format!("-{letter}");
            let value = match option.value {
                None => None,
                Some(placeholder) => {
                    let rest = &letters[at + letter.len_utf8()..];
                    let value = if rest.is_empty() {
                        words.next().cloned().ok_or_else(|| {
                            format!("pv {typed}: a value {placeholder} must follow it")
                        })?
                    } else {
                        // The rest of the word, bytes and all (a path need not be UTF-8).
                        let offset = word.len() - rest.len();
                        bytes_from(word, offset)
                    };
                    Some(value)
                }
            };
            if let Some(shown) = apply(&mut request, option, &typed, value.clone())? {
                return Ok(shown);
            }
            if value.is_some() {
                break;
            }
        }
    }
    Ok(Parsed::Run(Box::new(request)))
}

/// `word` from byte `offset` on.
fn bytes_from(word: &OsString, offset: usize) -> OsString {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    OsString::from_vec(word.as_bytes()[offset..].to_vec())
}

/// The option whose long name is `name`, or starts with it and no other's does (getopt_long).
fn long_option(name: &str) -> Result<&'static Opt, String> {
    let exact = OPTIONS.iter().find(|o| o.long.contains(&name));
    if let Some(option) = exact {
        return Ok(option);
    }
    let candidates: Vec<&Opt> = OPTIONS
        .iter()
        .filter(|o| !name.is_empty() && o.long.iter().any(|long| long.starts_with(name)))
        .collect();
    match candidates.as_slice() {
        [one] => Ok(one),
        [] => Err(format!("pv --{name}: unknown option; pv -h lists the options accel takes")),
        several => {
            let names: Vec<String> = several.iter().map(|o| format!("--{}", o.long[0])).collect();
            Err(format!("pv --{name}: ambiguous: {}", names.join(", ")))
        }
    }
}

/// Sets what `option` (typed as `typed`, with `value`) asks for; `Some` for one that ends
/// parsing (`-h`, `-V`).
fn apply(
    r: &mut Request,
    option: &Opt,
    typed: &str,
    value: Option<OsString>,
) -> Result<Option<Parsed>, String> {
    if let Handling::Refused(why) = option.handling {
        return Err(format!("pv {typed}: {why}"));
    }
    let raw = value.clone().unwrap_or_default();
    let text = raw.to_string_lossy().into_owned();
    let bad = |why: &str| format!("pv {typed} {text}: {why}");
    if let Handling::Differs(what) = option.handling {
        let note = format!("{typed}: {what}");
        if !r.notes.contains(&note) {
            r.notes.push(note);
        }
    }
    let si = r.si;
    let display = |r: &mut Request, set: fn(&mut LineParts)| {
        set(&mut r.parts);
        r.switches += 1;
    };
    match option.short {
        'h' => return Ok(Some(Parsed::Help)),
        'V' => return Ok(Some(Parsed::Version)),
        'p' => display(r, |p| p.bar = true),
        't' => display(r, |p| p.elapsed = true),
        'e' | 'I' => display(r, |p| p.eta = true),
        'r' => display(r, |p| p.rates = true),
        'a' => display(r, |p| p.average = true),
        'b' | '8' => display(r, |p| p.counts = true),
        'T' => display(r, |p| p.fill = true),
        'A' => {
            whole(&text).ok_or_else(|| bad(NOT_WHOLE))?;
            display(r, |_| {});
        }
        'F' => r.format = Some(text),
        'n' => {
            r.numeric = true;
            r.switches += 1;
        }
        'q' => {
            r.quiet = true;
            r.switches += 1;
        }
        'k' => r.si = true,
        'W' => r.hold.first_byte = true,
        'D' => r.hold.delay = Some(seconds(&text).ok_or_else(|| bad(NOT_SECONDS))?),
        's' => {
            let size = match text.strip_prefix('@') {
                Some(file) => {
                    std::fs::metadata(file).map_err(|e| bad(&crate::words::describe(&e)))?.len()
                }
                None => size(&text, si).map_err(|why| bad(&why))?,
            };
            // 0 is pv's "unknown", as syncoid passes it when zfs cannot estimate.
            r.size = (size > 0).then_some(size);
        }
        'l' => r.lines = Some(r.lines.unwrap_or(b'\n')),
        '0' => r.lines = Some(0),
        'i' => {
            let interval = seconds(&text).ok_or_else(|| bad(NOT_SECONDS))?;
            let shortest = crate::cli::validate::SHORTEST_INTERVAL;
            if interval < shortest {
                r.notes.push(format!("{typed} {text}: accel updates at most every 0.1 seconds"));
            }
            r.interval = Some(interval.max(shortest));
        }
        'm' | 'H' => {
            whole(&text).ok_or_else(|| bad(NOT_WHOLE))?;
        }
        'w' => {
            r.width = Some(whole(&text).ok_or_else(|| bad(NOT_WHOLE))? as usize).filter(|w| *w > 0)
        }
        'N' => r.name = Some(raw),
        'v' => r.stats = true,
        'f' => r.force = true,
        'o' => r.output = Some(raw),
        'X' => r.discard = true,
        'L' => r.rate_limit = Some(size(&text, si).map_err(|why| bad(&why))?),
        'B' => r.buffer = Some(size(&text, si).map_err(|why| bad(&why))?.max(1)),
        'C' => r.no_splice = true,
        'S' => r.stop_at_size = true,
        'Y' => r.sync = true,
        'R' | 'Q' => {
            let pid = whole(&text).filter(|pid| (1..=u64::from(u32::MAX)).contains(pid));
            r.remote = Some(pid.ok_or_else(|| bad("not a process ID"))? as u32);
        }
        'g' | 'u' | 'x' | 'c' | 'K' | 'O' => {}
        other => unreachable!("pv -{other} is in OPTIONS but not applied"),
    }
    if !matches!(option.short, 'R' | 'Q' | 'L' | 'k') {
        r.unsent.push(typed.to_owned());
    }
    Ok(None)
}

const NOT_WHOLE: &str = "not a whole number";
const NOT_SECONDS: &str = "not a number of seconds (e.g. 2 or 0.5)";

/// A whole number, as pv's integer options take it: digits only.
fn whole(text: &str) -> Option<u64> {
    let text = text.trim_start_matches([' ', '\t']);
    (!text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())).then(|| text.parse().ok())?
}

/// Seconds as pv's `-i` and `-D` take them: digits, and a fraction after `.` or `,`.
fn seconds(text: &str) -> Option<Duration> {
    let text = text.trim_start_matches([' ', '\t']).replacen(',', ".", 1);
    let valid = text.split_once('.').map_or(text.as_str(), |(int, _)| int);
    if !text.starts_with(|c: char| c.is_ascii_digit())
        || valid.contains(|c: char| !c.is_ascii_digit())
    {
        return None;
    }
    let seconds: f64 = text.parse().ok()?;
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| *d <= crate::cli::validate::LONGEST_DURATION)
}

/// A size as pv reads it (`pv_getnum_size`): digits, a fraction after `.` or `,` (to four
/// places), spaces, and one suffix `k m g t` in either case, of 1024 (1000 after `-k`).
/// Exact up to the largest u64, as syncoid may pass a full one.
pub fn size(text: &str, si: bool) -> Result<u64, String> {
    const FORMAT: &str = "not a size: expected a number with an optional K, M, G or T \
         (multiples of 1024), e.g. 100M or 1.5G";
    let text = text.trim_start_matches([' ', '\t']);
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    if digits == 0 {
        return Err(FORMAT.into());
    }
    let (integer, mut rest) = text.split_at(digits);
    let mut fraction = "";
    if let Some(after) = rest.strip_prefix(['.', ',']) {
        let end = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
        (fraction, rest) = after.split_at(end);
    }
    let rest = rest.trim_start_matches([' ', '\t']);
    let power = match rest.chars().next().map(|c| c.to_ascii_lowercase()) {
        None => 0,
        Some('k') => 1,
        Some('m') => 2,
        Some('g') => 3,
        Some('t') => 4,
        Some(_) => return Err(FORMAT.into()),
    };
    if rest.len() > 1 {
        return Err(FORMAT.into());
    }
    let unit = u128::from(if si { 1000u64 } else { 1024 }).pow(power);
    // pv reads four places of a fraction, and drops the rest of a byte.
    let places = &fraction[..fraction.len().min(4)];
    let divisor = 10u128.pow(places.len() as u32);
    let part = if places.is_empty() { 0 } else { places.parse::<u128>().map_err(|_| FORMAT)? };
    let whole =
        integer.parse::<u128>().map_err(|_| "too large: at most 18446744073709551615 bytes")?;
    let bytes = whole.checked_mul(unit).map(|bytes| bytes + part * unit / divisor);
    bytes
        .and_then(|bytes| u64::try_from(bytes).ok())
        .ok_or_else(|| "too large: at most 18446744073709551615 bytes".to_owned())
}

impl Request {
    /// The parts of the line: the format's, the switches', or with none of either, accel's
    /// whole line; and what a format holds that accel does not show, to say once.
    fn parts(&self) -> (LineParts, Option<String>) {
        let Some(format) = &self.format else {
            return match self.switches {
                0 => (LineParts::ACCEL, None),
                _ => (self.parts, None),
            };
        };
        let (parts, other) = format_parts(format);
        let note = other.then(|| {
            "-F: accel shows the parts the format names in its own layout, without its other \
             text"
                .to_owned()
        });
        (parts, note)
    }

    /// accel's own command line for this request.
    pub fn accel_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["accel".into()];
        let mut push = |words: &[&str]| args.extend(words.iter().map(OsString::from));
        if let Some(pid) = self.remote {
            push(&["-R", &pid.to_string()]);
            if let Some(rate) = self.rate_limit {
                push(&["-r", &rate.to_string()]);
            }
            return args;
        }
        if self.quiet {
            push(&["-q"]);
        } else if self.numeric {
            push(&["-n"]);
        } else if self.force {
            // Whatever stderr is, and whatever the job: a terminal gets the line, a file or
            // pipe a line per interval.
            push(&["--progress-fd", "2"]);
        }
        if self.stats && !self.quiet {
            push(&["-v"]);
        }
        if let Some(interval) = self.interval {
            push(&["--interval", &format!("{}ms", interval.as_millis().max(1))]);
        }
        if let Some(rate) = self.rate_limit {
            push(&["-r", &rate.to_string()]);
        }
        if let Some(buffer) = self.buffer {
            push(&["-m", &buffer.to_string()]);
        }
        if self.no_splice {
            push(&["--engine", "copy"]);
        }
        if self.sync {
            push(&["--sync"]);
        }
        match (&self.output, self.discard) {
            (_, true) => push(&["-o", "/dev/null"]),
            (Some(output), false) if output == "-" => {}
            (Some(output), false) => {
                args.extend(["-o".into(), output.clone(), "-f".into()]);
            }
            (None, false) => {}
        }
        if let Some(name) = &self.name {
            args.extend(["-N".into(), name.clone()]);
        }
        if !self.files.is_empty() {
            args.push("--".into());
            args.extend(self.files.iter().cloned());
        }
        args
    }

    /// Sets on `config` what only pv has a use for: the parts of the line, the figures of
    /// `-n`, the hold, the width, lines counted, the size expected, stopping at it.
    pub fn adjust(&self, config: &mut Config) {
        let parts = match self.parts().0 {
            // Only parts accel cannot show (-A): its own line rather than none.
            parts if parts == LineParts::NONE => LineParts::ACCEL,
            parts => parts,
        };
        config.look = Look {
            parts,
            figures: Figures {
                elapsed: self.parts.elapsed,
                count: self.parts.counts,
                rate: self.parts.rates,
            },
            hold: self.hold,
            width: self.width,
        };
        config.lines = self.lines;
        config.expect = self.size;
        config.stop_after = self.size.filter(|_| self.stop_at_size);
    }

    /// What accel says once, at the start: each difference from what was asked.
    pub fn said(&self) -> Vec<String> {
        let mut said = self.notes.clone();
        said.extend(self.parts().1);
        if self.remote.is_some() && !self.unsent.is_empty() {
            said.push(format!(
                "-R: only -L changes a running accel; not sent: {}",
                self.unsent.join(" ")
            ));
        }
        said
    }

    /// Why the request cannot run, if it cannot.
    fn refusal(&self) -> Option<String> {
        if self.stop_at_size && self.lines.is_some() {
            return Some(
                "pv -S: with -l, accel cannot stop after a number of lines; head -n N does".into(),
            );
        }
        None
    }
}

/// The parts a `-F` format names, and whether it holds anything else (text, or a sequence
/// accel does not show).
fn format_parts(format: &str) -> (LineParts, bool) {
    let mut parts = LineParts::NONE;
    let mut other = false;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            other |= !c.is_whitespace();
            continue;
        }
        // A width first (`%20p`, `%16A`), which accel's layout decides.
        while chars.next_if(char::is_ascii_digit).is_some() {}
        let name: String = match chars.next() {
            Some('{') => chars.by_ref().take_while(|&c| c != '}').collect(),
            Some(letter) => letter.to_string(),
            None => {
                other = true;
                break;
            }
        };
        match name.as_str() {
            "p" | "progress" | "progress-bar-only" | "progress-amount-only" => parts.bar = true,
            "t" | "timer" => parts.elapsed = true,
            "e" | "eta" | "I" | "fineta" => parts.eta = true,
            "r" | "rate" => parts.rates = true,
            "a" | "average-rate" => parts.average = true,
            "b" | "bytes" | "transferred" => parts.counts = true,
            "T" | "buffer-percent" => parts.fill = true,
            // The name is shown wherever -N gives one; colours are pv's.
            "N" | "name" => {}
            sgr if sgr.starts_with("sgr:") => {}
            _ => other = true,
        }
    }
    (parts, other)
}

/// pv's `-h`, in accel's words: every option and what accel does with it, and the deliberate
/// differences.
pub fn help() -> String {
    let mut text = format!(
        "Usage: pv [OPTION] [FILE]...\n\
         This is accel {}, reading pv's command line: each FILE in turn (- is stdin) to \
         stdout, through accel's buffer. Every option of pv's is done as below or refused.\n\n",
        env!("CARGO_PKG_VERSION")
    );
    for option in OPTIONS {
        let value = option.value.map(|v| format!(" {v}")).unwrap_or_default();
        let head = format!("-{}, --{}{value}", option.short, option.long.join(", --"));
        let what = match option.handling {
            Handling::Maps(what) => what.to_owned(),
            Handling::Differs(what) => format!("taken; said once: {what}"),
            Handling::Accepted(what) => format!("accepted: {what}"),
            Handling::Refused(why) => format!("refused: {why}"),
        };
        let _ = writeln!(text, "  {head:<34}: {what}");
    }
    text.push_str(
        "\nSizes: a number, a fraction, and K, M, G or T (multiples of 1024; of 1000 after \
         -k): 100M, 1.5G.\n\nDifferences from pv, on purpose:\n",
    );
    for difference in DIFFERENCES {
        let _ = writeln!(text, "  - {difference}");
    }
    text.push_str("`accel --help` has the rest.\n");
    text
}

/// Runs accel on pv's command line `args`; the status to return from `main`.
pub fn main(args: &[OsString], closed: crate::run::stdio::Closed) -> i32 {
    let request = match parse(args) {
        Ok(Parsed::Run(request)) => *request,
        Ok(Parsed::Help) => return crate::cli::print(&help()),
        Ok(Parsed::Version) => {
            return crate::cli::print(&format!(
                "accel {}, running as pv (it reads pv's command line; pv -h says how)\n",
                env!("CARGO_PKG_VERSION")
            ));
        }
        Err(why) => return refuse(&why),
    };
    if let Some(why) = request.refusal() {
        return refuse(&why);
    }
    // Not into what reads -n's numbers (dialog would take a sentence for a figure).
    if !request.quiet && !request.numeric {
        for said in request.said() {
            eprintln!("accel: pv {said}");
        }
    }
    let cli = match usage::parse(&request.accel_args()) {
        Ok(cli) => cli,
        Err(Refusal::Usage(why)) => return refuse(&format!("pv: {why}")),
        Err(Refusal::Shown(_)) => return i32::from(Exit::Usage.code()),
    };
    let stderr_is_terminal = rustix::termios::isatty(rustix::stdio::stderr());
    let mut config = match Config::from_cli(cli, stderr_is_terminal) {
        Ok(config) => config,
        Err(error) => return refuse(&format!("pv: {error}")),
    };
    request.adjust(&mut config);
    crate::run::run(&config, closed).terminate()
}

/// Says why, `accel: pv ...`; accel's usage status.
fn refuse(why: &str) -> i32 {
    eprintln!("accel: {why}");
    i32::from(Exit::Usage.code())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(args: &str) -> Result<Request, String> {
        let args: Vec<OsString> =
            std::iter::once("pv").chain(args.split_whitespace()).map(Into::into).collect();
        match parse(&args)? {
            Parsed::Run(request) => Ok(*request),
            _ => Err("shown".into()),
        }
    }

    /// The accel command line for pv's `args`.
    fn translated(args: &str) -> String {
        let request = parsed(args).unwrap();
        let args = request.accel_args();
        args[1..].iter().map(|arg| arg.to_string_lossy()).collect::<Vec<_>>().join(" ")
    }

    /// The config accel runs with for pv's `args`.
    fn config(args: &str) -> Config {
        let request = parsed(args).unwrap();
        let cli = usage::parse(&request.accel_args()).unwrap();
        let mut config = Config::from_cli(cli, true).unwrap();
        request.adjust(&mut config);
        config
    }

    #[test]
    fn sizes_as_pv_reads_them() {
        assert_eq!(size("100", false), Ok(100));
        assert_eq!(size("1k", false), Ok(1024));
        assert_eq!(size("1.5G", false), Ok(3 << 29));
        assert_eq!(size("1,5g", false), Ok(3 << 29));
        assert_eq!(size("2 T", false), Ok(2 << 40));
        assert_eq!(size("1.5k", true), Ok(1500));
        assert_eq!(size("18446744073709551615", false), Ok(u64::MAX));
        assert_eq!(size("0.12345k", false), Ok(126), "four places, as pv");
        assert!(size("18446744073709551616", false).unwrap_err().starts_with("too large"));
        assert!(size("17179869184G", false).unwrap_err().starts_with("too large"));
        for bad in ["", "lots", "-5", "5X", "5kb", "1e6", ".5"] {
            assert!(size(bad, false).unwrap_err().starts_with("not a size"), "{bad}");
        }
    }

    #[test]
    fn the_command_lines_people_and_tools_write_translate() {
        let cases = [
            // syncoid
            ("-p -t -e -r -b -s 12345", ""),
            // btrbk (before 0.27): --progress, and the rate limit, lower-cased
            ("-trab", ""),
            ("-q -L 10m", "-q -r 10485760"),
            // pyznap
            ("-f -w 100 -s 5000", "--progress-fd 2"),
            // at a terminal
            ("-pterb", ""),
            ("-L 1m", "-r 1048576"),
            ("-L1m -N name -c", "-r 1048576 -N name"),
            ("-n", "-n"),
            ("-l", ""),
            ("-B 64M -C -Y", "-m 67108864 --engine copy --sync"),
            ("a.img -o out.img", "-o out.img -f -- a.img"),
            ("-X a b - c", "-o /dev/null -- a b - c"),
            ("--rate-limit=2M --name=x --prog --interval 0.5", "--interval 500ms -r 2097152 -N x"),
            ("-i 0.01", "--interval 100ms"),
            ("-k -L 1.5m", "-r 1500000"),
            ("-R 4242 -L 5M", "-R 4242 -r 5242880"),
            ("-Q 4242", "-R 4242"),
            ("-v -q", "-q"),
            ("-- -pterb", "-- -pterb"),
        ];
        for (args, expected) in cases {
            assert_eq!(translated(args), expected, "pv {args}");
        }
    }

    #[test]
    fn display_switches_choose_the_parts() {
        let parts = |args: &str| config(args).look.parts;
        assert_eq!(parts(""), LineParts::ACCEL, "pv's default: accel's whole line");
        assert_eq!(parts("-s 5"), LineParts::ACCEL);
        let pterb = LineParts { fill: false, ..LineParts::ACCEL };
        assert_eq!(parts("-pterb"), pterb);
        assert_eq!(parts("-p -t -e -r -b -s 12345"), pterb);
        assert_eq!(parts("-t"), LineParts { elapsed: true, ..LineParts::NONE });
        assert_eq!(
            parts("-trab"),
            LineParts {
                elapsed: true,
                rates: true,
                average: true,
                counts: true,
                ..LineParts::NONE
            }
        );
        assert_eq!(parts("-T -I"), LineParts { fill: true, eta: true, ..LineParts::NONE });
        assert_eq!(parts("-A 16"), LineParts::ACCEL, "nothing accel can show: its own line");
        assert_eq!(parts("-t -F %b"), LineParts { counts: true, ..LineParts::NONE }, "-F wins");
        assert_eq!(
            parts("-F %20{progress}%{eta}%N"),
            LineParts { bar: true, eta: true, ..LineParts::NONE }
        );
        let said = |args: &str| parsed(args).unwrap().said();
        assert_eq!(said("-F %b"), Vec::<String>::new());
        assert_eq!(
            said("-F [%b]:%A"),
            [
                "-F: accel shows the parts the format names in its own layout, without its other text"
            ]
        );
    }

    #[test]
    fn what_only_pv_has_a_use_for_is_set_after() {
        let c = config("-n -t -b -W -D 1.5 -w 60 -l -s 1k -S");
        assert!(c.numeric);
        assert_eq!(c.look.figures, Figures { elapsed: true, count: true, rate: false });
        assert_eq!(
            c.look.hold,
            Hold { first_byte: true, delay: Some(Duration::from_millis(1500)) }
        );
        assert_eq!(c.look.width, Some(60));
        assert_eq!(c.lines, Some(b'\n'));
        assert_eq!(c.expect, Some(1024));
        assert_eq!(c.stop_after, Some(1024));
        assert_eq!(config("-0").lines, Some(0));
        assert_eq!(config("-s 0").expect, None, "0 is unknown, as syncoid passes it");
        assert_eq!(config("-S").stop_after, None, "-S needs -s");
        assert_eq!(config("-s 18446744073709551615").expect, Some(u64::MAX));
        assert_eq!(
            parsed("-l -S -s 5").unwrap().refusal().unwrap(),
            "pv -S: with -l, accel cannot stop after a number of lines; head -n N does"
        );
    }

    #[test]
    fn refusals_name_the_option_and_why() {
        let said = |args: &str| parsed(args).unwrap_err();
        for option in OPTIONS {
            if let Handling::Refused(why) = option.handling {
                let value = if option.value.is_some() { " 1" } else { "" };
                assert_eq!(
                    said(&format!("-{}{value}", option.short)),
                    format!("pv -{}: {why}", option.short)
                );
                assert_eq!(
                    said(&format!("--{}{value}", option.long[0])),
                    format!("pv --{}: {why}", option.long[0])
                );
            }
        }
        assert_eq!(said("-j"), "pv -j: unknown option; pv -h lists the options accel takes");
        assert_eq!(said("-ptj"), "pv -j: unknown option; pv -h lists the options accel takes");
        assert_eq!(
            said("--bogus"),
            "pv --bogus: unknown option; pv -h lists the options accel takes"
        );
        assert_eq!(
            said("--st"),
            "pv --st: ambiguous: --stats, --stop-at-size, --store-and-forward"
        );
        assert_eq!(parsed("--siz 5").unwrap().size, Some(5), "a unique prefix");
        assert_eq!(said("-s"), "pv -s: a value SIZE must follow it");
        assert_eq!(
            said("-s lots"),
            format!(
                "pv -s lots: not a size: expected a number with an optional K, M, G or T (multiples of 1024), e.g. 100M or 1.5G"
            )
        );
        assert_eq!(said("-i soon"), format!("pv -i soon: {NOT_SECONDS}"));
        assert_eq!(said("-R me"), "pv -R me: not a process ID");
        assert_eq!(said("--quiet=yes"), "pv --quiet: takes no value");
        assert!(said("-s @/nonexistent").starts_with("pv -s @/nonexistent: No such file"));
    }

    #[test]
    fn differences_are_said_once_and_only_those() {
        let said = |args: &str| parsed(args).unwrap().said();
        assert_eq!(said("-p -t -e -r -b -s 100"), Vec::<String>::new(), "syncoid's: silent");
        assert_eq!(
            said("-I -I -K"),
            [
                "-I: accel shows the time left (as -e), not the time of day it ends",
                "-K: accel does not use O_DIRECT"
            ]
        );
        assert_eq!(said("-R 42 -L 1M -N x"), ["-R: only -L changes a running accel; not sent: -N"]);
        assert_eq!(said("-R 42 -L 1M"), Vec::<String>::new());
    }

    #[test]
    fn invoked_by_the_name_pv_only() {
        let named = |name: &str| invoked_as(Some(&OsString::from(name)));
        assert!(named("pv"));
        assert!(named("/usr/local/bin/pv"));
        assert!(!named("accel"));
        assert!(!named("pvs"));
        assert!(!invoked_as(None));
    }
}
