//! The command line's refusals in accel's words: one line, `accel: <what>: <why>`.
//!
//! clap parses the arguments (`cli.rs`), but its own messages are several lines that start with
//! `error:` and end with a usage block, and they name options by their long form and
//! placeholder (`--size <SIZE>`) whatever the user typed. accel promises one-line errors, so
//! this module words each of clap's refusals itself, from the error's kind and context and
//! from the raw arguments: what was typed (`-m`, not `--size <SIZE>`), and what came before an
//! unexpected word (`--json out.json` wants `--json=out.json`).
//!
//! It also gives every option that takes a value getopt's rule: the next argument is its value
//! even when it starts with `-`, so `-m -5` is a bad size for `-m`, worded by `config.rs` like
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
    if let (None, Some(operand)) = (&cli.generate, &cli.generate_into) {
        // The one operand, `--generate key FILE`'s, is as unexpected as any other without it.
        let typed: Vec<String> =
            args.iter().skip(1).map(|arg| arg.to_string_lossy().into_owned()).collect();
        return Err(Refusal::Usage(unknown(&operand.to_string_lossy(), None, &command, &typed)));
    }
    Ok(cli)
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
            unknown(&word, text(ContextKind::SuggestedArg), command, &typed)
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
        ErrorKind::ArgumentConflict => format!(
            "{}: cannot be used with {}",
            option(ContextKind::InvalidArg).unwrap_or_default(),
            option(ContextKind::PriorArg).unwrap_or_else(|| "the options given".into())
        ),
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

/// An argument clap did not expect: an unknown option, or a word no option takes.
fn unknown(word: &str, suggested: Option<String>, command: &Command, typed: &[String]) -> String {
    if word.starts_with('-') && word.len() > 1 {
        let value = typed.iter().position(|arg| arg == word).and_then(|at| typed.get(at + 1));
        let hint = match (suggested, peer_habit(word, value.map(String::as_str))) {
            (Some(suggested), _) => format!("did you mean {suggested}?"),
            (None, Some(habit)) => habit,
            (None, None) => "accel --help lists the options".to_owned(),
        };
        return format!("{word}: unknown option; {hint}");
    }
    // The word follows an option: one whose value goes after `=`, or one that takes none.
    let before = typed.iter().position(|arg| arg == word).and_then(|at| at.checked_sub(1));
    if let Some(option) = before.map(|at| typed[at].as_str()) {
        let arg = if option.starts_with("--") { find(command, option) } else { None };
        if let Some(arg) = arg.filter(|arg| arg.is_require_equals_set()) {
            return format!(
                "{option} {word}: the value of {option} goes after '=': {option}={word}{}",
                if arg.get_num_args().is_some_and(|n| n.min_values() == 0) {
                    format!(" ({option} alone takes none)")
                } else {
                    String::new()
                }
            );
        }
        let flag = option.strip_prefix('-').filter(|rest| !rest.starts_with('-'));
        if let Some(arg) = flag
            .and_then(|rest| rest.chars().last())
            .and_then(|short| command.get_arguments().find(|arg| arg.get_short() == Some(short)))
        {
            if !arg.get_action().takes_values() {
                let short = arg.get_short().unwrap_or_default();
                let habit = peer_value_habit(short).map(|habit| format!(" ({habit})"));
                return format!(
                    "-{short} {word}: -{short} takes no value{}",
                    habit.unwrap_or_default()
                );
            }
        }
    }
    format!(
        "{word}: unexpected operand: accel reads stdin (or -i FILE) and writes stdout (or -o FILE)"
    )
}

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
    Some(
        match option {
            "-I" => return Some(network("--from", "[ADDR:]PORT")),
            "-O" => return Some(network("--to", "HOST:PORT")),
            "-L" => {
                return Some(format!(
                    "for pv's -L (rate limit) use -r {}",
                    value.unwrap_or("RATE")
                ));
            }
            "-c" => {
                "for mbuffer's -c (synchronous writes) use --sync; accels on one terminal \
                 share it without pv's -c"
            }
            "-B" => "the buffer size is -m (pv's -B)",
            "-s" => {
                "for pv's -s (expected size) use --expect; for mbuffer's -s (block size) use \
                 --block-size"
            }
            "-W" => "for mbuffer's -W (watchdog) use --stall-timeout",
            "-H" | "--md5" => "for mbuffer's --md5 use --hash md5",
            _ => return None,
        }
        .to_owned(),
    )
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
            (&["-x"], "-x: unknown option; accel --help lists the options"),
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
            (
                &["file.tar"],
                "file.tar: unexpected operand: accel reads stdin (or -i FILE) and \
                             writes stdout (or -o FILE)",
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
        assert_eq!(cli.size, "-5", "left to config.rs to word as a bad size");
        assert_eq!(said(&["-q", "-v"]), "ok", "the later one counts");
        assert_eq!(said(&["--help"]), "shown");
        assert_eq!(said(&["-V"]), "shown");
    }
}
