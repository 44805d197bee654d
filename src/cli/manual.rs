//! The man page, which is accel's reference: clap's sections (name, synopsis, options, from
//! the `--help` text in `cli/mod.rs`) and accel's own (values, progress and report, the JSON
//! fields, signals, exit statuses, examples, pv and mbuffer, files), so that `man accel` is
//! complete on its own.
//!
//! Everything here is written once, in Markdown-ish text (a `code` span becomes bold in roff),
//! and rendered two ways from the same [`SECTIONS`]: as roff (`accel --generate man`) and as
//! Markdown (`accel --generate markdown`, hidden), which the repository keeps as `doc/accel.md`
//! for readers on the web; a test fails when that file is stale. The README and the guide link
//! to the page rather than repeat it.

use std::io::{self, Write};

/// `--json`'s fields: name(s), in which events, meaning.
pub const JSON_FIELDS: &[[&str; 3]] = &[
    [
        "`event`",
        "all",
        "`\"progress\"` or `\"summary\"`; with an `ssh://` peer, `\"remote\"` after the summary",
    ],
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
        "`outputs[].wire`",
        "summary",
        "a `--to` output's frames on the wire (`null` for others): `bytes` they took (sealed and \
         framed), `stream_bytes` they carried, `ratio` (stream bytes per byte on the wire), \
         `frames`, `stored_frames` (sent as they were while compressing: they would not shrink, \
         or were not tried), `compressing` (`--compress` is not `none`), `level` (zstd's level \
         now; `null`: frames as they are) and `levels` (each level used, `null` for storing, \
         with its `seconds`). Over several connections (`--streams`), each compresses at its \
         own level: the counts add up, `level` is the one most connections are at now, and \
         each level's `seconds` are the connections' average",
    ],
    [
        "`input_reconnections`, `input_longest_outage_s`, `input_outage_s`",
        "summary",
        "the same for a `--from` input (0 otherwise)",
    ],
    [
        "`outputs[].streams`, `input_streams`",
        "summary",
        "a stream over several connections (`--streams`; `null` otherwise): each connection's \
         stream `bytes` carried, `reconnections` after a drop, `resent_bytes` (what it had \
         taken that went again on the others), and `level` (a `--to` that compresses: the \
         level its frames are compressed at now; `null` otherwise)",
    ],
    [
        "`input_wire`",
        "summary",
        "a `--from` input's frames as they came off the wire (`null` for others), with the \
         fields of `outputs[].wire`: `compressing` says a frame came compressed, \
         `stored_frames` counts the frames that came as they were, and `level` is `null` and \
         `levels` empty (the receiver knows no level). Its `bytes` and `stream_bytes` are the \
         sender's unless a connection dropped: frames lost with it count only at the sender, \
         and frames of a batch cut short only here",
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
    [
        "`peak_reorder_bytes`",
        "summary",
        "`--from` over several connections: the most its reorder map held at once (frames \
         that came before their turn); `memory_bytes` and `peak_memory_bytes` count it with \
         the buffer, and the two together stay within `-m`",
    ],
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
    [
        "`host`, `command`, `path`",
        "remote",
        "the `ssh://` peer's host, the remote command, and where the stream went: `\"direct\"` \
         or `\"ssh\"` (through the session)",
    ],
    [
        "`seconds`, `status`, `signal`, `stopped`",
        "remote",
        "how long the remote command ran, its exit status or signal number, and whether the \
         remote accel stopped it (the run failed or was stopped); all `null` when the ssh \
         session ended before the remote accel said",
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
         the wrong key, the port in use, or no sender within `--accept-timeout`; with \
         `ssh://`, ssh failed, no accel on the remote PATH, an accel there that does not speak \
         this protocol, or `--via direct` and the direct path closed; nothing was read. Apart \
         from 2 and 5 because a script may well retry it. With `ssh://`, a remote command that \
         failed on its own makes accel end with the command's status instead, as ssh does \
         (after `accel: HOST: CMD: exited with status N`; 128+N for a signal).",
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
     and what it did not get. With `-v`, the full report instead: bytes and rates, how long each \
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
     ACCEL_KEY_FILE names a key at both ends; their connections ask for BBR where the kernel \
     offers it, as accel's own do (see --congestion), which mbuffer's command line cannot \
     change. `-s` makes every write exactly that size only \
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

/// What a SIZE, a RATE and a DURATION may be, and the rules of the command line.
const VALUES: &[&str] = &[
    "A SIZE is a number of bytes with an optional binary suffix `K`, `M`, `G`, `T`, `P` or `E` \
     (also `KiB`, `MB`, ...; 1K = 1024): `512K`, `32M`, `1.5G`, `2GiB`; `32M` is 32 MiB, as in \
     mbuffer and pv. `-m` also takes a share of the machine's memory, `2%`, as mbuffer's `-m`, \
     and `--start-at` and `--resume-at` a share of `-m`, `90%`. The buffer holds at least a \
     page (4 KiB), the least accel moves at once; a size above what accel may have is held to \
     that, with one warning: `-m 100T` on a machine of 23 GiB runs.",
    "A RATE is a SIZE per second: `10M` is 10 MiB/s; `0` or `none` is no limit, as pv's `-L 0`.",
    "A DURATION is a number with an optional unit `ms`, `s`, `m` or `h`, seconds if none: \
     `250ms`, `30s`, `5m`, `1.5h`; at most 100 years.",
    "Given twice, an option's last value counts (`-m 1M -m 2M` is `-m 2M`), so that a shell \
     alias can be overridden. An option's value is the next argument even when it starts with \
     `-`, as with getopt: `-m -5` is a bad size for `-m`. `--json` and `--output-error` take \
     their value only after `=`: `--json out.json` is refused with that hint.",
];

/// After the SIGNALS table.
const SIGNALS_SAID: &str = "accel does not catch SIGTSTP, so an orphaned job is never stopped \
     for good. Stopped by a signal, it says what was lost, e.g. `accel: stopped by SIGINT; 100 \
     MiB (104857600 bytes) delivered, 32 MiB (33554432 bytes) read but not delivered`.";

/// After the EXIT STATUS table: how errors are said.
const ERRORS_SAID: &str = "Errors are one line on stderr, `accel: <what>: <why>`, the command \
     line's too (status 2). A count of bytes in a message is exact, and from 1 KiB on led by its \
     size: `700 bytes`, `406 MiB (425197568 bytes)`. For instance:";

/// Errors as accel says them.
const ERRORS: &[&str] = &[
    "accel: write to stdout: No space left on device; 0 bytes delivered, 344 KiB (352256 bytes) \
     read but not delivered",
    "accel: -m 3Q: not a size: expected a number of bytes with an optional binary suffix K, M, \
     G, T, P or E (also KiB, MB, ...; 1K = 1024), e.g. 512K, 32M, 1.5G",
    "accel: --json out.json: the value of --json goes after '=': --json=out.json (--json alone \
     takes none)",
    "accel: --engine foo: not a value it takes: expected auto, splice or copy",
    "accel: --debg: unknown option; did you mean --debug?",
];

/// Command lines worth copying.
const EXAMPLES: &[&str] = &[
    "bzip2 -dc big.tar.bz2 | accel | gzip -9 > big.tar.gz",
    "zfs send pool/fs@snap | accel -m 1G | ssh backup zfs receive tank/fs",
    "xz -dc a.xz | accel -N unxz | gzip | accel -N gzip > a.gz",
    "accel -i disk.img -o /dev/sdX -o copy.img --hash sha256 -v",
    "zfs send pool/fs@snap | accel --to ssh://backup -- zfs receive -s tank/fs",
    "accel --from ssh://root@source:2222 -- zfs send pool/fs@snap | zfs receive tank/fs",
    "backup$ accel --from :9090 --key-file ~/.config/accel.key | zfs receive tank/fs",
    "here$ zfs send pool/fs@snap | accel --to backup:9090 --key-file ~/.config/accel.key",
    "here$ tar c dir | accel --to 192.0.2.7:9090 --insecure    # into a real mbuffer -I 9090",
];

/// After the table of what to type instead: why two rows differ, and what accel says to the
/// habits of pv's and mbuffer's hands.
const HABITS: &[&str] = &[
    "Two differences on purpose: pv's `-B` only enlarges pv's own reads and writes, so pv and \
     its neighbours still take turns, where accel's `-m` decouples them; and mbuffer's `-s` is \
     always its block size, holding partial blocks back, where accel forwards partial data at \
     once and writes exact blocks only when asked (`--block-size`).",
    "Where pv and mbuffer disagree, accel follows mbuffer for what it shares with both (`-i`, \
     `-o`, `-f`, `-m`) and takes pv's spelling only where mbuffer's would not run silently: \
     mbuffer's `-n 2` or `-v 3` is refused with a line saying what accel's flag does, and `-c` \
     (mbuffer: synchronous writes; pv: cursor mode) is not an option here: the message points \
     to `--sync`, and accels share a terminal without it. Nor is `-s`, which pv takes for the \
     expected size and mbuffer for the block size: the message names `--expect` and \
     `--block-size`, so that neither habit silently means the other. pv's `-f` (progress even \
     when stderr is not a terminal) is `--progress-fd 2` here: accel's `-f` is mbuffer's, \
     overwrite. Other habits get a hint too: `-I 9090` and `-O host:9090` name `--from 9090` \
     and `--to host:9090` (with `--insecure` for a real mbuffer), `-R 10M` says that `-R` takes \
     a PID here and a rate is `-r` or `--input-rate`, pv's `-L 10M` names `-r 10M`; and `-m 2%` \
     works. pv's display switches (`-pterb`, `-t`), its `-C`, `-E`, `-S`, `-W` and the others \
     accel lacks are refused with the nearest accel option named. A tool that writes mbuffer's \
     command line gets accel run as `mbuffer`, one that writes pv's, accel run as `pv` (below).",
];

/// A piece of a section of accel's own, rendered as roff or as Markdown.
enum Part {
    /// Paragraphs of text.
    Text(&'static [&'static str]),
    /// Rows of a table: a term (bold in roff) and what it means, under these headings.
    Terms([&'static str; 2], &'static [[&'static str; 2]]),
    /// The JSON fields: name(s), in which events, meaning.
    Fields(&'static [[&'static str; 3]]),
    /// What to type in pv, in mbuffer and in accel.
    Instead(&'static [[&'static str; 4]]),
    /// A bulleted list.
    Bullets(&'static [&'static str]),
    /// Lines shown as typed.
    Lines(&'static [&'static str]),
}

