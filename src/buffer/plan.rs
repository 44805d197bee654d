//! The planner every run goes through, the library's and the command line's: the options of a
//! run made into the engine's plan, its route, its counters and its limits; then the transfer
//! itself on the engine's threads.

use std::io;
use std::sync::{Arc, mpsc};

use crate::backlog::spill::{STEP, SpillFile};
use crate::backlog::{self, Gates};
use crate::endpoint::{Endpoint, FdKind};
use crate::engine::OutputErrors;
use crate::engine::digest::Algorithm;
use crate::engine::pace::Limits;
use crate::engine::{self, Block, Flow, Outcomes, Plan, Preference, Route};
use crate::log::Log;
use crate::meter::Meter;
use crate::size::Bytes;
use crate::stop::Stop;
use crate::sys;

/// A run's blueprint: everything it needs that is not an endpoint, the library's options and
/// the command line's beyond them (hashes, watermarks, `--sync`, `--engine`).
pub(crate) struct Blueprint {
    /// The buffer size asked for.
    pub size: usize,
    /// `-r`.
    pub rate: Option<u64>,
    /// `--input-rate`.
    pub input_rate: Option<u64>,
    /// `--block-size`, `--pad`.
    pub block: Option<Block>,
    /// `--input-block-size`.
    pub input_block_size: Option<usize>,
    /// `--start-at`: of the buffer's capacity, how many bytes.
    pub start_at: Option<Box<dyn Fn(usize) -> usize>>,
    /// `--resume-at`: of the buffer's capacity, how many bytes.
    pub resume_at: Option<Box<dyn Fn(usize) -> usize>>,
    /// `--hash`.
    pub hashes: Vec<Algorithm>,
    /// `--sync`.
    pub sync: bool,
    /// `--output-error`.
    pub output_errors: OutputErrors,
    /// `--engine`.
    pub engine: Preference,
}

/// A run planned: what the engine takes, and what watches it.
#[derive(Debug)]
pub(crate) struct Planned {
    /// The engine's plan.
    pub plan: Plan,
    /// The route it starts on.
    pub route: Arc<Route>,
    /// Its counters.
    pub meter: Arc<Meter>,
    /// Its rate limits, which may change while it runs.
    pub limits: Arc<Limits>,
}

impl Blueprint {
    /// Plans moving `input` to `outputs`: the buffer's capacity, its gates and limits, the
    /// counters and the route; nothing is read. The pipes on either side are enlarged (best
    /// effort), so that each wakeup moves more.
    pub(crate) fn plan(
        &self,
        input: Endpoint,
        outputs: Vec<Endpoint>,
        spill: Option<Arc<SpillFile>>,
        log: Arc<Log>,
    ) -> Planned {
        for endpoint in std::iter::once(&input).chain(&outputs) {
            if endpoint.kind == FdKind::Pipe {
                sys::enlarge_pipe(endpoint.fd());
            }
        }
        let blocks = Gates {
            read_block: self.input_block_size,
            write_block: self.block.map(|block| block.size),
            ..Gates::default()
        };
        let capacity = backlog::capacity_for(self.size, &blocks);
        let readers = outputs.len() + self.hashes.len();
        let meter = Arc::new(Meter::new(capacity as u64, readers));
        let limits = Arc::new(Limits::new(self.rate, self.input_rate));
        let flow = Flow {
            limits: Arc::clone(&limits),
            gates: Gates {
                start_at: self.start_at.as_ref().map_or(0, |level| level(capacity)),
                resume_at: self.resume_at.as_ref().map(|level| level(capacity)),
                ..blocks
            },
            block: self.block,
        };
        let plan = Plan {
            input,
            outputs,
            hashes: self.hashes.clone(),
            capacity,
            sync: self.sync,
            output_errors: self.output_errors,
            flow,
            spill,
        };
        let route = Arc::new(Route::plan(self.engine, &plan, log));
        Planned { plan, route, meter, limits }
    }
}

/// Runs `planned` to its end on the engine's threads; `events` is where a watchdog, the
/// program's or the library's, says the run has stalled, and `inbox` its other end.
pub(crate) fn transfer(
    planned: Planned,
    stop: Arc<Stop>,
    events: mpsc::Sender<engine::Event>,
    inbox: mpsc::Receiver<engine::Event>,
) -> io::Result<Outcomes> {
    engine::run(planned.plan, planned.route, planned.meter, stop, events, inbox)
}

/// Why `bytes` cannot be the most a spill file holds (`--spill-size`), if it cannot: less
/// than the spill reserves at once could never spill a byte.
pub(crate) fn spill_size_refused(bytes: u64) -> Option<String> {
    (bytes < STEP).then(|| {
        format!(
            "too small: the spill takes disk {} at a time; at least {}M",
            Bytes(STEP),
            STEP >> 20
        )
    })
}
