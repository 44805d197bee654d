//! A reader's hold on what it passed ([`Reader::keep`](super::Reader::keep)): a network
//! output's bytes, kept in the backlog until the receiver confirms them, so that a dropped
//! connection resumes from there without a copy. Its [`Keep`] is for another thread (the
//! link's): it lets the kept bytes go, and sends the reader back to a kept byte or on past
//! bytes delivered another way, even while the reader waits.

use std::io;
use std::sync::Arc;

use super::{Shared, State};

/// What a reader's [`Keep`] asks of it, from another thread, at its next look for data
/// (even while it waits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Redirect {
    /// Go on from this offset (a connection came back where the receiver says).
    GoOnFrom(u64),
    /// Take nothing more: what the reader writes to is gone for good.
    Stop,
}

/// A reader's hold on the bytes it passed ([`Reader::keep`](super::Reader::keep)), for
/// whoever learns which are needed no more: another thread than the reader's own.
#[derive(Debug, Clone)]
pub struct Keep {
    pub(super) shared: Arc<Shared>,
    pub(super) index: usize,
}

impl Keep {
    /// Whether the bytes kept, with the `passing` more the reader is passing now (written,
    /// not yet consumed), fill a quarter of the buffer or more: time to ask for the word
    /// that lets them go, before the buffer is full of them. The piece being passed counts:
    /// a buffer that one piece fills (`-m 1M`, the 1 MiB a reader is handed) otherwise
    /// never looks pressed while it fills, and waits for the receiver's own round.
    pub fn pressing(&self, passing: usize) -> bool {
        let state = self.shared.lock();
        match (state.kept[self.index], state.cursors[self.index]) {
            (Some(kept), Some(cursor)) => {
                (cursor + passing as u64).saturating_sub(kept) >= (self.shared.capacity / 4) as u64
            }
            _ => false,
        }
    }

    /// Has the reader go on from `to` at its next look for data, even while it waits: back
    /// to a kept byte, or on past bytes delivered another way. An error when `to` is before
    /// what was kept, or past what was read.
    pub fn go_on_from(&self, to: u64) -> io::Result<()> {
        let mut state = self.shared.lock();
        let kept = state.kept[self.index].unwrap_or(0);
        if to < kept || to > state.produced {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "asked to go on from byte {to}, but bytes {kept} to {} are held",
                    state.produced
                ),
            ));
        }
        state.redirected[self.index] = Some(Redirect::GoOnFrom(to));
        self.shared.has_data.notify_all();
        Ok(())
    }

    /// Has the reader take nothing more, even while it waits: its next look for data finds
    /// none (what it writes to is gone for good; its own thread says why).
    pub fn stop_reader(&self) {
        let mut state = self.shared.lock();
        state.redirected[self.index] = Some(Redirect::Stop);
        self.shared.has_data.notify_all();
    }

    /// The bytes before `to` are needed no more: the backlog may let them go, now or, for
    /// those the reader has not passed yet, as it passes them. A confirmation often comes
    /// while the reader still holds the piece it was of (written, not yet consumed): cut to
    /// the reader's place, it was lost, and the buffer stayed full of confirmed bytes until
    /// the next one (a heartbeat away, with a buffer one piece fills: `-m 1M` crawled).
    pub fn release(&self, to: u64) {
        let mut state = self.shared.lock();
        let State { kept, cursors, produced, .. } = &mut *state;
        let (Some(kept), Some(_)) = (&mut kept[self.index], cursors[self.index]) else {
            return;
        };
        let to = to.min(*produced);
        if to > *kept {
            *kept = to;
            self.shared.release(&mut state);
        }
    }
}