/// accel's own sections, after clap's options: a title (upper case in roff) and its parts.
const SECTIONS: &[(&str, &[Part])] = &[
    ("Sizes, rates and durations", &[Part::Text(VALUES)]),
    ("Progress and report", &[Part::Text(PROGRESS)]),
    ("JSON fields", &[Part::Fields(JSON_FIELDS)]),
    (
        "Signals",
        &[Part::Terms(["signal", "what accel does"], SIGNALS), Part::Text(&[SIGNALS_SAID])],
    ),
    (
        "Exit status",
        &[
            Part::Terms(["status", "meaning"], EXIT_STATUSES),
            Part::Text(&[ERRORS_SAID]),
            Part::Lines(ERRORS),
        ],
    ),
    ("Examples", &[Part::Lines(EXAMPLES)]),
    (
        "Coming from pv and mbuffer",
        &[
            Part::Text(&[
                "What you typed in pv or mbuffer, and what to type in accel; a tool that has no \
                 such thing is left out.",
            ]),
            Part::Instead(FROM_PV_AND_MBUFFER),
            Part::Text(HABITS),
        ],
    ),
    ("As mbuffer", &[Part::Text(&[AS_MBUFFER])]),
    ("As pv", &[Part::Text(&[AS_PV]), Part::Bullets(crate::cli::pv::DIFFERENCES)]),
    ("Files", &[Part::Terms(["file", "what it is"], FILES)]),
];

