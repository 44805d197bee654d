//! Drawing progress: the line redrawn in place on a terminal (shared with other accels there,
//! [`board`](super::board)), a line per interval into a file or pipe, or `-n`'s figures; and
//! closing the display at the end, the final line left standing.

use super::board::Board;
use super::line::{self, Rates};
use super::sink::{in_foreground, terminal_size};
use super::{State, Visibility, Watch};
use crate::meter::Snapshot;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// It is not.
    Off,
    /// One line redrawn in place on a terminal, shared with other accels drawing there.
    Redrawn,
    /// A line per interval, each ending in a newline, for a file or a pipe.
    Lines,
    /// A number per interval (`-n`).
    Numeric,
}

/// How wide a line is in [`Mode::Lines`], where no terminal says.
pub(super) const LOG_WIDTH: usize = 100;

/// Erases the line the cursor is on: back to column 0, clear to its end.
pub(super) const CLEAR_LINE: &str = "\r\x1b[K";

impl Watch {
    /// Whether the line may be drawn now: the terminal is ours (pv's rule: a background job
    /// draws nothing, unless `-p`).
    pub(super) fn ours(&self) -> bool {
        match self.progress {
            Visibility::Off => false,
            Visibility::Always => true,
            Visibility::Foreground => in_foreground(),
        }
    }

    /// Shows the progress as it is now: redraws the line, or writes a line or a number.
    pub(super) fn show(&self, state: &mut State, snapshot: &Snapshot) {
        state.released = state.released || self.look.hold.over(snapshot);
        if !state.released {
            return;
        }
        match self.mode {
            Mode::Off => {}
            Mode::Redrawn if !self.ours() => {
                // A background job draws nothing; what it drew before belongs to the past.
                state.drawn = false;
            }
            Mode::Redrawn => {
                let (width, height) = terminal_size(self.sink.fd());
                let width = self.look.width.unwrap_or(width);
                let text = self.line(snapshot, &state.rates, width, false);
                if !state.board_tried {
                    state.board_tried = true;
                    state.board = Board::join(self.sink.fd());
                }
                let continued = state.continued_at.take();
                match &mut state.board {
                    Some(board) => {
                        let _ = self.sink.with(|out| {
                            board.draw(out, &text, height.saturating_sub(1), continued)
                        });
                    }
                    None => self.sink.put(&format!("\r{text}\x1b[K")),
                }
                state.drawn = true;
                state.shown = true;
            }
            Mode::Lines => {
                let width = self.look.width.unwrap_or(LOG_WIDTH);
                self.sink.put(&format!("{}\n", self.line(snapshot, &state.rates, width, false)));
                state.shown = true;
            }
            Mode::Numeric => {
                self.sink.put(&format!("{}\n", self.figure(snapshot, &state.rates)));
                state.shown = true;
            }
        }
    }

    /// The progress line for `width` columns.
    pub(super) fn line(
        &self,
        snapshot: &Snapshot,
        rates: &Rates,
        width: usize,
        ended: bool,
    ) -> String {
        let subject = line::Subject {
            names: &self.names,
            expected: self.expected,
            ended,
            parts: self.look.parts,
        };
        line::render(snapshot, rates, &subject, width)
    }

    /// `-n`'s line: the percent done when a total is expected, else the bytes delivered (the
    /// lines taken in, where lines are counted); as pv's switches ask, the count whatever
    /// is expected, the seconds so far before it, the rate after it.
    pub(super) fn figure(&self, snapshot: &Snapshot, rates: &Rates) -> String {
        let figures = self.look.figures;
        let (count, rate) = match snapshot.lines {
            Some(lines) => (lines, rates.lines()),
            None => (snapshot.bytes_out, rates.output()),
        };
        let mut text = String::new();
        if figures.elapsed {
            text += &format!("{:.4} ", snapshot.elapsed.as_secs_f64());
        }
        text += &match self.expected {
            Some(total) if !figures.count => line::percent(count, total).to_string(),
            _ => count.to_string(),
        };
        if figures.rate {
            text += &format!(" {}", rate.round() as u64);
        }
        text
    }

    pub(super) fn clear(&self, state: &mut State) {
        if state.drawn {
            self.sink.put(CLEAR_LINE);
            state.drawn = false;
        }
    }

    /// The transfer is over: the final progress is shown and left standing (the line with the
    /// final counters and the averages, as pv leaves it; the final `-n` figure), and nothing
    /// is drawn after it, so that accel's last messages can follow. Only the first call does
    /// anything; [`Watch::finish`] makes it too.
    pub fn close(&self) {
        let mut state = self.lock();
        self.close_locked(&mut state);
    }

    pub(super) fn close_locked(&self, state: &mut State) {
        if state.closed {
            return;
        }
        state.closed = true;
        let snapshot = self.snapshot();
        let rates = Rates::over_the_run(&snapshot);
        state.released = state.released || self.look.hold.over(&snapshot);
        match self.mode {
            Mode::Off => {}
            // A line that was never drawn (a run shorter than a redraw) does not appear now.
            Mode::Redrawn if !state.shown || !self.ours() => self.clear(state),
            // Nor does one held back all along (`-W`, `-D`).
            Mode::Lines | Mode::Numeric if !state.released => {}
            Mode::Redrawn => {
                let (width, _) = terminal_size(self.sink.fd());
                let width = self.look.width.unwrap_or(width);
                let last = self.line(&snapshot, &rates, width, true);
                let board = state.board.take();
                let left = board.map(|board| self.sink.with(|out| board.leave(out, &last)));
                if !matches!(left, Some(Ok(()))) {
                    self.sink.put(&format!("\r{last}\x1b[K\n"));
                }
                state.drawn = false;
                state.standing = true;
            }
            Mode::Lines => {
                let width = self.look.width.unwrap_or(LOG_WIDTH);
                self.sink.put(&format!("{}\n", self.line(&snapshot, &rates, width, true)));
                state.standing = true;
            }
            Mode::Numeric => self.sink.put(&format!("{}\n", self.figure(&snapshot, &rates))),
        }
    }

    /// SIGWINCH: re-fit the line to the new width at once.
    pub fn redraw(&self) {
        let mut state = self.lock();
        if state.drawn && !state.closed {
            let snapshot = self.snapshot();
            self.show(&mut state, &snapshot);
        }
    }
}
