GO ?= go

.PHONY: all test vet bench demo build fuzz

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

## fuzz: run each fuzz target for FUZZTIME (default 30s)
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run=NONE -fuzz=FuzzDecode -fuzztime=$(FUZZTIME) ./wire/
	$(GO) test -run=NONE -fuzz=FuzzBatchBuilder -fuzztime=$(FUZZTIME) ./wire/
