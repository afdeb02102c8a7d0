GO ?= go
SHELL := /bin/bash

.PHONY: all test vet bench demo build fuzz chaos

all: test

## test: vet, then every test with the race detector
test: vet
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	 if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: the library's benchmarks
bench:
	$(GO) test -run=NONE -bench=. -benchmem ./...

## demo: the main job: a producer against an embedded broker killed every 2s
demo:
	$(GO) run ./cmd/inflight demo

## build: the inflight command into bin/
build:
	$(GO) build -o bin/inflight ./cmd/inflight

## fuzz: run every fuzz target for FUZZTIME each (go test runs their seed corpora always)
FUZZTIME ?= 60s
FUZZ_TARGETS = wire:FuzzDecode wire:FuzzBatchBuilder wire:FuzzDecompress wire:FuzzCompressRoundTrip \
	broker:FuzzSession broker:FuzzFileStoreReplay core:FuzzProducerInbound
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "== $$fn ($$pkg)"; \
		$(GO) test -run=NONE -fuzz="^$$fn$$" -fuzztime=$(FUZZTIME) ./$$pkg/ || exit 1; \
	done

## chaos: thousands of chaos seeds over mem and over tcp (make test runs 200 + 30)
CHAOS_SEEDS ?= 5000
chaos:
	set -o pipefail; $(GO) test -count=1 -v -run 'TestChaos' -chaos.seeds=$(CHAOS_SEEDS) \
		-chaos.tcpseeds=$$(( $(CHAOS_SEEDS) / 10 )) -timeout 60m . 2>&1 | grep -E 'seeds:|reproduce|FAIL|^ok'
