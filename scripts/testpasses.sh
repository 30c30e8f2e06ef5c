#!/bin/sh
# testpasses.sh runs the test suite under several UCX_TLS settings from
# test binaries compiled once (make test-tcp, test-sm and test use it).
#
#   scripts/testpasses.sh PASS...
#
# Each PASS is TLS=PATTERN: UCX_TLS=TLS for the packages whose import path
# matches the extended regular expression PATTERN ("." for all), e.g.
# "tcp=." "sm=/(ucxnet|internal/cucx)$". Every package with tests in every
# module of $MODULES is compiled once (go test -c, with $TESTFLAGS, e.g.
# -race), then the (pass, package) runs go $JOBS at a time, the slowest
# first, each in its package's folder as go test does. A run's output is
# printed only when it fails. $SKIP_sm (or $SKIP_tcp...) is a -test.skip
# pattern for that pass. A package whose import path matches $SPLIT runs
# as two processes at once, each with every other top-level test (the
# second with all that the first does not run: nothing is lost), since
# a package's tests run one after another and the slowest package sets the
# time. The exit status is 1 if any run failed.
#
# Environment: GO, MODULES, TESTFLAGS, TIMEOUT (-test.timeout), JOBS,
# SKIP_<tls>, SPLIT.
set -u
GO=${GO:-go}
MODULES=${MODULES:-.}
TESTFLAGS=${TESTFLAGS:-}
TIMEOUT=${TIMEOUT:-600s}
JOBS=${JOBS:-3}
SPLIT=${SPLIT:-}
export GO TIMEOUT

if [ "${1:-}" = "--run" ]; then
	# One run: --run TLS IMPORTPATH DIR BINARY LOGDIR SHARD, SHARD being
	# "-" (all tests), "1/2" or "2/2".
	tls=$2 pkg=$3 dir=$4 binary=$5 logs=$6 shard=$7
	log=$logs/$(echo "$tls $pkg $shard" | tr ' /' '___').log
	eval "skip=\${SKIP_$tls:-}"
	run=
	if [ "$shard" != - ]; then
		half=$(cd "$dir" && UCX_TLS=$tls "$binary" -test.list '.*' 2>/dev/null |
			grep -E '^(Test|Fuzz|Example)' | awk 'NR % 2 == 1' | paste -sd '|')
		[ -n "$half" ] || { printf "FAIL\t%s: cannot list its tests\n" "$pkg"; exit 1; }
		if [ "$shard" = 1/2 ]; then
			run="^($half)\$"
		else
			skip="${skip:+$skip|}^($half)\$"
		fi
	fi
	start=$(date +%s%N)
	(cd "$dir" && UCX_TLS=$tls "$binary" -test.paniconexit0 -test.count=1 -test.timeout="$TIMEOUT" \
		${run:+-test.run="$run"} ${skip:+-test.skip="$skip"}) >"$log" 2>&1
	rc=$?
	el=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.1fs", (b - a) / 1e9 }')
	what=$pkg
	[ "$shard" = - ] || what="$pkg ($shard)"
	if [ $rc = 0 ]; then
		eval "note=\${SKIP_$tls:-}"
		printf 'ok  \t%-46s UCX_TLS=%-4s %s%s\n' "$what" "$tls" "$el" "${note:+ (skipped $note)}"
		exit 0
	fi
	printf 'FAIL\t%-46s UCX_TLS=%-4s %s\n' "$what" "$tls" "$el"
	sed 's/^/    /' "$log"
	exit 1
fi

[ $# -gt 0 ] || { echo "usage: $0 TLS=PATTERN..." >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ucxnet-tests.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin" "$work/logs"
# The tests' stats sockets (their children's too) go to this run's
# directory: a child a test kills leaves its socket behind.
if [ -z "${UCXNET_STATS_DIR:-}" ]; then
	mkdir -m 0700 "$work/stats" && export UCXNET_STATS_DIR="$work/stats"
fi

# Compile: one test binary per package with tests, named after its path.
for m in $MODULES; do
	(cd "$m" && $GO list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./...) || exit 1
done >"$work/pkgs"
echo "== compiling $(wc -l <"$work/pkgs") test binaries ($TESTFLAGS)"
while read -r pkg dir; do
	echo "$pkg $dir $work/bin/$(echo "$pkg" | tr '/' '_').test"
done <"$work/pkgs" >"$work/bins"
# go test -c builds one package at a time; two at once keep both CPUs busy
# through the links.
if ! xargs -P 2 -L 1 sh -c 'cd "$1" && '"$GO"' test -c '"$TESTFLAGS"' -o "$2" . || exit 255' sh <<EOF2
$(awk '{print $2, $3}' "$work/bins")
EOF2
then
	echo "FAIL: compiling the tests"
	exit 1
fi

# The runs, the packages with the most test code first (a fair guess at the
# slowest), so that the long ones overlap the short ones.
for p in "$@"; do
	tls=${p%%=*} pat=${p#*=}
	while read -r pkg dir binary; do
		echo "$pkg" | grep -Eq "$pat" || continue
		[ -x "$binary" ] || continue # a package whose tests compile to nothing
		size=$(cat "$dir"/*_test.go | wc -c)
		if [ -n "$SPLIT" ] && echo "$pkg" | grep -Eq "$SPLIT"; then
			echo "$size $tls $pkg $dir $binary 1/2"
			echo "$size $tls $pkg $dir $binary 2/2"
		else
			echo "$size $tls $pkg $dir $binary -"
		fi
	done <"$work/bins"
done | sort -rn | cut -d' ' -f2- >"$work/runs"
echo "== running $(wc -l <"$work/runs") test runs, $JOBS at a time"
xargs -P "$JOBS" -L 1 "$0" --run <<EOF2 || { echo "FAIL"; exit 1; }
$(awk -v logs="$work/logs" '{ print $1, $2, $3, $4, logs, $5 }' "$work/runs")
EOF2
echo "PASS"