/// The forms accel is used in; the roff synopsis adds every option.
const FORMS: &[&str] = &[
    "accel [OPTIONS] [-o FILE]... [FILE]...",
    "accel --to ssh://[USER@]HOST[:PORT] [OPTIONS] -- CMD...",
    "accel --from ssh://[USER@]HOST[:PORT] [OPTIONS] -- CMD...",
    "accel --to HOST:PORT --key-file FILE [OPTIONS]",
    "accel --from [ADDR:]PORT --key-file FILE [OPTIONS]",
    "accel -R PID [-r RATE] [--input-rate RATE]",
    "accel --generate man|bash|zsh|fish; accel --generate key FILE",
];

const SEE_ALSO: &str = "pv(1), mbuffer(1), tee(1), dd(1), dialog(1)";

/// Writes the whole man page for `command` (accel's clap definition) to `out`, as roff.
pub fn write(command: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    let man = clap_mangen::Man::new(command.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    synopsis(&command, out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    for (title, parts) in SECTIONS {
        writeln!(out, ".SH \"{}\"", title.to_uppercase())?;
        for part in *parts {
            roff_part(part, out)?;
        }
    }
    writeln!(out, ".SH \"SEE ALSO\"\n{SEE_ALSO}")?;
    man.render_version_section(out)
}

fn roff_part(part: &Part, out: &mut dyn Write) -> io::Result<()> {
    match part {
        Part::Text(paragraphs) => {
            for paragraph in *paragraphs {
                writeln!(out, ".PP\n{}", roff(paragraph))?;
            }
        }
        Part::Terms(_, rows) => {
            for [key, meaning] in *rows {
                writeln!(out, ".TP\n{}\n{}", roff(&code(key)), roff(meaning))?;
            }
        }
        Part::Fields(rows) => {
            for [field, event, meaning] in *rows {
                writeln!(out, ".TP\n{} ({event})\n{}", roff(field), roff(meaning))?;
            }
        }
        Part::Instead(rows) => {
            for [what, pv, mbuffer, accel] in *rows {
                let was = |tool: &str, typed: &str| {
                    if typed.is_empty() { String::new() } else { format!("{tool} {typed}; ") }
                };
                let said = format!("{}{}accel {accel}", was("pv", pv), was("mbuffer", mbuffer));
                writeln!(out, ".TP\n{}\n{}", roff(what), roff(&said))?;
            }
        }
        Part::Bullets(items) => {
            for item in *items {
                writeln!(out, ".IP \\(bu 2\n{}", roff(item))?;
            }
        }
        Part::Lines(lines) => {
            for line in *lines {
                writeln!(out, ".PP\n.nf\n{}\n.fi", roff_plain(line))?;
            }
        }
    }
    Ok(())
}

/// The forms accel is used in, then every option with its value's placeholder
/// (`[-m SIZE]`), which clap_mangen's own synopsis leaves out.
fn synopsis(command: &clap::Command, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, ".SH SYNOPSIS")?;
    for form in FORMS {
        writeln!(out, ".br\n{}", roff(form))?;
    }
    let options: Vec<String> = command
        .get_arguments()
        .filter(|arg| !arg.is_hide_set())
        .map(|arg| format!("[{}]", usage(arg, "|")))
        .collect();
    writeln!(out, ".PP\n{}", roff(&options.join(" ")))
}

/// An argument as typed: its names joined by `between`, and its value's placeholder
/// (`-m|--size SIZE`, `--json[=FILE]`, ` FILE` for an operand).
fn usage(arg: &clap::Arg, between: &str) -> String {
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
    format!("{}{value}", names.join(between))
}

/// Writes the same page as Markdown, for readers of the repository (`doc/accel.md`): the
/// options from clap's definition, grouped by their help headings as `--help` shows them,
/// then accel's own sections.
pub fn markdown(mut command: clap::Command, out: &mut dyn Write) -> io::Result<()> {
    command.build();
    writeln!(
        out,
        "<!-- Written by `accel --generate markdown`, from the same text as `man accel`; do not \
         edit: change src/cli/ and run `cargo run -q -- --generate markdown > doc/accel.md`. -->"
    )?;
    writeln!(out, "\n# accel(1)\n")?;
    if let Some(about) = command.get_about() {
        writeln!(out, "{}\n", about.to_string().trim())?;
    }
    writeln!(out, "## Synopsis\n\n```\n{}\n```\n", FORMS.join("\n"))?;
    writeln!(out, "## Options\n")?;
    let shown: Vec<&clap::Arg> = command.get_arguments().filter(|arg| !arg.is_hide_set()).collect();
    let mut headings: Vec<Option<&str>> = vec![None];
    for arg in &shown {
        if !headings.contains(&arg.get_help_heading()) {
            headings.push(arg.get_help_heading());
        }
    }
    for heading in headings {
        if let Some(heading) = heading {
            writeln!(out, "### {heading}\n")?;
        }
        let (operands, options): (Vec<&clap::Arg>, Vec<&clap::Arg>) = shown
            .iter()
            .filter(|arg| arg.get_help_heading() == heading)
            .partition(|arg| arg.is_positional());
        for arg in options.into_iter().chain(operands) {
            markdown_option(arg, out)?;
        }
    }
    for (title, parts) in SECTIONS {
        writeln!(out, "## {title}\n")?;
        for part in *parts {
            markdown_part(part, out)?;
        }
    }
    writeln!(out, "## See also\n\n{SEE_ALSO}")
}

/// One option: its usage as a heading, its long help, its values and its default.
fn markdown_option(arg: &clap::Arg, out: &mut dyn Write) -> io::Result<()> {
    let typed = if arg.is_positional() {
        let name = arg.get_value_names().and_then(|names| names.first()).map(|n| n.as_str());
        format!("{}...", name.unwrap_or(arg.get_id().as_str()))
    } else {
        usage(arg, "`, `")
    };
    writeln!(out, "#### `{typed}`\n")?;
    if let Some(help) = arg.get_long_help().or(arg.get_help()) {
        for paragraph in help.to_string().split("\n\n") {
            writeln!(out, "{}\n", paragraph.trim())?;
        }
    }
    let values: Vec<_> =
        arg.get_possible_values().into_iter().filter(|value| !value.is_hide_set()).collect();
    if !arg.is_positional() && arg.get_action().takes_values() && !values.is_empty() {
        for value in &values {
            let help = value.get_help().map(|help| format!(": {help}")).unwrap_or_default();
            writeln!(out, "- `{}`{help}", value.get_name())?;
        }
        writeln!(out)?;
    }
    let defaults: Vec<_> = arg.get_default_values().iter().map(|v| v.to_string_lossy()).collect();
    if arg.get_action().takes_values() && !defaults.is_empty() {
        writeln!(out, "Default: `{}`.\n", defaults.join(" "))?;
    }
    Ok(())
}

fn markdown_part(part: &Part, out: &mut dyn Write) -> io::Result<()> {
    match part {
        Part::Text(paragraphs) => {
            for paragraph in *paragraphs {
                writeln!(out, "{paragraph}\n")?;
            }
        }
        Part::Terms(heads, rows) => markdown_table(heads, rows, out)?,
        Part::Fields(rows) => markdown_table(&["field", "in", "meaning"], rows, out)?,
        Part::Instead(rows) => {
            markdown_table(&["you want to", "in pv", "in mbuffer", "in accel"], rows, out)?
        }
        Part::Bullets(items) => {
            for item in *items {
                writeln!(out, "- {item}")?;
            }
            writeln!(out)?;
        }
        Part::Lines(lines) => writeln!(out, "```\n{}\n```\n", lines.join("\n"))?,
    }
    Ok(())
}

fn markdown_table<const N: usize>(
    heads: &[&str; N],
    rows: &[[&str; N]],
    out: &mut dyn Write,
) -> io::Result<()> {
    writeln!(out, "| {} |", heads.join(" | "))?;
    writeln!(out, "|{}", "---|".repeat(heads.len()))?;
    for row in rows {
        let cells: Vec<String> = row.iter().map(|cell| cell.replace('|', "\\|")).collect();
        writeln!(out, "| {} |", cells.join(" | "))?;
    }
    writeln!(out)
}

/// `key` as code, unless it is already: a roff tag is bold either way.
fn code(key: &str) -> String {
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

/// A line shown as typed, as roff: escaped, with no code spans.
fn roff_plain(line: &str) -> String {
    let escaped = line.replace('\\', "\\e").replace('-', "\\-");
    if escaped.starts_with(['.', '\'']) { format!("\\&{escaped}") } else { escaped }
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

    fn page_as_markdown() -> String {
        let mut out = Vec::new();
        markdown(crate::cli::Cli::command(), &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_page_is_complete_on_its_own() {
        let page = page();
        for heading in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH OPTIONS",
            "SIZES, RATES AND DURATIONS",
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
        assert_eq!(roff_plain("x -dc `y`"), "x \\-dc `y`");
    }

    /// The deliberate differences of accel run as pv are listed where a reader of the
    /// reference looks for them, in both forms of the page (and `pv -h` lists them too).
    #[test]
    fn the_page_lists_the_differences_from_pv() {
        let (page, markdown) = (page(), page_as_markdown());
        for difference in crate::cli::pv::DIFFERENCES {
            assert!(page.contains(&format!(".IP \\(bu 2\n{}\n", roff(difference))), "{difference}");
            assert!(markdown.contains(&format!("\n- {difference}\n")), "{difference}");
        }
    }

    /// The Markdown page has every option `--help` shows, under a heading of its own, and
    /// every section of the roff page.
    #[test]
    fn the_markdown_page_has_every_option_and_section() {
        let markdown = page_as_markdown();
        let mut command = crate::cli::Cli::command();
        command.build();
        for arg in command.get_arguments().filter(|arg| !arg.is_hide_set()) {
            let operand = arg.get_value_names().and_then(|names| names.first()).map(|n| n.as_str());
            let name = match arg.get_long() {
                Some(long) => format!("`--{long}"),
                None => format!("`{}...`", operand.unwrap()),
            };
            let heading =
                markdown.lines().find(|line| line.starts_with("#### ") && line.contains(&name));
            assert!(heading.is_some(), "no heading for {name}");
        }
        for (title, _) in SECTIONS {
            assert!(markdown.contains(&format!("\n## {title}\n")), "{title}");
            assert!(page().contains(&format!(".SH \"{}\"", title.to_uppercase())), "{title}");
        }
        assert!(!markdown.contains("README"), "the page does not send readers elsewhere");
    }

    /// Every row of every Markdown table has as many cells as its heading: a `|` inside a cell
    /// is escaped, or the table falls apart on the web.
    #[test]
    fn the_markdown_tables_hold_together() {
        let markdown = page_as_markdown();
        let cells = |line: &str| line.replace("\\|", "").matches('|').count();
        let mut tables = 0;
        let mut lines = markdown.lines().peekable();
        while let Some(line) = lines.next() {
            if !line.starts_with('|') {
                continue;
            }
            tables += 1;
            let width = cells(line);
            while let Some(row) = lines.next_if(|row| row.starts_with('|')) {
                assert_eq!(cells(row), width, "{row}");
            }
        }
        assert_eq!(tables, 5, "JSON fields, signals, exit statuses, pv and mbuffer, files");
    }
}
