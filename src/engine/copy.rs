//! The portable engine's input side: `read` into the backlog's memory.
//!
//! Two copies per byte (into user memory and out again), which costs about 0.2-0.3 CPU seconds
//! per GiB; compression pipelines move a few hundred MB/s at most and do not notice. Every read
//! is committed at once, so partial data (a short line) goes out without waiting for more.
//! While nothing is queued, what a read got goes on from the input thread itself where it can
//! ([`Bypass`]), and while the consumer waits on the input, read after read with nothing else
//! in between ([`Bypass::relay`]).

use std::io;

use super::bypass::{Bypass, Relay, read_passing};
use super::gather::Gather;
use super::pace::Pacer;
use super::read::nobody_left;
use super::{Flow, Route};
use crate::backlog::Producer;
use crate::endpoint::Endpoint;

/// Reads until end of input, an error, or no reader being left (an `Interrupted` error), at
/// no more than the input rate limit, for `outputs` (readers 0, 1, ... of the backlog).
pub fn read_input(
    input: &Endpoint,
    outputs: &[Endpoint],
    mut producer: Producer,
    route: &Route,
    flow: &Flow,
) -> io::Result<()> {
    let mut pacer = Pacer::new(&flow.limits.input);
    let mut gather = Gather::new(input, outputs);
    let mut bypass = Bypass::new(outputs, producer.meter().readers());
    loop {
        let mut most = pacer.quantum();
        let direct = match &mut bypass {
            Some(bypass) if bypass.allowed(flow) => {
                let Some(fill) = producer.wait_for_space() else { return Err(nobody_left()) };
                fill.empty.then_some((bypass, fill.space))
            }
            _ => None,
        };
        let took = match direct {
            Some((bypass, space)) if bypass.relays(input, &producer, most, space) => {
                let most = Bypass::RELAY.min(space);
                let to = Relay { input, output: &outputs[0], route, flow, most, until: most };
                bypass.relay(to, &mut producer, gather.as_mut())?
            }
            Some((bypass, _)) => {
                // A read that goes on at once stays in the cache.
                most = Some(most.map_or(Bypass::MOST, |most| most.min(Bypass::MOST)));
                read_passing(input, &mut producer, most, Some((bypass, &outputs[0])), route)?
            }
            None => read_passing(input, &mut producer, most, None, route)?,
        };
        let Some(took) = took else { return Ok(()) };
        pacer.moved(took.got, input.stop());
        // Under an input rate limit, the pacer decides when to read.
        if let (Some(gather), None) = (&mut gather, pacer.quantum()) {
            gather.after(took.got, &mut producer);
        }
    }
}
