//! The command line's refusals in accel's words: one line, `accel: <what>: <why>`.
//!
//! clap parses the arguments (`mod.rs`), but its own messages are several lines that start with
//! `error:` and end with a usage block, and they name options by their long form and
//! placeholder (`--size <SIZE>`) whatever the user typed. accel promises one-line errors, so
//! this module words each of clap's refusals itself, from the error's kind and context and
//! from the raw arguments: what was typed (`-m`, not `--size <SIZE>`), and what came before an
//! unexpected word (`--json out.json` wants `--json=out.json`).
//!
//! It also gives every option that takes a value getopt's rule: the next argument is its value
//! even when it starts with `-`, so `-m -5` is a bad size for `-m`, worded by `validate.rs` like
//! any other, rather than an unknown option `-5`.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, Command, CommandFactory, FromArgMatches};

use crate::cli::Cli;

/// Why the command line does not start a run.
#[derive(Debug)]
pub enum Refusal {
    /// `--help` or `--version`: clap prints them to stdout (`Error::print`), status 0.
    Shown(clap::Error),
    /// A usage error, worded as `<what>: <why>`, for `accel: ` to prefix; status 2.
    Usage(String),
}

/// Parses `args` (the program name first) into a [`Cli`], or says why not.
pub fn parse(args: &[OsString]) -> Result<Cli, Refusal> {
    // With an ssh:// peer, the words after `--` are the remote command, as ssh takes them;
    // without one, `--` ends the options before FILE operands, as today.
    let (args, remote_command) = match remote_command_at(args) {
        Some(at) => {
            (&args[..at], args[at + 1..].iter().map(|w| w.to_string_lossy().into()).collect())
        }
        None => (args, Vec::new()),
    };
    let mut cli = parse_options(args)?;
    cli.remote_command = remote_command;
    Ok(cli)
}

/// Where the `--` before a remote command is, when a peer is an ssh:// URL (`--to ssh://…`,
/// `--from=ssh://…`).
fn remote_command_at(args: &[OsString]) -> Option<usize> {
    let words: Vec<_> = args.iter().map(|arg| arg.to_string_lossy()).collect();
    let end = words.iter().position(|word| word == "--")?;
    let ssh = words[..end].windows(2).any(|pair| {
        let (option, value) = (pair[0].as_ref(), pair[1].as_ref());
        (matches!(option, "--to" | "--from") && value.starts_with("ssh://"))
            || ["--to=ssh://", "--from=ssh://"].iter().any(|p| value.starts_with(p))
    });
    ssh.then_some(end)
}

/// Parses the options and FILE operands (the program name first).
fn parse_options(args: &[OsString]) -> Result<Cli, Refusal> {
    let mut command = Cli::command().mut_args(|arg| {
        // getopt's rule for an option's value; not for `--json[=FILE]`-style options, whose
        // value only ever comes after `=`.
        if arg.get_action().takes_values() && !arg.is_require_equals_set() && !arg.is_positional() {
            arg.allow_hyphen_values(true)
        } else {
            arg
        }
    });
    let refused = |error: clap::Error, command: &Command| match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => Refusal::Shown(error),
        _ => Refusal::Usage(explain(&error, command, args)),
    };
    let matches = match command.try_get_matches_from_mut(args) {
        Ok(matches) => matches,
        Err(error) => return Err(refused(error, &command)),
    };
    let cli = Cli::from_arg_matches(&matches).map_err(|error| refused(error, &command))?;
    if let (Some(_), [_, more, ..]) = (&cli.generate, cli.files.as_slice()) {
        return Err(Refusal::Usage(format!(
            "{}: unexpected operand: --generate key writes one FILE",
            more.display()
        )));
    }
    // A FILE operand that is the value a peer's option would take, or that an option of
    // accel's takes only after `=`, is refused with the habit named, not read as a file.
    let typed = typed_with_name(args);
    for (at, after_option) in operands(&typed, &command) {
        let why = after_option.then(|| value_habit(&typed[at], &typed[at - 1], &command));
        if let Some(why) = why.flatten() {
            return Err(Refusal::Usage(why));
        }
    }
    Ok(cli)
}

