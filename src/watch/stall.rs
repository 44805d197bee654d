//! The stall watchdog of the command line: once nothing has moved for `--stall-timeout`,
//! which side is stuck, in words; the watcher tells the engine, which ends the run.

use super::{State, Watch};
use crate::meter::{Delivery, Snapshot};
use crate::size::Bytes;
use crate::words::byte_count;

impl Watch {
    /// The watchdog: once nothing has moved for `--stall-timeout`, which side is stuck, in
    /// words.
    pub(super) fn stalled(&self, state: &mut State, snapshot: &Snapshot) -> Option<String> {
        let still = state.motion.still(snapshot, self.stall_timeout?)?;
        let still = crate::words::duration(still);
        // Everything sent, and a receiver has not confirmed the end of its stream.
        let awaiting = snapshot.readers.iter().position(|r| r.ending_stream && !r.gone);
        if let (0, Some(index)) = (snapshot.held(), awaiting) {
            let reader = &snapshot.readers[index];
            return Some(format!(
                "stalled: the receiver at {} has not confirmed the end of the stream for \
                 {still}; {} of the {} sent are confirmed",
                self.names.reader(index),
                byte_count(reader.delivered()),
                byte_count(reader.bytes)
            ));
        }
        // The buffer is full of bytes a receiver has not confirmed, kept to be sent again
        // should the connection drop: it is the receiver that does not move.
        let unconfirmed = snapshot
            .readers
            .iter()
            .position(|r| r.delivery == Delivery::Confirmed && !r.gone && r.delivered() < r.bytes);
        if let (0, true, Some(index)) = (snapshot.held(), self.meter.input_waiting(), unconfirmed) {
            let reader = &snapshot.readers[index];
            return Some(format!(
                "stalled: the receiver at {} has confirmed nothing for {still}; the buffer is \
                 full of the {} sent that it has not confirmed",
                self.names.reader(index),
                byte_count(reader.bytes - reader.delivered())
            ));
        }
        let waiting = |reader| self.meter.reader_waiting(reader);
        Some(match snapshot.slowest() {
            // Bytes are held, but fewer than the output takes at once (a whole --block-size
            // block, its --start-at): it waits for the input.
            Some(slowest) if snapshot.held() > 0 && waiting(slowest) => {
                let held = if self.meter.input_waiting() { "held back too" } else { "not writing" };
                format!(
                    "stalled: no input from {} for {still}; the producer is {held}, and {} \
                     waits for more than the {} there",
                    self.names.input,
                    self.names.reader(slowest),
                    Bytes(snapshot.held())
                )
            }
            Some(slowest) if snapshot.held() > 0 => format!(
                "stalled: nothing written to {} for {still} with {} waiting; its reader is not \
                 reading",
                self.names.reader(slowest),
                Bytes(snapshot.held())
            ),
            _ => format!(
                "stalled: no input from {} for {still}; the producer is not writing",
                self.names.input
            ),
        })
    }
}
