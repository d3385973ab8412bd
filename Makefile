# hg: build, test, bench and demo. Every target works on a fresh machine
# with Go 1.26 and nothing else (make test installs Debian's chromium for
# the browser tests when it is missing).

GO      ?= go
BIN     ?= bin/hg
PKGS    := ./...
FUZZTIME ?= 3s

.PHONY: all build test test-short fuzz bench fmt vet demo clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/hg

# test: vet, the race-checked unit, conformance and CLI script tests, and a
# short run of every fuzz target on top of its seed corpus. Confinement of
# exec steps is required: its tests fail, not skip, where it cannot be had;
# so is a Chromium for the browser tests of hg serve, which
# scripts/chromium.sh installs (Debian's package) when it is missing.
test: vet
	@sh ./scripts/chromium.sh
	HG_REQUIRE_CONFINEMENT=1 HG_REQUIRE_BROWSER=1 $(GO) test -race -count=1 -timeout 30m $(PKGS)
	$(MAKE) --no-print-directory fuzz

test-short:
	$(GO) test -count=1 -short $(PKGS)

# fuzz runs each fuzz target briefly; FUZZTIME=1m make fuzz for longer. A run
# that ends only in the engine's own "context deadline exceeded", with no
# failing input, is an engine hiccup on a loaded machine and is run again once.
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "fuzz $$pkg $$f"; \
	    ok=0; for try in 1 2; do \
	      if $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg >.fuzz.out 2>&1; then ok=1; break; fi; \
	      grep -q 'context deadline exceeded' .fuzz.out && ! grep -q 'Failing input' .fuzz.out || break; \
	      echo "  the fuzzing engine missed its own deadline (no failing input): once more"; \
	    done; \
	    [ $$ok = 1 ] || { tail -n 40 .fuzz.out; rm -f .fuzz.out; exit 1; }; \
	  done; \
	done; rm -f .fuzz.out

# bench prints the figures of docs/performance.md's targets, measured in one sitting.
# The scheduler's 100,000-node runs are part of it (several minutes).
bench:
	HG_BENCH_100K=1 $(GO) test -run '^$$' -bench . -benchtime 1x -count 1 -timeout 60m $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1)

# demo: a tree round trip, a Work Order and its report, the run verified
# from a bundle alone, a replay, and decisions asked once per task class.
demo: build
	@sh ./scripts/demo.sh $(BIN)

clean:
	rm -rf bin
