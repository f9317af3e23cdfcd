# Developer and CI entry points. CI runs .ci/run, which runs `make test`.
#
# Engine tests run against a real Docker engine: `engine` makes sure one
# answers (and that /bin/busybox, which the test images are made of, is
# there), starting one as root on Debian; see scripts/engine.sh.

# Root shells may lack the Go toolchain on their PATH.
export PATH := $(PATH):/usr/local/go/bin

GO ?= go
# Flags of `go test` in `make test`. Provisional: the final set (a -timeout,
# -p 1 where packages share the engine on 2 cores, …) is tuned elsewhere.
GOTESTFLAGS ?= -race -count=1
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 10s
# GOOS/GOARCH pairs that `cross` builds; the module must build for all.
PLATFORMS ?= linux/amd64 darwin/amd64 windows/amd64 linux/arm64 darwin/arm64

.PHONY: engine test lint cross fuzz demo e2e clean clean-images

engine:
	bash scripts/engine.sh

test: engine
	$(GO) vet ./...
	$(GO) test $(GOTESTFLAGS) ./...

lint:
	@files=$$(gofmt -l .); \
	if [ -n "$$files" ]; then echo "gofmt -l: not formatted:"; echo "$$files"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

cross:
	@set -e; for p in $(PLATFORMS); do \
		echo "CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build ./..."; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./...; \
	done

# Every Fuzz target of ./ledger, FUZZTIME each: `go test -fuzz` takes one
# target at a time, and listing them picks up new ones.
fuzz:
	@set -e; list=$$($(GO) test -list '^Fuzz' ./ledger); \
	targets=$$(printf '%s\n' "$$list" | grep '^Fuzz' || true); \
	if [ -z "$$targets" ]; then echo "fuzz: no Fuzz targets in ./ledger"; exit 0; fi; \
	for t in $$targets; do \
		echo "go test -run='^$$' -fuzz='^$$t$$' -fuzztime=$(FUZZTIME) ./ledger"; \
		$(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) ./ledger; \
	done

demo: engine
	$(GO) run ./cmd/rightsize demo

# The long end-to-end suite (placeholder flags).
e2e: engine
	$(GO) test -count=1 -timeout 60m ./e2e/ -run . -args -full

clean:
	$(GO) clean ./...
	rm -f coverage.out coverage.html

# The test images (internal/testimage) stay on the engine between runs on
# purpose; this removes those no container uses. They are rebuilt on demand.
clean-images:
	docker image prune --all --force --filter label=dev.rightsize.test-image=1
