//! A terminal shared by several accels: each draws its line on a row of its own.
//!
//! `producer | accel -N a | gzip | accel -N b > out` has two accels drawing on one terminal.
//! Each alone redraws its line in place with `\r`; two would redraw over each other on the same
//! row and wrap into a mess. So the accels that draw on one terminal keep a *board*: a small
//! file per terminal and user, locked with `flock`, that holds each drawing accel's current
//! line and how many rows the block of lines takes on the screen. Whoever draws redraws the
//! whole block in place: up to its first row, then every line, each cleared to its end. The
//! cursor is left at the end of the block's last row, where a lone accel's `\r` line leaves
//! it, so a lone accel draws exactly what it drew before boards existed.
//!
//! An accel that ends takes the terminal until it exits ([`Board::leave`]): it clears the
//! block, writes its final line where the block began, keeps the lock (the kernel releases it
//! when the process exits) and tells the others the block is gone. Its errors, verdict and
//! report then go under its final line with no other accel drawing through them, and the
//! others start a new block under all that. A message along the way (a warning) is written
//! above the block, which is redrawn under it ([`Board::say`]).
//!
//! Like pv's cursor mode, this assumes nothing else writes to the terminal while a block is
//! up. After a stop (Ctrl-Z, then `fg`) the shell has written there: the first accel to draw
//! after a SIGCONT starts a new block. The only state is the file, checked each time: a line
//! whose accel has died is dropped, so nothing left behind misleads the next run. Where the
//! board cannot be had (no writable directory), an accel draws alone, as before.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::{Duration, Instant};

use rustix::fs::FlockOperation;

/// How long an accel waits for another to finish drawing before it skips a redraw (a message,
/// or the final line, is then written without the board). Drawing takes microseconds; only a
/// terminal stopped with Ctrl-S, or an accel that is ending, holds the lock longer.
const PATIENCE: Duration = Duration::from_millis(200);

/// Moves the cursor to the start of the row `up` rows above; `\r` alone for none.
fn up(rows: usize) -> String {
    if rows == 0 { "\r".to_owned() } else { format!("\r\x1b[{rows}A") }
}

/// What the board file says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct State {
    /// Rows the block takes on the screen now; the cursor is at the end of the last one.
    rows: usize,
    /// The monotonic clock, in ns, when the block was last started anew after a SIGCONT.
    renewed: u64,
    /// Each drawing accel's pid and current line, in the order they joined.
    lines: Vec<(i32, String)>,
}

impl State {
    fn parse(text: &str) -> State {
        let mut state = State::default();
        for line in text.lines() {
            let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
            match key {
                "rows" => state.rows = rest.parse().unwrap_or(0),
                "renewed" => state.renewed = rest.parse().unwrap_or(0),
                pid => {
                    if let Ok(pid) = pid.parse() {
                        state.lines.push((pid, rest.to_owned()));
                    }
                }
            }
        }
        state
    }

    fn text(&self) -> String {
        let mut text = format!("rows {}\nrenewed {}\n", self.rows, self.renewed);
        for (pid, line) in &self.lines {
            text += &format!("{pid} {line}\n");
        }
        text
    }

    /// Sets `pid`'s line, joining the block if it is not there yet.
    fn set(&mut self, pid: i32, line: &str) {
        match self.lines.iter_mut().find(|(owner, _)| *owner == pid) {
            Some((_, text)) => *text = line.to_owned(),
            None => self.lines.push((pid, line.to_owned())),
        }
    }

    /// Redraws the block in place, at most `height` rows of it (the last ones), with
    /// `above` (whole lines, each ending in `\n`) written first, above the block; the bytes to
    /// write, which leave the cursor at the end of the block's last row.
    fn redraw(&mut self, above: &str, height: usize) -> String {
        let shown = &self.lines[self.lines.len().saturating_sub(height.max(1))..];
        let mut out = up(self.rows.saturating_sub(1));
        if !above.is_empty() {
            out += "\x1b[J";
            out += above;
        }
        for (at, (_, line)) in shown.iter().enumerate() {
            if at > 0 {
                out.push('\n');
            }
            out += line;
            out += "\x1b[K";
        }
        if shown.len() < self.rows && above.is_empty() {
            // The block shrank: rows of it below the cursor would be left behind.
            out += "\x1b[J";
        }
        self.rows = shown.len();
        out
    }
}

/// This accel's place on the board of the terminal it draws on.
#[derive(Debug)]
pub struct Board {
    file: File,
    pid: i32,
}

