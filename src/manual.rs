//! The man page: clap's sections (name, synopsis, options) and accel's own, so that `man accel`
//! is complete without the README: what the progress line and the report say, the JSON
//! fields, the signals, the exit statuses, where the page and the completions go.
//!
//! The tables are written once, here, in the README's Markdown (a cell's `code` becomes bold in
//! roff); the README repeats them, and a test keeps the two the same.

use std::io::{self, Write};

/// `--json`'s fields: name(s), in which events, meaning.
pub const JSON_FIELDS: &[[&str; 3]] = &[
    ["`event`", "both", "`\"progress\"` or `\"summary\"`"],
    ["`name`", "both", "the `-N` name; `null` without one"],
    ["`seconds`", "both", "time since start (time stopped by Ctrl-Z excluded)"],
    [
        "`bytes_in`, `bytes_out`",
        "both",
        "bytes read from the input; bytes written to the output (with several outputs and hashes: \
         taken by the slowest of them still going)",
    ],
    ["`fill_bytes`", "progress", "bytes held now"],
    ["`capacity_bytes`", "both", "the buffer size"],
    ["`rate_in`, `rate_out`", "progress", "smoothed bytes per second over the last seconds"],
    ["`producer_blocked_s`", "both", "seconds the input was held back because the buffer was full"],
    ["`consumer_starved_s`", "both", "seconds the consumer had nothing to read from accel"],
    ["`peak_fill_bytes`", "summary", "the most bytes held at once"],
    ["`bottleneck`", "summary", "`\"producer\"`, `\"consumer\"` or `\"none\"`"],
    [
        "`slowest`",
        "summary",
        "the output (or `the sha256 hash`) furthest behind at the end, which holds the buffer; \
         `null` when none is left",
    ],
    [
        "`input`, `outputs`",
        "summary",
        "the input's name; each output's `name`, `bytes` written, `starved_s` (seconds it waited \
         for data) and `complete` (`false` if it stopped early)",
    ],
    [
        "`hashes`",
        "summary",
        "each hash's `algorithm` and `hex` digest, when the input ended normally",
    ],
    [
        "`rate_limit_out`, `rate_limit_in`",
        "both",
        "the rate limits in force, bytes per second (0: none); they may change while accel runs \
         (`-R`)",
    ],
    ["`outputs[].padded`", "summary", "zeros that filled an output's last block (`--pad`)"],
    [
        "`engine`, `tiers`",
        "summary",
        "`\"splice\"` or `\"copy\"`; bytes that went `through` (spliced straight to stdout), via \
         `pipes` (accel's pool), via `memory`, or to `disk` (the spill)",
    ],
    [
        "`memory_bytes`, `disk_bytes`",
        "progress",
        "bytes held now in memory (and pool pipes), and in the spill file",
    ],
    ["`peak_memory_bytes`, `peak_disk_bytes`", "summary", "the most held at once in each"],
    ["`expected_bytes`", "summary", "the `--expect` size or stdin's size, when known"],
    [
        "`exit`, `signal`",
        "summary",
        "the exit status as the shell sees it (141 for SIGPIPE); the signal's name when accel \
         ended by one",
    ],
];

/// What each signal does.
pub const SIGNALS: &[[&str; 2]] = &[
    [
        "SIGINT, SIGTERM, SIGHUP",
        "accel stops promptly and ends by the same signal, as `cat` would (130, 143, 129 in \
         bash); buffered bytes are dropped, and one line says how many were read but not \
         delivered (after the report, with `-v`; nothing with `-q`)",
    ],
    ["SIGUSR1", "the report so far, as `dd` prints it; the run goes on"],
    [
        "SIGPIPE",
        "the consumer went away: accel ends by SIGPIPE, quietly, as `cat` does (unless \
         `--output-error` says otherwise)",
    ],
    [
        "SIGTSTP, SIGCONT",
        "Ctrl-Z stops accel as the kernel stops any process; the time stopped is left out of the \
         clock, and the progress line is drawn anew where the cursor is",
    ],
    ["SIGWINCH", "the progress line is fitted to the terminal's new width"],
    [
        "ignored on entry",
        "a signal ignored when accel started stays ignored: `nohup accel` survives SIGHUP",
    ],
];