/// Where the operands are among `typed` (the program's name first), read as getopt reads
/// them: an option's value is the rest of its word or the next word, and `--` ends the
/// options (the operands after it are files whatever they look like: none is returned). With
/// each, whether the word before it is an option (not an option's value, nor an operand).
fn operands(typed: &[String], command: &Command) -> Vec<(usize, bool)> {
    let takes_value = |arg: &Arg| arg.get_action().takes_values() && !arg.is_require_equals_set();
    let mut found = Vec::new();
    let mut after_option = false;
    let mut at = 1;
    while at < typed.len() {
        let word = typed[at].as_str();
        if word == "--" {
            break;
        }
        // Whether the next word is this option's value, and whether this word holds one.
        let (value_follows, holds_value) = if let Some(long) = word.strip_prefix("--") {
            let takes = find(command, long_of(word)).is_some_and(takes_value);
            (takes && !long.contains('='), long.contains('='))
        } else if let Some(shorts) = word.strip_prefix('-').filter(|rest| !rest.is_empty()) {
            // The first letter that takes a value takes the rest of the word, or the next.
            let mut letters = shorts.char_indices();
            loop {
                let Some((i, letter)) = letters.next() else { break (false, false) };
                let arg = command.get_arguments().find(|arg| arg.get_short() == Some(letter));
                if arg.is_some_and(takes_value) {
                    let last = i + letter.len_utf8() == shorts.len();
                    break (last, !last);
                }
            }
        } else {
            found.push((at, after_option));
            after_option = false;
            at += 1;
            continue;
        };
        after_option = !value_follows && !holds_value;
        at += if value_follows { 2 } else { 1 };
    }
    found
}

/// Why the operand `word`, right after `before`, is refused rather than read as a file:
/// `before` is an option of accel's whose value goes after `=` (`--json out.json`), or a
/// flag that takes no value here but does in pv or mbuffer (`-n 2`), with no file `word`.
fn value_habit(word: &str, before: &str, command: &Command) -> Option<String> {
    let arg = if before.starts_with("--") { find(command, long_of(before)) } else { None };
    if let Some(arg) = arg.filter(|arg| arg.is_require_equals_set()) {
        return Some(format!(
            "{before} {word}: the value of {before} goes after '=': {before}={word}{}",
            if arg.get_num_args().is_some_and(|n| n.min_values() == 0) {
                format!(" ({before} alone takes none)")
            } else {
                String::new()
            }
        ));
    }
    let short = before.strip_prefix('-').filter(|rest| !rest.starts_with('-'))?.chars().last()?;
    let arg = command.get_arguments().find(|arg| arg.get_short() == Some(short))?;
    let habit = peer_value_habit(short)?;
    (!arg.get_action().takes_values() && std::fs::symlink_metadata(word).is_err())
        .then(|| format!("-{short} {word}: -{short} takes no value ({habit})"))
}

