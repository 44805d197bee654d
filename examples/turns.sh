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

# Seconds since $1 (an $EPOCHREALTIME), to a tenth.
since() {
  local now=${EPOCHREALTIME/[.,]/} then=${1/[.,]/}
  local tenths=$(( (now - then + 50000) / 100000 ))
  echo "$(( tenths / 10 )).$(( tenths % 10 )) s"
}

echo "producer: writes 8 MiB at once, then works 0.5 s; $bursts times"
echo "consumer: works on what it reads, 512 KiB at a time"
start=$EPOCHREALTIME
producer | consumer
echo "producer | consumer           $(since "$start")  they take turns"
start=$EPOCHREALTIME
producer | "$accel" --expect "$(( bursts * 8 ))M" | consumer
echo "producer | accel | consumer   $(since "$start")  they overlap"
