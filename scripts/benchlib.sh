# benchlib.sh: settings shared by the bench scripts, sourced with NAME set
# (the temp dir's prefix). Settings (env): ROUNDS (3), DURATION (500ms),
# SIZES (4k,64k,1m), OUT (a new temp dir), BIN (the ucxnet binary;
# default: built from this tree into OUT).
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-500ms}
SIZES=${SIZES:-4k,64k,1m}
OUT=${OUT:-$(mktemp -d "/tmp/ucxnet-$NAME.XXXXXX")}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUT"
if [ -z "${BIN:-}" ]; then
	BIN=$OUT/ucxnet
	(cd "$ROOT" && go build -o "$BIN" ./cmd/ucxnet)
fi

# bench_order ROUND: the transports in the order a round runs them: ucx
# first in odd rounds, tcp first in even ones.
bench_order() {
	if [ $(($1 % 2)) = 1 ]; then echo ucx,tcp; else echo tcp,ucx; fi
}