impl Board {
    /// Joins the board of `terminal`, or `None` where there can be none (the error is not
    /// worth a word: the line is then drawn alone).
    pub fn join(terminal: BorrowedFd<'_>) -> Option<Board> {
        let device = rustix::fs::fstat(terminal).ok()?.st_rdev;
        let path = crate::watch::control::private_directory().ok()?.join(format!("tty-{device:x}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .ok()?;
        let pid = rustix::process::getpid().as_raw_nonzero().get();
        Some(Board { file, pid })
    }

    /// Draws `line` as this accel's row, with the others' rows, into `out`. `height` is the
    /// terminal's; `continued` is when this accel last got a SIGCONT, if it has not drawn
    /// since. Nothing is drawn if another accel holds the terminal for long.
    pub fn draw(
        &mut self,
        out: &mut dyn Write,
        line: &str,
        height: usize,
        continued: Option<u64>,
    ) -> io::Result<()> {
        self.update(out, PATIENCE, Release::Now, |state, pid| {
            if continued.is_some_and(|at| at > state.renewed) {
                // The shell wrote while we were stopped: the old block is history now.
                state.rows = 0;
                state.renewed = monotonic_ns();
            }
            state.set(pid, line);
            state.redraw("", height)
        })
    }

    /// Writes `message` (whole lines) above the block, and the block again under it.
    pub fn say(&mut self, out: &mut dyn Write, message: &str, height: usize) -> io::Result<()> {
        self.update(out, PATIENCE, Release::Now, |state, _| state.redraw(message, height))
    }

    /// Ends this accel's part: the block is cleared and `last` (this accel's final line) is
    /// written where it began, then a newline; the board is kept locked until this process
    /// exits, so that what it writes next (errors, verdict, report) is not drawn over. The
    /// others start a new block after that.
    pub fn leave(mut self, out: &mut dyn Write, last: &str) -> io::Result<()> {
        let pid = self.pid;
        let left = self.update(out, PATIENCE, Release::AtExit, |state, _| {
            let mut text = up(state.rows.saturating_sub(1));
            text += "\x1b[J";
            text += last;
            text += "\x1b[K\n";
            state.lines.retain(|(owner, _)| *owner != pid);
            state.rows = 0;
            text
        });
        // Held until exit: the descriptor, and with it the lock, goes when the process does.
        std::mem::forget(self.file);
        left
    }

    /// Under the lock: reads the board, drops the lines of accels that have died, lets
    /// `change` update it and say what to write, writes that to `out` and the board back;
    /// then lets the lock go, or keeps it as `release` says. Gives up, writing nothing, after
    /// `patience` without the lock.
    fn update(
        &mut self,
        out: &mut dyn Write,
        patience: Duration,
        release: Release,
        change: impl FnOnce(&mut State, i32) -> String,
    ) -> io::Result<()> {
        if !lock(&self.file, patience) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let result = (|| {
            let mut text = String::new();
            self.file.rewind()?;
            self.file.read_to_string(&mut text)?;
            let mut state = State::parse(&text);
            let pid = self.pid;
            state.lines.retain(|&(owner, _)| owner == pid || alive(owner));
            let bytes = change(&mut state, pid);
            // One write, so that the terminal never shows half a redraw.
            out.write_all(bytes.as_bytes())?;
            out.flush()?;
            self.file.set_len(0)?;
            self.file.rewind()?;
            self.file.write_all(state.text().as_bytes())
        })();
        if release == Release::Now {
            let _ = rustix::fs::flock(self.file.as_fd(), FlockOperation::Unlock);
        }
        result
    }
}

/// When an update lets the board's lock go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Release {
    /// As soon as the board is drawn.
    Now,
    /// When the process exits: the kernel drops an `flock` with the last descriptor of the
    /// open file, which the caller must then never close.
    AtExit,
}

/// Takes `file`'s lock, waiting at most `patience`.
fn lock(file: &File, patience: Duration) -> bool {
    let deadline = Instant::now() + patience;
    loop {
        match rustix::fs::flock(file.as_fd(), FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return true,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(_) => return false,
        }
    }
}

/// Whether process `pid` still exists.
fn alive(pid: i32) -> bool {
    rustix::process::Pid::from_raw(pid)
        .is_some_and(|pid| rustix::process::test_kill_process(pid) != Err(rustix::io::Errno::SRCH))
}

/// The monotonic clock in ns: the same for every process on the machine.
pub fn monotonic_ns() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (now.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(now.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn state(rows: usize, lines: &[(i32, &str)]) -> State {
        State {
            rows,
            renewed: 0,
            lines: lines.iter().map(|&(pid, line)| (pid, line.to_owned())).collect(),
        }
    }

    #[test]
    fn the_file_says_what_it_was_told() {
        let board = state(2, &[(41, "a: in 3 MiB"), (42, "b:  out 1 MiB  [>   ]")]);
        assert_eq!(State::parse(&board.text()), board);
        assert_eq!(State::parse(""), State::default());
        assert_eq!(State::parse("rows x\ngarbage\n7 ok"), state(0, &[(7, "ok")]));
    }

    #[test]
    fn alone_it_draws_what_a_lone_line_draws() {
        let mut board = state(0, &[]);
        board.set(1, "line one");
        assert_eq!(board.redraw("", 24), "\rline one\x1b[K");
        board.set(1, "line two");
        assert_eq!(board.redraw("", 24), "\rline two\x1b[K");
        assert_eq!(board.rows, 1);
    }

    #[test]
    fn two_share_the_terminal_a_row_each() {
        let mut board = state(1, &[(1, "a: 1")]);
        board.set(2, "b: 1");
        // From the end of a's row: back to its start, a's line, then b's on the next row.
        assert_eq!(board.redraw("", 24), "\ra: 1\x1b[K\nb: 1\x1b[K");
        assert_eq!(board.rows, 2);
        board.set(1, "a: 2");
        // From the end of b's row: up one, then both.
        assert_eq!(board.redraw("", 24), "\r\x1b[1Aa: 2\x1b[K\nb: 1\x1b[K");
    }

    #[test]
    fn a_message_goes_above_the_block() {
        let mut board = state(2, &[(1, "a"), (2, "b")]);
        assert_eq!(
            board.redraw("accel: a warning\n", 24),
            "\r\x1b[1A\x1b[Jaccel: a warning\na\x1b[K\nb\x1b[K"
        );
        assert_eq!(board.rows, 2);
    }

    #[test]
    fn a_shrinking_block_leaves_nothing_behind_and_a_tall_one_fits() {
        let mut board = state(3, &[(1, "a")]);
        assert_eq!(board.redraw("", 24), "\r\x1b[2Aa\x1b[K\x1b[J");
        let mut tall = state(0, &[(1, "a"), (2, "b"), (3, "c")]);
        assert_eq!(tall.redraw("", 2), "\rb\x1b[K\nc\x1b[K");
        assert_eq!(tall.rows, 2);
    }

    /// Two boards on one file, as two accels on one terminal: the second joins under the
    /// first; when the first leaves, the block is cleared, its final line stays, and the
    /// board stays its own.
    #[test]
    fn join_draw_and_leave() {
        let dir = std::env::temp_dir().join(format!("accel-board-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tty");
        let open =
            || OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path);
        let mut first =
            Board { file: open().unwrap(), pid: rustix::process::getpid().as_raw_nonzero().get() };
        // Another live process: the parent of this test.
        let other = rustix::process::getppid().map_or(1, |pid| pid.as_raw_nonzero().get());
        let mut second = Board { file: open().unwrap(), pid: other };
        let mut screen = Vec::new();
        first.draw(&mut screen, "first", 24, None).unwrap();
        second.draw(&mut screen, "second", 24, None).unwrap();
        first.draw(&mut screen, "first 2", 24, None).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&screen),
            "\rfirst\x1b[K\rfirst\x1b[K\nsecond\x1b[K\r\x1b[1Afirst 2\x1b[K\nsecond\x1b[K"
        );
        screen.clear();
        first.leave(&mut screen, "first done").unwrap();
        assert_eq!(String::from_utf8_lossy(&screen), "\r\x1b[1A\x1b[Jfirst done\x1b[K\n");
        // Its last words go under its final line with nobody drawing in between: the board
        // stays locked until this process exits (a lock per open file, so another open of it
        // here is refused as another process would be).
        assert!(!lock(&open().unwrap(), Duration::ZERO), "the board is let go before the exit");
        let left = State::parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(left.rows, 0);
        assert_eq!(left.lines, vec![(other, "second".to_owned())]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_directory_is_private() {
        let dir = crate::watch::control::private_directory().expect("a directory for boards");
        let meta = std::fs::metadata(dir).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
    }
}
