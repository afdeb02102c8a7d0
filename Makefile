GO ?= go
SHELL := /bin/bash

.PHONY: all test vet print-modules bench bench-peers bench-plot demo build fuzz chaos

all: test

# Every module in the repository, each with its own go.mod: the library; the
# command (golang.org/x/term, the Prometheus client); the Prometheus exporter;
# the NATS JetStream store (nats.go, nats-server run in process by its tests);
# the peer benchmarks (NATS, franz-go, gonum/plot). `go test ./...` stops at a
# nested go.mod, so test and vet visit each one.
MODULES = . cmd/inflight metrics/prometheus store/natsjs bench/peers

## test: vet and gofmt, then every test of every module with the race detector
test: vet
	@failed=; for m in $(MODULES); do \
		echo "== go test -race $$m"; \
		(cd $$m && $(GO) test -race -count=1 ./...) || failed="$$failed $$m"; \
	done; \
	echo "== go test -tags purego ./wire/... ./store/file"; \
	$(GO) test -count=1 -tags purego ./wire/... ./store/file || failed="$$failed purego"; \
	if [ -n "$$failed" ]; then echo "FAIL in:$$failed"; exit 1; fi

print-modules:
	@echo $(MODULES)

# vet also type-checks every module, tests included, for the other systems
# its users build on (CROSS_GOOS): a file for Linux only that a build
# constraint did not keep to Linux breaks the build there, and nothing else
# here runs on them.
# wire/crc32c has assembly for amd64 and Go elsewhere: its other side
# is vetted for arm64, and test runs wire and store/file with the purego
# tag, which keeps it to Go.
CROSS_GOOS = darwin windows
vet:
	@set -e; for m in $(MODULES); do \
		echo "== go vet $$m"; \
		(cd $$m && $(GO) vet ./...); \
		for os in $(CROSS_GOOS); do \
			echo "== GOOS=$$os go vet $$m"; \
			(cd $$m && GOOS=$$os $(GO) vet ./...); \
		done; \
	done
	@echo "== GOARCH=arm64 go vet ./wire/crc32c"; GOARCH=arm64 $(GO) vet ./wire/crc32c
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	 if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: the inflight suite in bench/ (ring, end to end, churn, fixed rate, a BENCH_RSS-long RSS run, 0 skips it):
## benchstat-friendly text in $(BENCH_OUT)/bench.txt, a Markdown table in $(BENCH_OUT)/bench.md
BENCH_OUT ?= bench-out
bench_out = $(abspath $(BENCH_OUT))
BENCHTIME ?= 1s
BENCH ?= .
BENCH_RSS ?= 60s
bench:
	@mkdir -p $(BENCH_OUT)
	set -o pipefail; $(GO) test ./bench/ -count=1 -v -run='^TestRSSBound$$' -bench.rss=$(BENCH_RSS) | grep -E 'RSS|^(ok|FAIL|---)'
	set -o pipefail; $(GO) test -run=NONE -bench='$(BENCH)' -benchtime=$(BENCHTIME) -timeout=60m ./bench/ | tee $(BENCH_OUT)/bench.txt
	set -o pipefail; $(GO) run ./bench/benchtable $(BENCH_OUT)/bench.txt | tee $(BENCH_OUT)/bench.md

## bench-peers: inflight next to NATS JetStream and franz-go/kfake (bench/peers, its own module)
PEERS_BENCHTIME ?= 1s
bench-peers:
	@mkdir -p $(BENCH_OUT)
	set -o pipefail; cd bench/peers && $(GO) test -run=NONE -bench=Peers -benchtime=$(PEERS_BENCHTIME) -timeout=60m . | tee $(bench_out)/peers.txt
	set -o pipefail; $(GO) run ./bench/benchtable $(BENCH_OUT)/peers.txt | tee $(BENCH_OUT)/peers.md

## bench-plot: throughput vs payload size and the latency CDF, as PNGs in docs/
bench-plot:
	cd bench/peers && $(GO) run ./cmd/plot -out ../../docs

## demo: the main job: a producer against an embedded broker killed every 2s
demo:
	cd cmd/inflight && $(GO) run . demo

## build: the inflight command into bin/, its version from git (see `inflight version`)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
build:
	cd cmd/inflight && $(GO) build -ldflags '-X main.version=$(VERSION)' -o ../../bin/inflight .

## fuzz: run every fuzz target for FUZZTIME each (go test runs their seed corpora always)
FUZZTIME ?= 60s
FUZZ_TARGETS = wire:FuzzDecode wire:FuzzBatchBuilder wire:FuzzDecompress wire:FuzzCompressRoundTrip \
	broker:FuzzSession store/file:FuzzReplay core:FuzzProducerInbound wire/crc32c:FuzzUpdate
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$fn ($$pkg)"; \
		$(GO) test -run=NONE -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) ./$$pkg/ || exit 1; \
	done

## chaos: thousands of chaos seeds over mem, over tcp and over stdnet with TLS (make test runs 200 + 30 + 10)
CHAOS_SEEDS ?= 5000
chaos:
	set -o pipefail; $(GO) test . -count=1 -v -run 'TestChaos' -chaos.seeds=$(CHAOS_SEEDS) \
		-chaos.tcpseeds=$$(( $(CHAOS_SEEDS) / 10 )) -chaos.tlsseeds=$$(( $(CHAOS_SEEDS) / 10 )) -timeout 60m 2>&1 | grep -E 'seeds:|reproduce|FAIL|^ok'
