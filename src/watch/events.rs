//! `--json`'s NDJSON events: `progress` at each interval, `summary` once at the end; one
//! write per line, so that lines from the watcher and the signal thread never interleave.

use std::io::Write;

use serde_json::json;

use super::line::Rates;
use super::{State, Watch, signal_name};
use crate::engine::digest::Digest;
use crate::exit::Exit;
use crate::meter::{Delivery, Snapshot, Stream, Wire};

impl Watch {
    /// `{"event":"progress",...}`: the counters now.
    pub(super) fn progress_event(&self, snapshot: &Snapshot, rates: &Rates) -> serde_json::Value {
        json!({
            "event": "progress",
            "name": self.names.name,
            "seconds": snapshot.elapsed.as_secs_f64(),
            "bytes_in": snapshot.bytes_in,
            "bytes_out": snapshot.bytes_out,
            "fill_bytes": snapshot.held(),
            "capacity_bytes": snapshot.capacity,
            "rate_in": rates.input(),
            "rate_out": rates.output(),
            "producer_blocked_s": snapshot.producer_blocked.as_secs_f64(),
            "consumer_starved_s": snapshot.consumer_starved.as_secs_f64(),
            "rate_limit_out": snapshot.limits.output,
            "rate_limit_in": snapshot.limits.input,
            "memory_bytes": snapshot.held_memory,
            "disk_bytes": snapshot.held_disk,
        })
    }

    /// `{"event":"summary",...}`: the whole run, once, at the end.
    pub(super) fn summary_event(
        &self,
        snapshot: &Snapshot,
        exit: Exit,
        digests: &[Digest],
    ) -> serde_json::Value {
        let tiers = snapshot.tiers;
        let outputs: Vec<serde_json::Value> = self
            .names
            .outputs
            .iter()
            .zip(&snapshot.readers)
            .enumerate()
            .map(|(index, (name, reader))| {
                let wire = snapshot.wires.get(index).and_then(Option::as_ref).map(wire_json);
                let streams = snapshot.streams.get(index).and_then(|s| streams_json(s));
                json!({
                    "name": name,
                    "bytes": reader.bytes,
                    "padded": reader.padded,
                    "starved_s": reader.starved.as_secs_f64(),
                    "complete": !reader.gone,
                    "confirmed": (reader.delivery == Delivery::Confirmed)
                        .then_some(reader.delivered()),
                    "reconnections": reader.outages.reconnections,
                    "longest_outage_s": reader.outages.longest.as_secs_f64(),
                    "outage_s": reader.outages.total.as_secs_f64(),
                    "resent_bytes": reader.outages.resent,
                    "wire": wire,
                    "streams": streams,
                })
            })
            .collect();
        let hashes: Vec<serde_json::Value> = digests
            .iter()
            .map(|d| json!({ "algorithm": d.algorithm.name(), "hex": d.hex }))
            .collect();
        let mut event = json!({
            "event": "summary",
            "name": self.names.name,
            "bytes_in": snapshot.bytes_in,
            "bytes_out": snapshot.bytes_out,
            "seconds": snapshot.elapsed.as_secs_f64(),
            "producer_blocked_s": snapshot.producer_blocked.as_secs_f64(),
            "consumer_starved_s": snapshot.consumer_starved.as_secs_f64(),
            "peak_fill_bytes": snapshot.peak_held,
            "capacity_bytes": snapshot.capacity,
            "bottleneck": crate::meter::bottleneck(snapshot).as_str(),
            "slowest": snapshot.slowest().map(|index| self.names.reader(index)),
            "engine": self.engine,
            "tiers": {
                "through": tiers.through,
                "pipes": tiers.pipes,
                "memory": tiers.memory,
                "disk": tiers.disk,
            },
            "peak_memory_bytes": snapshot.peak_memory,
            "peak_disk_bytes": snapshot.peak_disk,
            "peak_reorder_bytes": snapshot.peak_reorder,
            "rate_limit_out": snapshot.limits.output,
            "rate_limit_in": snapshot.limits.input,
            "input": self.names.input,
            "input_reconnections": snapshot.input_outages.reconnections,
            "input_longest_outage_s": snapshot.input_outages.longest.as_secs_f64(),
            "input_outage_s": snapshot.input_outages.total.as_secs_f64(),
            "input_streams": streams_json(&snapshot.input_streams),
            "input_wire": snapshot.input_wire.as_ref().map(wire_json),
            "outputs": outputs,
            "hashes": hashes,
            "exit": exit.code(),
        });
        if let (Exit::Signal(signal), Some(map)) = (exit, event.as_object_mut()) {
            map.insert("signal".into(), signal_name(signal).into());
        }
        event
    }
}

/// A peer's connections when its stream goes over several (`--streams`), each with what it
/// carried, the times it connected again, the bytes it had taken that went again on the
/// others: `null` for a single connection, or any other endpoint.
fn streams_json(streams: &[Stream]) -> Option<serde_json::Value> {
    let each = streams.iter().map(|stream| {
        json!({
            "bytes": stream.bytes,
            "reconnections": stream.reconnections,
            "resent_bytes": stream.resent,
            "level": stream.level,
        })
    });
    (!streams.is_empty()).then(|| each.collect())
}

/// A network output's frames on the wire (`--compress`), or a network input's as they came
/// off it: `null` for any other output or input.
fn wire_json(wire: &Wire) -> serde_json::Value {
    let levels: Vec<serde_json::Value> = wire
        .levels
        .iter()
        .map(|(level, time)| json!({ "level": level, "seconds": time.as_secs_f64() }))
        .collect();
    json!({
        "bytes": wire.bytes,
        "stream_bytes": wire.stream,
        "ratio": wire.ratio(),
        "frames": wire.frames,
        "stored_frames": wire.stored,
        "compressing": wire.compressing,
        "level": wire.level,
        "levels": levels,
    })
}

/// Adds the lines counted to a JSON event, where they are counted (accel as `pv -l`).
pub(super) fn with_lines(event: &mut serde_json::Value, snapshot: &Snapshot) {
    if let (Some(lines), Some(map)) = (snapshot.lines, event.as_object_mut()) {
        map.insert("lines".into(), lines.into());
    }
}

pub(super) fn write_json(state: &mut State, event: &serde_json::Value) {
    if let Some(out) = &mut state.json {
        // One write per line, so that lines from a watcher and a signal never interleave.
        let _ = out.write_all(format!("{event}\n").as_bytes());
        let _ = out.flush();
    }
}
