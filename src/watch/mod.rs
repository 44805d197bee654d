//! Watching the pipeline from the side: the progress line, the final report, NDJSON events and
//! the stall watchdog. Everything here reads [`Snapshot`](crate::meter::Snapshot)s of the
//! meter; nothing here can slow or block the data path.

pub mod line;
pub mod report;
