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
    [
        "`rate_in`, `rate_out`",
        "progress",
        "smoothed bytes per second over the last seconds; 0 once that side has moved nothing \
         for 2 s",
    ],
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
         for data), `complete` (`false` if it stopped early) and `confirmed` (a `--to` output: \
         the bytes its receiver confirmed its outputs took; `null` for others)",
    ],
    [
        "`hashes`",
        "summary",
        "each hash's `algorithm` and `hex` digest, when the input ended normally",
    ],
    [
        "`outputs[].reconnections`, `outputs[].longest_outage_s`, `outputs[].outage_s`, \
         `outputs[].resent_bytes`",
        "summary",
        "a `--to` output's dropped connections that came back, the longest and the total time \
         without one, and the bytes sent again (`--reconnect-for`); 0 for others",
    ],
    [
        "`input_reconnections`, `input_longest_outage_s`, `input_outage_s`",
        "summary",
        "the same for a `--from` input (0 otherwise)",
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
        "`lines`, `expected_lines`",
        "progress, summary; summary",
        "where lines are counted (accel run as `pv -l`): the lines taken in, and the `-s` size, \
         in lines",
    ],
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
        "Reading the input failed (stdin, or a FILE operand, which may also have gone since \
         the start; or stdin was closed), or a `--from` sender's connection ended \
         before its end-of-stream mark (or its input failed); every byte read before the error \
         was written. For `-R PID`: that accel could not be reached, or what answers there is \
         not to be trusted (a directory or socket of another user, a process other than PID).",
    ],
    [
        "2",
        "Usage error (bad option or value, a file `-i`, a FILE operand or `-o` cannot open or \
         `-o` would clobber, \
         input and an output the same file, a key file missing, malformed, readable by others or \
         another user's, a key not written where others could read it); nothing was read.",
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
        "The network side could not be set up: the receiver's name not found, connection refused \
         (for `--connect-for`), no route to the host, no answer, not an accel at the other end, \
         the wrong key, the port in use, or no sender within `--accept-timeout`; nothing was \
         read. Apart from 2 and 5 because a script may well retry it.",
    ],
    [
        "7",
        "Bytes spilled to disk (`--spill`) could not be read back (or their write-back to disk \
         failed); the message names the spill's directory and how many bytes each output got \
         and lost. It outweighs 1 and 3.",
    ],
    [
        "8",
        "A thread of accel's own failed, a bug (it panicked): the message names its output (with \
         how many bytes it got and how many read bytes it did not) or its hash (no digest; the \
         outputs go on). It outweighs 1, 3 and 7.",
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

/// For people coming from pv and mbuffer: what they typed there, and what to type here.
pub const FROM_PV_AND_MBUFFER: &[[&str; 4]] = &[
    ["cap the output's rate", "`-L 10M`", "`-R 10M`", "`-r 10M`"],
    ["cap the input's rate", "", "`-r 10M`", "`--input-rate 10M`"],
    ["lift a cap", "`-L 0`", "", "`-r 0`"],
    ["change a running one's cap", "`pv -R PID -L 5M`", "", "`accel -R PID -r 5M`"],
    ["the buffer's size", "`-B 1G` (it does not decouple)", "`-m 1G`", "`-m 1G`"],
    ["the size to expect (percent, ETA)", "`-s SIZE`", "", "`--expect SIZE`"],
    [
        "blocks of exactly N bytes (tapes)",
        "",
        "`-s 128k`",
        "`--block-size 128K` (`--pad` fills the last)",
    ],
    ["start writing once this full", "", "`-P 90`", "`--start-at 90%`"],
    ["resume reading once this empty", "", "`-p 20`", "`--resume-at 20%`"],
    ["give up when nothing moves", "", "`-W 60`", "`--stall-timeout 60s`"],
    [
        "receive over the network",
        "",
        "`-I 9090`",
        "`--from :9090 --key-file K` (`--insecure` to take a real mbuffer's stream)",
    ],
    [
        "send over the network",
        "",
        "`-O host:9090`",
        "`--to host:9090 --key-file K` (`--insecure` to send to a real mbuffer)",
    ],
    ["beyond memory, onto disk", "", "`-T FILE` (the whole buffer on disk)", "`--spill DIR`"],
    ["read files", "`pv FILE...`", "`-i FILE`", "`FILE...`, `-i FILE`"],
    ["write files", "`-o FILE`", "`-o FILE`", "`-o FILE`"],
    ["write several outputs", "", "`-o A -o B`", "`-o A -o B`"],
    ["hash the stream", "", "`-H` (MD5)", "`--hash md5` (or sha256, blake3, ...)"],
    ["name it in the display", "`-N NAME`", "", "`-N NAME`"],
    ["numbers for scripts", "`-n`", "", "`-n`, or `--json` for every counter"],
    ["update the display every N seconds", "`-i 5`", "", "`--interval 5s`"],
    ["nothing on stderr", "`-q`", "`-q`", "`-q`"],
    ["a report at the end", "", "(always, without `-q`)", "`-v`; on a terminal a verdict anyway"],
];

/// What accel shows while it runs and at the end, paragraph by paragraph.
const PROGRESS: &[&str] = &[
    "On a terminal, in the foreground (or anywhere with `-p`), one line is redrawn twice a \
     second: the input (bytes, rate), the buffer's fill (`buf 42%`), the output (bytes, rate; \
     with several outputs, the one furthest behind, named), the time so far, and, when the \
     size is known (`--expect`, or regular files as input), a bar, the percent done and the ETA, \
     as in `[====>     ]  39% ETA 0:00:01`. A side that has moved nothing for 2 s shows a rate \
     of 0, and when neither has, the line says for how long (`stalled 0:00:15`), or, with a \
     network peer, that a connection is down (`reconnecting (3rd try, 0:00:12)`, `waiting for \
     the sender (0:00:12)`). When the terminal is narrow, the percent done (or the bytes out) \
     are kept longest, then what is unusual: bytes spilled to disk, rate caps.",
    "At the end the last line is left standing, with the final counts and average rates, and \
     one line of verdict under it: `bottleneck: consumer` when the buffer was full (the \
     producer held back) for a tenth of the run or more and longer than it was empty, \
     `bottleneck: producer` in the opposite case, `no bottleneck` when neither side waited \
     long on the other; when the consumer went away (accel ends by SIGPIPE), whose reader it was \
     and what it did not get. A count of bytes in a message is exact, and from 1 KiB on led by \
     its size: `700 bytes`, `406 MiB (425197568 bytes)`. With `-v`, the full report instead: bytes and rates, how long each \
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
    [
        "`/etc/mbuffer.rc`, `~/.mbuffer.rc`",
        "mbuffer's defaults files, read when accel runs as `mbuffer` (see AS MBUFFER)",
    ],
];

/// Running as `mbuffer`.
const AS_MBUFFER: &str = "Started under the name `mbuffer` (`ln -s \"$(command -v accel)\" \
     /usr/local/bin/mbuffer`), accel reads mbuffer's command line instead of its own, as the \
     backup tools (syncoid, zfs_autobackup, btrbk, znapzend, pyznap) write it; `mbuffer -h` \
     then lists every option of mbuffer's with what accel does for it, or why it is refused. \
     It ends as mbuffer does: status 0 when every byte was delivered, 1 for any failure, a \
     consumer that went away included (SIGINT, SIGTERM and SIGHUP still end it by that \
     signal); with `-q`, nothing on stderr when all went well. \
     `-I` and `-O` are plain TCP, as mbuffer's, or accel's encrypted transport when \
     ACCEL_KEY_FILE names a key at both ends. `-s` makes every write exactly that size only \
     where it can be seen (a tape or other character device, a packet-mode pipe); into pipes, \
     files and sockets accel forwards partial data at once.";

/// Running as `pv`; then [`pv::DIFFERENCES`](crate::cli::pv::DIFFERENCES), one by one.
const AS_PV: &str = "Started under the name `pv` (`ln -s \"$(command -v accel)\" \
     /usr/local/bin/pv`), accel reads pv's command line instead of its own: its display \
     switches (`-p -t -e -r -a -b -T`, `-F FORMAT`) choose the parts of accel's line, `-n` \
     writes numbers for `dialog --gauge`, `-s SIZE`, `-L RATE`, `-B SIZE`, `-N NAME`, `-W`, \
     `-D SEC`, `-i SEC`, `-l`, `-f`, `-S`, `-R PID` do what pv's do, and FILE operands are \
     read in turn; `pv -h` lists every option of pv's with what accel does for it (some with \
     a difference said once at the start), or why it is refused (`-E`, `-U`, `-d`, `-P`). It \
     differs from pv on purpose:";

/// Writes the whole man page for `command` (accel's clap definition) to `out`.
pub fn write(command: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    synopsis(&command, out)?;
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
        "backup$ accel \\-\\-from :9090 \\-\\-key\\-file ~/.config/accel.key | zfs receive tank/fs",
        "here$ zfs send pool/fs@snap | accel \\-\\-to backup:9090 \\-\\-key\\-file ~/.config/accel.key",
        "here$ tar c dir | accel \\-\\-to 192.0.2.7:9090 \\-\\-insecure    # into a real mbuffer \\-I 9090",
    ] {
        writeln!(out, ".PP\n.nf\n{example}\n.fi")?;
    }
    section(out, "COMING FROM PV AND MBUFFER")?;
    for [what, pv, mbuffer, accel] in FROM_PV_AND_MBUFFER {
        let was = |tool: &str, typed: &str| {
            if typed.is_empty() { String::new() } else { format!("{tool} {typed}; ") }
        };
        let said = format!("{}{}accel {accel}", was("pv", pv), was("mbuffer", mbuffer));
        writeln!(out, ".TP\n{}\n{}", roff(what), roff(&said))?;
    }
    section(out, "AS MBUFFER")?;
    writeln!(out, ".PP\n{}", roff(AS_MBUFFER))?;
    section(out, "AS PV")?;
    writeln!(out, ".PP\n{}", roff(AS_PV))?;
    for difference in crate::cli::pv::DIFFERENCES {
        writeln!(out, ".IP \\(bu 2\n{}", roff(difference))?;
    }
    section(out, "FILES")?;
    table(out, FILES)?;
    section(out, "SEE ALSO")?;
    writeln!(out, "pv(1), mbuffer(1), tee(1), dd(1), dialog(1)")?;
    man.render_version_section(out)
}