/// One line, `<what>: <why>`, for one of clap's refusals of `args`.
fn explain(error: &clap::Error, command: &Command, args: &[OsString]) -> String {
    let typed: Vec<String> =
        args.iter().skip(1).map(|arg| arg.to_string_lossy().into_owned()).collect();
    let text = |kind| match error.get(kind) {
        Some(ContextValue::String(text)) => Some(text.clone()),
        Some(ContextValue::Strings(texts)) => Some(texts.join(", ")),
        _ => None,
    };
    let option = |kind| text(kind).map(|spec| as_typed(&spec, command, &typed));
    match error.kind() {
        ErrorKind::UnknownArgument => {
            let word = text(ContextKind::InvalidArg).unwrap_or_default();
            unknown(&word, text(ContextKind::SuggestedArg), &typed)
        }
        ErrorKind::ValueValidation
            if text(ContextKind::InvalidArg).is_some_and(|spec| long_of(&spec) == "--remote") =>
        {
            let option = option(ContextKind::InvalidArg).unwrap_or_default();
            let value = text(ContextKind::InvalidValue).unwrap_or_default();
            format!(
                "{option} {value}: {option} takes the PID of a running accel here; a rate limit \
                 is -r RATE for the output or --input-rate RATE (mbuffer's -R and -r)"
            )
        }
        ErrorKind::InvalidValue => {
            let spec = text(ContextKind::InvalidArg).unwrap_or_default();
            let option = as_typed(&spec, command, &typed);
            let value = text(ContextKind::InvalidValue).unwrap_or_default();
            let valid = match error.get(ContextKind::ValidValue) {
                Some(ContextValue::Strings(values)) if !values.is_empty() => {
                    format!(": expected {}", one_of(values))
                }
                _ => String::new(),
            };
            if !value.is_empty() {
                format!("{option} {value}: not a value it takes{valid}")
            } else if typed.iter().any(|word| word.starts_with(&format!("{option}="))) {
                format!("{option}=: no value after '='{valid}")
            } else {
                let name = find(command, long_of(&spec))
                    .and_then(|arg| arg.get_value_names()?.first().map(|name| name.to_string()))
                    .unwrap_or_else(|| "VALUE".into());
                format!("{option}: a {name} must follow it{valid}")
            }
        }
        ErrorKind::ArgumentConflict => {
            let files = |kind| text(kind).is_some_and(|spec| spec.starts_with("[FILE]"));
            let other = if files(ContextKind::InvalidArg) {
                ContextKind::PriorArg
            } else if files(ContextKind::PriorArg) {
                ContextKind::InvalidArg
            } else {
                return format!(
                    "{}: cannot be used with {}",
                    option(ContextKind::InvalidArg).unwrap_or_default(),
                    option(ContextKind::PriorArg).unwrap_or_else(|| "the options given".into())
                );
            };
            let operand = operands(&typed_with_name(args), command)
                .first()
                .map(|&(at, _)| args[at].to_string_lossy().into_owned())
                .unwrap_or_default();
            format!(
                "{operand}: a FILE operand cannot be used with {}: accel reads one input, the \
                 files or {0}",
                option(other).unwrap_or_default()
            )
        }
        ErrorKind::TooManyValues => format!(
            "{}={}: {0} takes no value",
            option(ContextKind::InvalidArg).unwrap_or_default(),
            text(ContextKind::InvalidValue).unwrap_or_default()
        ),
        ErrorKind::MissingRequiredArgument => format!(
            "{}: required with the options given",
            text(ContextKind::InvalidArg).unwrap_or_default()
        ),
        ErrorKind::NoEquals => {
            let option = option(ContextKind::InvalidArg).unwrap_or_default();
            format!("{option}: its value goes after '=': {option}=VALUE")
        }
        _ => {
            // Anything else clap may refuse, in its own words, on one line.
            let rendered = error.render().to_string();
            let first = rendered.lines().next().unwrap_or_default();
            first.trim_start_matches("error: ").to_owned()
        }
    }
}

/// `args` as text, the program's name first.
fn typed_with_name(args: &[OsString]) -> Vec<String> {
    args.iter().map(|arg| arg.to_string_lossy().into_owned()).collect()
}