/// The exit statuses.
pub const EXIT_STATUSES: &[[&str; 2]] = &[
    ["0", "Input ended and every byte read was written."],
    [
        "1",
        "Reading stdin failed (or stdin was closed), or a `--from` sender's connection ended \
         before its end-of-stream mark (or its input failed); every byte read before the error \
         was written. For `-R PID`: that accel could not be reached, or what answers there is \
         not to be trusted (a directory or socket of another user, a process other than PID).",
    ],
    [
        "2",
        "Usage error (bad option or value, a file `-i` or `-o` cannot open or `-o` would clobber, \
         input and an output the same file, a key file missing, malformed or readable by others); \
         nothing was read.",
    ],
    [
        "3",
        "Writing an output failed (e.g. `No space left on device`, stdout closed, `--sync` \
         failed, or `Broken pipe` when SIGPIPE was ignored or `--output-error=warn`/`exit` was \
         given), or an output was cut short, or a `--to` receiver closed the connection or did \
         not confirm the end of the stream; the message names the output with how many bytes it \
         got and how many read bytes it did not.",
    ],
    ["4", "`--stall-timeout` expired; the message names the side that stopped moving."],
    [
        "5",
        "accel could not start (no thread, no signal handlers, no memory for the buffer); nothing \
         was read.",
    ],
    [
        "6",
        "The network side could not be set up: the receiver's name not found, connection refused, \
         no route to the host, no answer, not an accel at the other end, the wrong key, the port \
         in use, or no sender within `--accept-timeout`; nothing was read. Apart from 2 and 5 \
         because a script may well retry it.",
    ],
    [
        "7",
        "Bytes spilled to disk (`--spill`) could not be read back (or their write-back to disk \
         failed); the message names the spill's directory and how many bytes each output got \
         and lost. It outweighs 1 and 3.",
    ],
    [
        "killed by SIGPIPE (141 in bash)",
        "The consumer exited before reading everything, as `cat` would end. Quiet.",
    ],
    [
        "killed by SIGINT, SIGTERM, SIGHUP (130, 143, 129)",
        "Stopped by that signal, promptly; buffered bytes are dropped, and said.",
    ],
];

/// What accel shows while it runs and at the end, paragraph by paragraph.
const PROGRESS: &[&str] = &[
    "On a terminal, in the foreground (or anywhere with `-p`), one line is redrawn twice a \
     second: the input (bytes, rate), the buffer's fill (`buf 42%`), the output (bytes, rate; \
     with several outputs, the one furthest behind, named), the time so far, and, when the \
     size is known (`--expect`, or a regular file as stdin), a bar, the percent done and the ETA, \
     as in `[====>     ]  39% ETA 0:00:01`. When the terminal is narrow, the percent done and \
     the ETA are kept longest.",
    "At the end the last line is left standing, with the final counts and average rates, and \
     one line of verdict under it: `bottleneck: consumer` when the buffer was full (the \
     producer held back) for a tenth of the run or more and longer than it was empty, \
     `bottleneck: producer` in the opposite case, `no bottleneck` when neither side waited \
     long on the other. With `-v`, the full report instead: bytes and rates, how long each \
     side waited, the peak fill, how the bytes went, and the verdict. SIGUSR1 prints the \
     report so far, which says so.",
    "Several accels drawing on one terminal (`producer | accel -N a | gzip | accel -N b > f`) \
     share it: each draws its line on a row of its own, and `-N` names it in its line, its \
     report and its JSON. `-n` writes numbers for scripts instead of the line; \
     `--progress-fd` sends the progress elsewhere; `--json` writes NDJSON events: a progress \
     event every second and a summary at the end, also after errors, broken pipes and \
     signals, with the fields below.",
];

/// Where things go, and what accel keeps.
const FILES: &[[&str; 2]] = &[
    [
        "`~/.cargo/share/man/man1/accel.1`",
        "this page, after `accel --generate man > ~/.cargo/share/man/man1/accel.1`: man finds \
         it while `~/.cargo/bin` is on PATH (`/usr/local/share/man/man1` for every user)",
    ],
    [
        "`~/.local/share/bash-completion/completions/accel`",
        "bash completions, from `accel --generate bash`",
    ],
    ["`~/.config/fish/completions/accel.fish`", "fish completions, from `accel --generate fish`"],
    ["`_accel` in a directory of `$fpath`", "zsh completions, from `accel --generate zsh`"],
    [
        "`$XDG_RUNTIME_DIR/accel/`, else `/tmp/accel-UID/`",
        "`PID.sock`, the control socket of each running accel (`-R PID`), removed when it ends \
         (one left by `kill -9` is removed by the next accel to start); a small file per \
         terminal, through which accels drawing on one terminal share it",
    ],
];

