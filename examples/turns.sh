#!/usr/bin/env bash
# What accel is for, timed: two stages that work in bursts take turns through a plain pipe,
# and overlap through accel. Needs only bash and coreutils; ACCEL=path picks the binary.
set -euo pipefail
accel=${ACCEL:-accel}
if ! command -v "$accel" >/dev/null; then
  echo "turns.sh: no $accel on PATH; cargo install --path . puts it in ~/.cargo/bin" >&2
  exit 1
fi

bursts=6
# The producer writes 8 MiB at once, then works for half a second before the next burst:
# a decompressor's blocks, a database dump's tables.
producer() {
  for _ in $(seq "$bursts"); do head -c 8M /dev/zero; sleep 0.5; done
}
# The consumer works on what it reads, 512 KiB at a time: a compressor, a network link.
consumer() {
  while [ "$(head -c 512K | wc -c)" -gt 0 ]; do sleep 0.03; done
}

# Tenths of a second since $1 (an $EPOCHREALTIME).
tenths_since() {
  local now=${EPOCHREALTIME/[.,]/} then=${1/[.,]/}
  echo $(( (now - then + 50000) / 100000 ))
}
# Tenths of a second as seconds: 38 -> 3.8 s.
seconds() {
  echo "$(( $1 / 10 )).$(( $1 % 10 )) s"
}

echo "producer: writes 8 MiB at once, then works 0.5 s; $bursts times"
echo "consumer: works on what it reads, 512 KiB at a time"
start=$EPOCHREALTIME
producer | consumer
plain=$(tenths_since "$start")
echo "producer | consumer           $(seconds "$plain")  they take turns"
start=$EPOCHREALTIME
producer | "$accel" --expect "$(( bursts * 8 ))M" | consumer
buffered=$(tenths_since "$start")
# Overlapping, the run takes about as long as the consumer alone: some 0.6 of the time the
# two take in turns. Said as measured, whatever it shows.
if (( buffered * 100 <= plain * 85 )); then
  verdict="they overlap"
else
  verdict="no faster: they still take turns"
fi
echo "producer | accel | consumer   $(seconds "$buffered")  $verdict"