/// An argument clap did not expect: an unknown option, or a word no option takes.
fn unknown(word: &str, suggested: Option<String>, typed: &[String]) -> String {
    if !(word.starts_with('-') && word.len() > 1) {
        // Operands are files to read; clap names an unexpected word only where none is taken.
        return format!("{word}: unexpected operand");
    }
    // pv's display switches come bundled (`-pterb`): the bundle is what was typed.
    let letter = word.strip_prefix('-').filter(|rest| rest.chars().count() == 1);
    let bundle = letter.and_then(|letter| {
        typed.iter().find(|arg| {
            arg.len() > 2 && arg.starts_with('-') && !arg.starts_with("--") && arg.contains(letter)
        })
    });
    if let Some(bundle) =
        bundle.filter(|bundle| bundle[1..].chars().all(|c| PV_DISPLAY.contains(c)))
    {
        return format!("{bundle}: pv's display switches; {DISPLAY_HINT}");
    }
    let value = typed.iter().position(|arg| arg == word).and_then(|at| typed.get(at + 1));
    let hint = match (peer_habit(word, value.map(String::as_str)), suggested) {
        (Some(habit), _) => habit,
        (None, Some(suggested)) => format!("did you mean {suggested}?"),
        (None, None) => "accel --help lists the options".to_owned(),
    };
    format!("{word}: unknown option; {hint}")
}

/// The letters of pv's display switches, and of the flags that go with them, which come
/// bundled (`-pterb`, `-ptebar`, `-qL`).
const PV_DISPLAY: &str = "pteIrab8kTnqfcWgv";

/// What accel says of pv's display switches, which it has no need of.
const DISPLAY_HINT: &str = "accel's progress line shows the time, the rates and bytes, the \
     buffer's fill, and with a size the bar, percent done and ETA, without them; or run accel \
     as pv (see accel --help) to choose";

/// What an option of pv or mbuffer that accel lacks is called here; `value` is the word
/// after it.
fn peer_habit(option: &str, value: Option<&str>) -> Option<String> {
    let value = value.filter(|value| !value.starts_with('-'));
    let network = |accel: &str, placeholder: &str| {
        format!(
            "for mbuffer's {option} use {accel} {} (with --insecure to talk to a real mbuffer's \
             plain TCP; or run accel as mbuffer, see accel --help)",
            value.unwrap_or(placeholder)
        )
    };
    let as_pv = "run accel as pv (see accel --help)";
    Some(match option {
        "-I" => network("--from", "[ADDR:]PORT"),
        "-O" => network("--to", "HOST:PORT"),
        "-L" | "--rate-limit" => {
            format!("for pv's {option} (rate limit) use -r {}", value.unwrap_or("RATE"))
        }
        "-B" | "--buffer-size" => {
            format!("the buffer size is -m {} (pv's {option})", value.unwrap_or("SIZE"))
        }
        "-c" => "for mbuffer's -c (synchronous writes) use --sync; accels on one terminal \
                 share it without pv's -c"
            .into(),
        "--cursor" => {
            "accels on one terminal share it, each on a row of its own, without it".into()
        }
        "-s" => "for pv's -s (expected size) use --expect; for mbuffer's -s (block size) use \
                 --block-size"
            .into(),
        "-W" => format!(
            "for mbuffer's -W (watchdog) use --stall-timeout; for pv's -W (no display before the \
             first byte), {as_pv}"
        ),
        "--wait" | "-D" | "--delay-start" => format!("for pv's {option}, {as_pv}"),
        "-H" => "for mbuffer's -H use --hash md5; pv's -H (the terminal's height) is not \
                 needed: accel fits its line to the terminal"
            .into(),
        "--md5" => "for mbuffer's --md5 use --hash md5".into(),
        "-w" | "--width" | "--height" => {
            format!("pv's {option} is not needed: accel fits its line to the terminal")
        }
        "-t" | "--timer" | "-e" | "--eta" | "--fineta" | "--average-rate" | "-b" | "--bytes"
        | "-8" | "--bits" | "-k" | "--si" | "-T" | "--buffer-percent" | "-A" | "--last-written"
        | "-F" | "--format" | "-g" | "--gauge" | "-x" | "--extra-display" | "-u"
        | "--bar-style" => format!("pv's {option} chooses what its display shows; {DISPLAY_HINT}"),
        "-l" | "--line-mode" | "-0" | "--null" => {
            format!("accel counts bytes; to count lines, as pv's {option}, {as_pv}")
        }
        "-E" | "--skip-errors" | "-Z" | "--error-skip-block" => format!(
            "accel does not skip what cannot be read (pv's {option}): a read error ends the \
             run, status 1, what was read delivered; dd conv=noerror,sync or ddrescue do that"
        ),
        "-S" | "--stop-at-size" => format!(
            "to stop after SIZE bytes, as pv's {option}, put head -c SIZE before accel, or {as_pv}"
        ),
        "-C" | "--no-splice" => "for pv's -C use --engine copy".into(),
        "-Y" => "for pv's -Y use --sync (once, at the end)".into(),
        "-K" | "--direct-io" => "accel does not use O_DIRECT (pv's -K)".into(),
        "-X" | "--discard" => "to discard the stream, as pv's -X, use -o /dev/null".into(),
        "-U" | "--store-and-forward" => {
            "accel does not store a stream before it forwards it (pv's -U); --spill DIR takes \
             beyond memory what the consumer has not taken yet"
                .into()
        }
        "-d" | "--watchfd" => {
            "accel moves the data itself: it cannot watch another process's descriptor (pv's -d)"
                .into()
        }
        "-P" | "--pidfile" => {
            "accel writes no PID file (pv's -P): accel -R PID reaches a running accel by the \
             PID the shell gives ($!)"
                .into()
        }
        "-Q" | "--query" => "for pv's -Q PID use -R PID: the report so far".into(),
        _ => return None,
    })
}

