# ucxnet: the README's two commands are `make run` and `make test`.
GO        ?= go
GOFLAGS   ?=
BIN       := bin/ucxnet
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TEST_TIMEOUT ?= 600s
# Module folders: the core module and the nested ones that exist.
MODULES   := . $(patsubst %/go.mod,%,$(wildcard compat/*/go.mod)) recipes

.PHONY: all deps build vet check-builds check test test-passes builds-vet-fuzz test-tcp test-sm fuzz-short run bench bench-loopback bench-crosshost fuzz clean test-ucx golden-addresses ucx-build test-mixed

all: build

## deps: install UCX (libucx-dev, ucx-utils), the network tools the namespace
## tests use (iproute2, nftables) and the real servers the registry and proxy
## tests run (etcd-server, redis-server, redis-tools, curl) with apt-get when
## any is missing.
DEB_PACKAGES := libucx-dev ucx-utils pkg-config iproute2 nftables etcd-server redis-server redis-tools curl
deps:
	@if pkg-config --exists ucx && command -v ucx_info >/dev/null 2>&1 && \
	    command -v ip >/dev/null 2>&1 && command -v nft >/dev/null 2>&1 && \
	    command -v etcd >/dev/null 2>&1 && command -v redis-server >/dev/null 2>&1 && \
	    command -v redis-benchmark >/dev/null 2>&1 && command -v curl >/dev/null 2>&1; then \
		echo "deps: UCX $$(pkg-config --modversion ucx), ip, nft, etcd, redis and curl found"; \
	else \
		echo "deps: installing $(DEB_PACKAGES)"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $(DEB_PACKAGES); \
	fi

# COMMIT: the revision --version shows where Go records none (-buildvcs=false).
COMMIT ?= $(shell git describe --always --dirty --abbrev=12 2>/dev/null)
build: deps
	$(GO) build $(GOFLAGS) -ldflags "-X main.commit=$(COMMIT)" -o $(BIN) ./cmd/ucxnet

## vet: go vet of every module, built as the test passes build (-race), so
## that it reuses their compiled dependencies: without -race it compiled
## every dependency a second time (recipes alone: 275 s against 35 s after
## the race build, from an empty cache on the loaded 2-vCPU VM).
VETFLAGS ?= -race
vet: deps
	@for m in $(MODULES); do echo "vet $$m"; (cd $$m && $(GO) vet $(VETFLAGS) ./...) || exit 1; done

## check-builds: the core module builds and vets without cgo and vets (tests
## included) for darwin (internal/cucx's stub, which returns cucx.ErrUnsupported), and the
## tests that need no UCX pass without cgo: the stub's, the framing's, the pure internal packages',
## the conn core's (internal/session: its conn tests over the in-memory engine,
## nettest through a test face included, and the kernel-TCP lane's; tests
## that need UCX skip), the face's (ucxnet: the public-API suites, nettest
## included, over the in-memory engine), internal/deadline's and the source-shape
## check's (internal/srcsize: every module's file and function sizes, the
## CLI's imports, ucxnet's size and imports). Needs no UCX.
check-builds:
	CGO_ENABLED=0 $(GO) build ./...
	CGO_ENABLED=0 $(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	CGO_ENABLED=0 $(GO) test -count=1 ./internal/cucx/ ./internal/stream/ ./internal/engine/... ./internal/auth/ ./internal/cloexec/ ./internal/procstat/ ./internal/smfifo/ ./internal/statsock/ ./internal/ucxconf/ ./internal/srcsize/ ./internal/lane/ ./internal/deadline/ ./internal/session/ ./ucxnet/

## test: deps, the suite with -race under UCX_TLS=tcp and UCX_TLS=sm
## (test-passes) and, beside it, the no-cgo/darwin builds, go vet and a
## short run of each fuzz target (FUZZTIME each; `make fuzz` runs longer).
## The test runs mostly wait (timers, child processes, peers dying), which
## leaves a CPU free for the builds and the fuzzing.
FUZZTIME ?= 3s
test: deps
	@$(MAKE) --no-print-directory -j2 test-passes builds-vet-fuzz

builds-vet-fuzz: check-builds vet
	@$(MAKE) --no-print-directory fuzz-short

## test-passes: every package's tests with -race under UCX_TLS=tcp, and under
## UCX_TLS=sm those whose outcome can depend on the UCX transport
## (SM_PKGS, less SKIP_sm): the in-memory engine's conn tests (TestMem*),
## the kernel-TCP lane's (TestTCPLane*, which force that lane; TestLaneMixed*,
## whose no-cgo peer has no UCX) and the
## namespace tests (TestNetns*, whose processes set their own UCX_TLS) run
## the same code either way, as do the CLI, the registry, the pure packages
## and the recipes (real clients: their code does not change with the
## transport). scripts/testpasses.sh compiles each test binary once for both
## passes and runs TEST_JOBS (package, pass) pairs at a time; the conn
## core's package (internal/session), the slowest, runs as two processes
## per pass (SPLIT), each with every other test.
TEST_JOBS ?= 4
SPLIT     := ucxnet/ucxnet/internal/session$$
SM_PKGS   := ucxnet/ucxnet/(ucxnet|internal/session|internal/cucx|internal/progress)$$|/compat/
SKIP_sm   := ^(TestMem|TestTCPLane|TestLaneMixed|TestNetns)
TESTPASSES = GO="$(GO)" MODULES="$(MODULES)" TESTFLAGS="-race $(GOFLAGS)" TIMEOUT=$(TEST_TIMEOUT) \
	JOBS=$(TEST_JOBS) SPLIT='$(SPLIT)' ./scripts/testpasses.sh
test-passes: deps
	SKIP_sm='$(SKIP_sm)' $(TESTPASSES) tcp=. 'sm=$(SM_PKGS)'

## test-tcp, test-sm: one pass each, every package, nothing skipped.
test-tcp: deps
	$(TESTPASSES) tcp=.

test-sm: deps
	$(TESTPASSES) sm=.

## check: the inner loop (at most 90 s with a warm build cache): go vet of
## the core module, then its tests without -race under UCX_TLS=tcp, less
## the slow scenarios in CHECK_SKIP: other processes dying or exiting
## (TestPeerDeath*, TestSmPeerDeath*, TestCrossProcess, TestWriteCloseExit,
## the attack children), network namespaces, the soak, the stalled-reader
## and send-buffering bounds. The conn contract (nettest) runs over the
## in-memory engine and over UCX. Left out, and run by `make test`: -race,
## the sm pass, CHECK_SKIP's tests, the CLI (cmd/ucxnet), the nested
## modules, the no-cgo and darwin builds, and fuzzing.
CHECK_PKGS := ./internal/... ./registry/ ./ucxnet/
CHECK_SKIP := ^(TestSoak|TestNetns|TestPeerDeath|TestSmPeerDeath|TestCrossProcess|TestRegistryHTTPCrossProcess|TestWriteCloseExit|TestLaneMixedBuild|TestLaneMixedRelease|TestChurnNoAbort|TestTCPLaneStalledReaderKept|TestAttackSendBufferingPerProcess|TestAttackHugeWindowThenStall|TestAttackForgedAddressFlood|TestAttackRelabelledTransport|TestAttackBadWorkerAddress|TestAttackLoopbackRegistrySquat|TestWriteBacklog|TestIngressFloodFromProcess)
check: deps
	$(GO) vet ./...
	UCX_TLS=tcp $(GO) test -count=1 -timeout 120s -skip '$(CHECK_SKIP)' $(CHECK_PKGS)

## fuzz-short: every `func Fuzz*` in every package of every module, found
## afresh on each run. A run that fails without writing a failing input to
## testdata/fuzz (Go's fuzzer sometimes ends a short run with "context
## deadline exceeded") is run once more; one that wrote one fails.
fuzz-short: deps
	@for m in $(MODULES); do \
		for d in $$(cd $$m && $(GO) list -f '{{.Dir}}' ./...); do \
			for f in $$(cat $$d/*_test.go 2>/dev/null | grep -oE '^func Fuzz[A-Za-z0-9_]*' | sed 's/^func //' | sort -u); do \
				echo "== fuzz $$f ($$d)"; \
				before=$$(ls $$d/testdata/fuzz/$$f 2>/dev/null | wc -l); \
				(cd $$d && $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) .) && continue; \
				if [ "$$(ls $$d/testdata/fuzz/$$f 2>/dev/null | wc -l)" != "$$before" ]; then exit 1; fi; \
				echo "== fuzz $$f failed without a failing input (Go's fuzzer can end a run on its own deadline): once more"; \
				(cd $$d && $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) .) || exit 1; \
			done; \
		done; \
	done

## test-ucx: build UCX $(UCX_VERSION) from its source tarball
## (scripts/build-ucx.sh: once, into a cache; about 10 minutes on 2 CPUs;
## installs autoconf, automake and libtool if missing), then run the cucx,
## progress, session, ucxnet and compat tests against it under UCX_TLS=tcp
## and UCX_TLS=sm:
##   make test-ucx UCX_VERSION=1.18.1 UCX_TARBALL=/path/to/ucx-1.18.1.tar.gz
## The tarball is the release's ucx-VERSION.tar.gz from
## https://github.com/openucx/ucx/releases; without UCX_TARBALL,
## $(UCX_SRC_DIR)/ucx-VERSION.tar.gz (an optional cache), else the script
## says what to download. CGO_CFLAGS/CGO_LDFLAGS name the release too: Go's
## build cache does not see pkg-config's output change, and would reuse
## objects compiled against another release's headers.
UCX_SRC_DIR ?= ../shared/ucx
UCX_VERSION ?=
UCX_TARBALL ?=
UCX_TEST_PKGS ?= ./internal/cucx/ ./internal/progress/ ./internal/session/ ./ucxnet/
UCX_TEST_FLAGS ?= -count=1 -timeout $(TEST_TIMEOUT)
define with-ucx
	@test -n "$(UCX_VERSION)" || { echo "usage: make $@ UCX_VERSION=VERSION [UCX_TARBALL=/path/to/ucx-VERSION.tar.gz]"; \
		echo "  the tarball: https://github.com/openucx/ucx/releases/download/vVERSION/ucx-VERSION.tar.gz"; \
		echo "  without UCX_TARBALL: $(UCX_SRC_DIR)/ucx-VERSION.tar.gz (have: $$(ls $(UCX_SRC_DIR) 2>/dev/null | sed -n 's/^ucx-\(.*\)\.tar\.gz$$/\1/p' | tr '\n' ' '))"; exit 2; }
	@command -v autoreconf >/dev/null && command -v libtoolize >/dev/null || { \
		$(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q autoconf automake libtool; }
	@prefix=$$(UCX_SRC_DIR=$(UCX_SRC_DIR) scripts/build-ucx.sh $(UCX_VERSION) $(UCX_TARBALL)) || exit 1; \
	export PKG_CONFIG_PATH=$$prefix/lib/pkgconfig LD_LIBRARY_PATH=$$prefix/lib PATH=$$prefix/bin:$$PATH \
		CGO_CFLAGS="-O2 -g -I$$prefix/include" CGO_LDFLAGS="-L$$prefix/lib"; \
	echo "UCX $(UCX_VERSION) from $$prefix"; $(1)
endef

test-ucx: deps
	$(call with-ucx,for tls in tcp sm; do \
		echo "== UCX $(UCX_VERSION) UCX_TLS=$$tls"; \
		UCX_TLS=$$tls $(GO) test $(UCX_TEST_FLAGS) $(UCX_TEST_PKGS) || exit 1; \
		for m in $(filter-out .,$(MODULES)); do (cd $$m && UCX_TLS=$$tls $(GO) test $(UCX_TEST_FLAGS) ./...) || exit 1; done; \
	done)

## ucx-build: build UCX $(UCX_VERSION) into scripts/build-ucx.sh's cache
## (~/.cache/ucxnet-ucx, or UCX_PREFIX_ROOT) and nothing else:
##   make ucx-build UCX_VERSION=1.18.1 [UCX_TARBALL=...]
ucx-build:
	$(call with-ucx,true)

## test-mixed: TestLaneMixedRelease: this build's UCX and UCX 1.18.1 (from
## `make ucx-build UCX_VERSION=1.18.1`) in two processes on one host never
## share memory; 4 MiB each way over another lane, whose reason names both
## releases, or ECONNREFUSED with shared memory only. make test runs it too
## when that build is there, and skips it saying so when not.
test-mixed: deps
	for tls in tcp sm; do UCX_TLS=$$tls $(GO) test -count=1 -run 'TestLaneMixedRelease$$' -v ./internal/session/ || exit 1; done

## golden-addresses: store real worker addresses packed by UCX
## $(UCX_VERSION) in internal/cucx/testdata/addr/$(UCX_VERSION)
## (TestRealAddressesValidate with CUCX_UPDATE_TESTDATA set).
golden-addresses: deps
	$(call with-ucx,CUCX_UPDATE_TESTDATA=1 $(GO) test -count=1 -run TestRealAddressesValidate ./internal/cucx/)

## run: build the CLI and run its demo (HTTP over ucxnet between two processes).
run: build
	./$(BIN) demo

bench: build
	./$(BIN) bench

## bench-loopback: ucxnet vs Go TCP over sm and UCX_TLS=tcp, interleaved
## rounds, medians with spread (ROUNDS, DURATION, SIZES; see the script).
bench-loopback: build
	BIN=$(CURDIR)/$(BIN) scripts/loopback-bench.sh

## bench-crosshost: ucxnet vs Go TCP between two simulated hosts (netns +
## veth, as root), UCX lane forced vs the default lane.
bench-crosshost: build
	BIN=$(CURDIR)/$(BIN) scripts/crosshost-bench.sh

fuzz: deps
	$(MAKE) fuzz-short FUZZTIME=60s

clean:
	rm -rf bin
