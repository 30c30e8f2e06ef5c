#!/bin/sh
# crosshost-bench.sh: ucxnet against Go TCP between two simulated hosts.
#
# Two hosts: network, IPC and UTS namespaces, each with its own /dev/shm,
# joined by a veth pair; UCX_TLS unset (UCX picks tcp over the veth); one
# shared directory registry. Host S runs "ucxnet bench --serve"; host C
# runs ROUNDS rounds of "ucxnet bench --remote", each round once with the
# UCX lane forced (UCXNET_LANE=ucx: UCX's tcp over the veth) and once with
# the lane ucxnet picks (the kernel-TCP lane), both with Go TCP across the
# same veth in the same run (ucx first in odd rounds, Go TCP first in even
# ones). It prints a Markdown table of medians with the lowest and highest
# per-run ratio (scripts/benchsummary.py) and keeps the JSON reports and
# each run's load average in OUT.
#
# Needs root, iproute2, util-linux's unshare and python3. Settings: see
# benchlib.sh.
set -eu

if [ "$(id -u)" != 0 ]; then
	echo "crosshost-bench: needs root (network namespaces)" >&2
	exit 2
fi
NAME=crosshost
. "$(dirname "$0")/benchlib.sh"

NS_S=ucxb-s-$$ NS_C=ucxb-c-$$ VS=ubs$$ VC=ubc$$
SUBNET=10.214.$(($$ % 256))
REG=$OUT/registry
SRV=
cleanup() {
	set +e
	if [ -n "$SRV" ]; then
		kill "$SRV" 2>/dev/null
		wait "$SRV" 2>/dev/null
	fi
	ip netns del "$NS_S" 2>/dev/null
	ip netns del "$NS_C" 2>/dev/null
	rm -rf "$REG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -m 0700 "$REG"
ip netns add "$NS_S"
ip netns add "$NS_C"
ip link add "$VS" netns "$NS_S" type veth peer name "$VC" netns "$NS_C"
for side in "$NS_S $VS 1" "$NS_C $VC 2"; do
	set -- $side
	ip -n "$1" addr add "$SUBNET.$3/24" dev "$2"
	ip -n "$1" link set lo up
	ip -n "$1" link set "$2" up
done
# UCX ignores a device until its carrier is up.
for side in "$NS_S $VS" "$NS_C $VC"; do
	set -- $side
	i=0
	until ip -n "$1" -o link show dev "$2" | grep -q LOWER_UP; do
		i=$((i + 1))
		[ $i -gt 100 ] && { echo "crosshost-bench: no carrier on $2" >&2; exit 1; }
		sleep 0.1
	done
done

# host NS VETH CMD...: run CMD as a simulated host (own hostname, IPC and
# /dev/shm) with UCX_TLS and UCXNET_LANE unset unless CMD sets them. It
# execs: call it in a subshell or in the background, so that the pid is
# CMD's own.
host() {
	ns=$1 dev=$2
	shift 2
	exec ip netns exec "$ns" unshare --uts --ipc --mount --propagation private \
		sh -c 'hostname "$0" && mount -t tmpfs tmpfs /dev/shm && exec "$@"' "$ns" \
		env -u UCX_TLS -u UCXNET_LANE UCX_NET_DEVICES="$dev" UCXNET_REGISTRY="dir:$REG" "$@"
}

host "$NS_S" "$VS" "$BIN" bench --serve xbench >"$OUT/serve.out" 2>"$OUT/serve.err" &
SRV=$!
i=0
until grep -q '^ready ' "$OUT/serve.out" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 200 ] || ! kill -0 "$SRV" 2>/dev/null; then
		echo "crosshost-bench: the server did not start:" >&2
		cat "$OUT/serve.err" >&2
		exit 1
	fi
	sleep 0.1
done

for r in $(seq "$ROUNDS"); do
	order=$(bench_order "$r")
	for lane in ucx auto; do
		echo "round $r lane $lane: $(uptime)" | tee -a "$OUT/load.txt" >&2
		(host "$NS_C" "$VC" env UCXNET_LANE=$lane "$BIN" bench --remote xbench --transports "$order" \
			--duration "$DURATION" --sizes "$SIZES" --json) >"$OUT/r$r-lane-$lane.json" 2>"$OUT/r$r-lane-$lane.err" ||
			{ cat "$OUT/r$r-lane-$lane.err" >&2; exit 1; }
	done
done

echo "reports in $OUT; ratio: >1 means ucxnet is better (for latency and CPU Go/ucxnet, for rates ucxnet/Go)"
python3 "$ROOT/scripts/benchsummary.py" "UCXNET_LANE=ucx (before)=$OUT/r*-lane-ucx.json" \
	"default lane (after)=$OUT/r*-lane-auto.json"