/// What a flag of accel that takes no value means where mbuffer's takes one.
fn peer_value_habit(short: char) -> Option<&'static str> {
    Some(match short {
        'n' => "it asks for numeric progress, as pv's -n; mbuffer's -n counts volumes",
        'v' => "it asks for the full report; mbuffer's -v sets a verbosity",
        'p' => "it draws the progress line; mbuffer's -p is a fill level to resume at",
        'q' => "it silences what accel says about the run",
        _ => return None,
    })
}

/// The option clap describes as `spec` (`--size <SIZE>`, `--json[=<FILE>]`), as the user typed
/// it: `-m` where the short form was used.
fn as_typed(spec: &str, command: &Command, typed: &[String]) -> String {
    let long = long_of(spec);
    let Some(short) = find(command, long).and_then(Arg::get_short) else {
        return long.to_owned();
    };
    let last = typed.iter().rev().find_map(|arg| {
        if arg == long || arg.starts_with(&format!("{long}=")) {
            Some(long.to_owned())
        } else if arg.starts_with('-') && !arg.starts_with("--") && arg.contains(short) {
            Some(format!("-{short}"))
        } else {
            None
        }
    });
    last.unwrap_or_else(|| long.to_owned())
}

/// `--size` of `--size <SIZE>`, `--json` of `--json[=<FILE>]`.
fn long_of(spec: &str) -> &str {
    spec.split([' ', '[', '=']).next().unwrap_or(spec)
}

/// The argument whose long form is `long` (`--size`).
fn find<'a>(command: &'a Command, long: &str) -> Option<&'a Arg> {
    let long = long.strip_prefix("--")?;
    command.get_arguments().find(|arg| arg.get_long() == Some(long))
}

