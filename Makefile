# ucxnet: the README's two commands are `make run` and `make test`.
GO        ?= go
GOFLAGS   ?=
BIN       := bin/ucxnet
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
TEST_TIMEOUT ?= 600s
# Module folders: the core module and the nested ones that exist.
MODULES   := . $(patsubst %/go.mod,%,$(wildcard compat/*/go.mod))

.PHONY: all deps build vet test test-tcp test-sm run bench fuzz clean

all: build

## deps: install UCX (libucx-dev, ucx-utils) with apt-get when pkg-config cannot find it.
deps:
	@if pkg-config --exists ucx && command -v ucx_info >/dev/null 2>&1; then \
		echo "deps: UCX $$(pkg-config --modversion ucx) found"; \
	else \
		echo "deps: installing libucx-dev ucx-utils"; \
		$(SUDO) apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q libucx-dev ucx-utils pkg-config; \
	fi

build: deps
	$(GO) build $(GOFLAGS) -o $(BIN) ./cmd/ucxnet

vet: deps
	@for m in $(MODULES); do echo "vet $$m"; (cd $$m && $(GO) vet ./...) || exit 1; done

## test: deps, go vet, then the whole suite with -race under UCX_TLS=tcp and UCX_TLS=sm.
test: vet test-tcp test-sm

test-tcp: deps
	@for m in $(MODULES); do echo "== UCX_TLS=tcp $$m"; \
		(cd $$m && UCX_TLS=tcp $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...) || exit 1; done

test-sm: deps
	@for m in $(MODULES); do echo "== UCX_TLS=sm $$m"; \
		(cd $$m && UCX_TLS=sm $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...) || exit 1; done

## run: build the CLI and run its demo (HTTP over ucxnet between two processes).
run: build
	./$(BIN) demo

bench: build
	./$(BIN) bench

fuzz: deps
	$(GO) test -run='^$$' -fuzz=FuzzDecodeHeader -fuzztime=30s ./internal/stream/
	$(GO) test -run='^$$' -fuzz=FuzzHello -fuzztime=30s ./internal/stream/
	$(GO) test -run='^$$' -fuzz=FuzzReassembly -fuzztime=30s ./internal/stream/

clean:
	rm -rf bin