/// The forms accel is used in, then every option with its value's placeholder
/// (`[-m SIZE]`), which clap_mangen's own synopsis leaves out.
fn synopsis(command: &clap::Command, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, ".SH SYNOPSIS")?;
    for form in [
        "accel [OPTIONS] [-o FILE]... [FILE]...",
        "accel --to HOST:PORT --key-file FILE [OPTIONS]",
        "accel --from [ADDR:]PORT --key-file FILE [OPTIONS]",
        "accel -R PID [-r RATE] [--input-rate RATE]",
        "accel --generate man|bash|zsh|fish; accel --generate key FILE",
    ] {
        writeln!(out, ".br\n{}", roff(form))?;
    }
    let mut options = Vec::new();
    for arg in command.get_arguments().filter(|arg| !arg.is_hide_set()) {
        let names: Vec<String> = arg
            .get_short()
            .map(|short| format!("-{short}"))
            .into_iter()
            .chain(arg.get_long().map(|long| format!("--{long}")))
            .collect();
        let value = match arg.get_value_names() {
            Some(values) if arg.get_action().takes_values() => {
                let value = values.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(" ");
                if arg.get_num_args().is_some_and(|n| n.min_values() == 0) {
                    format!("[={value}]")
                } else {
                    format!(" {value}")
                }
            }
            _ => String::new(),
        };
        options.push(format!("[{}{value}]", names.join("|")));
    }
    writeln!(out, ".PP\n{}", roff(&options.join(" ")))
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
            "COMING FROM PV AND MBUFFER",
            "AS MBUFFER",
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
        let readme = include_str!("../../README.md");
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

    /// The README lists the deliberate differences of accel run as pv, as `pv -h` and the
    /// page do.
    #[test]
    fn the_readme_lists_the_differences_from_pv() {
        let readme =
            include_str!("../../README.md").split_whitespace().collect::<Vec<_>>().join(" ");
        for difference in crate::cli::pv::DIFFERENCES {
            let bullet = format!("- {difference}");
            assert!(readme.contains(&bullet), "the README lacks: {bullet}");
        }
    }

    /// The README says what the man page says.
    #[test]
    fn the_readme_repeats_the_tables() {
        assert_eq!(readme_table("| field | in | meaning |"), rows(JSON_FIELDS));
        assert_eq!(readme_table("| signal | what accel does |"), rows(SIGNALS));
        assert_eq!(readme_table("| status | meaning |"), rows(EXIT_STATUSES));
        assert_eq!(
            readme_table("| you want to | in pv | in mbuffer | in accel |"),
            rows(FROM_PV_AND_MBUFFER)
        );
    }
}