/// Writes the whole man page for `command` (accel's clap definition) to `out`.
pub fn write(command: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let man = clap_mangen::Man::new(command);
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    section(out, "PROGRESS AND REPORT")?;
    for paragraph in PROGRESS {
        writeln!(out, ".PP\n{}", roff(paragraph))?;
    }
    section(out, "JSON FIELDS")?;
    for [field, event, meaning] in JSON_FIELDS {
        writeln!(out, ".TP\n{} ({event})\n{}", roff(field), roff(meaning))?;
    }
    section(out, "SIGNALS")?;
    table(out, SIGNALS)?;
    section(out, "EXIT STATUS")?;
    table(out, EXIT_STATUSES)?;
    section(out, "EXAMPLES")?;
    for example in [
        "bzip2 \\-dc big.tar.bz2 | accel | gzip \\-9 > big.tar.gz",
        "zfs send pool/fs@snap | accel \\-m 1G | ssh backup zfs receive tank/fs",
        "xz \\-dc a.xz | accel \\-N unxz | gzip | accel \\-N gzip > a.gz",
        "accel \\-i disk.img \\-o /dev/sdX \\-o copy.img \\-\\-hash sha256 \\-v",
    ] {
        writeln!(out, ".PP\n.nf\n{example}\n.fi")?;
    }
    section(out, "FILES")?;
    table(out, FILES)?;
    section(out, "SEE ALSO")?;
    writeln!(out, "pv(1), mbuffer(1), tee(1), dd(1), dialog(1)")?;
    man.render_version_section(out)
}

fn section(out: &mut dyn Write, title: &str) -> io::Result<()> {
    writeln!(out, ".SH \"{title}\"")
}

/// Each row as a tagged paragraph: the first cell as the tag, the second as its text.
fn table(out: &mut dyn Write, rows: &[[&str; 2]]) -> io::Result<()> {
    for [key, meaning] in rows {
        writeln!(out, ".TP\n{}\n{}", roff(&bold(key)), roff(meaning))?;
    }
    Ok(())
}

/// `key` as code, unless it is already (a tag is bold either way).
fn bold(key: &str) -> String {
    if key.starts_with('`') { key.to_owned() } else { format!("`{key}`") }
}

/// Markdown-ish text as roff: `code` in bold, and what roff would take for its own escaped.
fn roff(text: &str) -> String {
    let mut out = String::new();
    for (at, piece) in text.split('`').enumerate() {
        let escaped = piece.replace('\\', "\\e").replace('-', "\\-");
        if at % 2 == 1 {
            // Unbreakable spaces: code keeps its spacing and stays on one line.
            out += &format!("\\fB{}\\fR", escaped.replace(' ', "\\ "));
        } else {
            out += &escaped;
        }
    }
    // A line starting with . or ' would be read as a request.
    if out.starts_with(['.', '\'']) { format!("\\&{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn page() -> String {
        let mut out = Vec::new();
        write(crate::cli::Cli::command(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_page_is_complete_on_its_own() {
        let page = page();
        for heading in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH OPTIONS",
            "PROGRESS AND REPORT",
            "JSON FIELDS",
            "SIGNALS",
            "EXIT STATUS",
            "FILES",
        ] {
            assert!(page.contains(heading), "{heading}");
        }
        for field in ["bytes_in", "producer_blocked_s", "expected_bytes", "signal", "name"] {
            assert!(page.contains(&format!("\\fB{field}")), "{field}");
        }
        for option in ["\\-\\-interval", "\\-\\-progress\\-fd", "\\-\\-generate", "\\-N"] {
            assert!(page.contains(option), "{option}");
        }
        assert!(!page.contains("README"), "the page does not send readers elsewhere");
    }

    #[test]
    fn roff_escapes() {
        assert_eq!(roff("`-m 1G` is 1 GiB"), "\\fB\\-m\\ 1G\\fR is 1 GiB");
        assert_eq!(roff(".hidden"), "\\&.hidden");
        assert_eq!(roff("a\\b"), "a\\eb");
    }

    /// The rows of the README table that follows `heading`, as `| a | b |` cells.
    fn readme_table(heading: &str) -> Vec<Vec<String>> {
        let readme = include_str!("../README.md");
        let from = readme.find(heading).unwrap_or_else(|| panic!("{heading} in the README"));
        readme[from..]
            .lines()
            .skip_while(|line| !line.starts_with('|'))
            .take_while(|line| line.starts_with('|'))
            .skip(2)
            .map(|line| {
                let cells = line.trim().trim_start_matches('|').trim_end_matches('|');
                cells.split(" | ").map(|cell| cell.trim().replace("\\|", "|")).collect()
            })
            .collect()
    }

    fn rows<const N: usize>(table: &[[&str; N]]) -> Vec<Vec<String>> {
        table.iter().map(|row| row.iter().map(|cell| cell.to_string()).collect()).collect()
    }

    /// The README says what the man page says.
    #[test]
    fn the_readme_repeats_the_tables() {
        assert_eq!(readme_table("| field | in | meaning |"), rows(JSON_FIELDS));
        assert_eq!(readme_table("| signal | what accel does |"), rows(SIGNALS));
        assert_eq!(readme_table("| status | meaning |"), rows(EXIT_STATUSES));
    }
}