/// `a, b or c`.
fn one_of(values: &[String]) -> String {
    match values {
        [] => String::new(),
        [only] => only.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What accel says to `args`, or `ok` when they parse.
    fn said(args: &[&str]) -> String {
        let args: Vec<OsString> =
            std::iter::once("accel").chain(args.iter().copied()).map(Into::into).collect();
        match parse(&args) {
            Ok(_) => "ok".into(),
            Err(Refusal::Shown(_)) => "shown".into(),
            Err(Refusal::Usage(why)) => why,
        }
    }

    #[test]
    fn each_refusal_is_one_line_naming_what_was_typed() {
        let cases = [
            (&["--bogus"][..], "--bogus: unknown option; accel --help lists the options"),
            (&["--debg"], "--debg: unknown option; did you mean --debug?"),
            (&["-j"], "-j: unknown option; accel --help lists the options"),
            (
                &["-c"],
                "-c: unknown option; for mbuffer's -c (synchronous writes) use --sync; \
                       accels on one terminal share it without pv's -c",
            ),
            (
                &["-s", "256k"],
                "-s: unknown option; for pv's -s (expected size) use --expect; for mbuffer's -s \
                 (block size) use --block-size",
            ),
            (
                &["--engine", "foo"],
                "--engine foo: not a value it takes: expected auto, splice or copy",
            ),
            (&["--engine="], "--engine=: no value after '=': expected auto, splice or copy"),
            (&["--json="], "--json=: no value after '='"),
            (
                &["--json", "out.json"],
                "--json out.json: the value of --json goes after '=': --json=out.json \
                 (--json alone takes none)",
            ),
            (
                &["--output-error", "warn"],
                "--output-error warn: the value of --output-error goes after '=': \
                 --output-error=warn (--output-error alone takes none)",
            ),
            (
                &["-I", "9090"],
                "-I: unknown option; for mbuffer's -I use --from 9090 (with --insecure to talk \
                 to a real mbuffer's plain TCP; or run accel as mbuffer, see accel --help)",
            ),
            (
                &["-O", "host:9090"],
                "-O: unknown option; for mbuffer's -O use --to host:9090 (with --insecure to \
                 talk to a real mbuffer's plain TCP; or run accel as mbuffer, see accel --help)",
            ),
            (
                &["-R", "10M"],
                "-R 10M: -R takes the PID of a running accel here; a rate limit is -r RATE for \
                 the output or --input-rate RATE (mbuffer's -R and -r)",
            ),
            (&["-L", "10M"], "-L: unknown option; for pv's -L (rate limit) use -r 10M"),
            (&["-m"], "-m: a SIZE must follow it"),
            (&["--size"], "--size: a SIZE must follow it"),
            (&["-f", "-a"], "-f: cannot be used with -a"),
            (&["--append", "--force"], "--append: cannot be used with --force"),
            (&["--sync=yes"], "--sync=yes: --sync takes no value"),
            (&["file.tar", "-"], "ok"),
            (&["-N", "-n", "2"], "ok"),
            (
                &["-i", "a", "b"],
                "b: a FILE operand cannot be used with -i: accel reads one input, the files or -i",
            ),
            (
                &["-pterb"],
                "-pterb: pv's display switches; accel's progress line shows the time, the rates \
                 and bytes, the buffer's fill, and with a size the bar, percent done and ETA, \
                 without them; or run accel as pv (see accel --help) to choose",
            ),
            (
                &["--rate-limit", "1m"],
                "--rate-limit: unknown option; for pv's --rate-limit (rate limit) use -r 1m",
            ),
            (&["-B", "1G"], "-B: unknown option; the buffer size is -m 1G (pv's -B)"),
            (&["-C"], "-C: unknown option; for pv's -C use --engine copy"),
            (
                &["--generate", "key", "a", "b"],
                "b: unexpected operand: --generate key writes one FILE",
            ),
            (
                &["-n", "2"],
                "-n 2: -n takes no value (it asks for numeric progress, as pv's -n; \
                            mbuffer's -n counts volumes)",
            ),
            (
                &["-qv", "3"],
                "-v 3: -v takes no value (it asks for the full report; mbuffer's \
                             -v sets a verbosity)",
            ),
        ];
        for (args, expected) in cases {
            assert_eq!(said(args), expected, "{args:?}");
        }
    }

    #[test]
    fn a_value_may_start_with_a_dash() {
        let args: Vec<OsString> = ["accel", "-m", "-5", "-o", "-"].map(Into::into).to_vec();
        let cli = parse(&args).unwrap();
        assert_eq!(cli.size, "-5", "left to validate.rs to word as a bad size");
        assert_eq!(said(&["-q", "-v"]), "ok", "the later one counts");
        assert_eq!(said(&["--help"]), "shown");
        assert_eq!(said(&["-V"]), "shown");
    }
}
