#!/bin/sh
# loopback-bench.sh: ucxnet against Go TCP on one host, over shared memory
# and over UCX's tcp.
#
# ROUNDS rounds of "ucxnet bench --transports ucx,tcp --json" (tcp,ucx in
# even rounds, so that neither always runs first), each round once with
# UCX_TLS=sm and once with UCX_TLS=tcp (Go TCP over 127.0.0.1 in the same
# runs). It prints a Markdown table of medians with the lowest
# and highest per-run ratio (scripts/benchsummary.py) and keeps the JSON
# reports in OUT.
#
# Needs python3. Settings: see benchlib.sh.
set -eu

NAME=loopback
. "$(dirname "$0")/benchlib.sh"

for r in $(seq "$ROUNDS"); do
	order=$(bench_order "$r")
	for tls in sm tcp; do
		echo "round $r UCX_TLS=$tls: $(uptime)" | tee -a "$OUT/load.txt" >&2
		env -u UCXNET_LANE UCX_TLS=$tls "$BIN" bench --transports "$order" --perftest=false \
			--duration "$DURATION" --sizes "$SIZES" --json >"$OUT/r$r-$tls.json" 2>"$OUT/r$r-$tls.err" ||
			{ cat "$OUT/r$r-$tls.err" >&2; exit 1; }
	done
done

echo "reports in $OUT; ratio: >1 means ucxnet is better (for latency and CPU Go/ucxnet, for rates ucxnet/Go)"
python3 "$ROOT/scripts/benchsummary.py" "UCX_TLS=sm=$OUT/r*-sm.json" "UCX_TLS=tcp=$OUT/r*-tcp.json"
