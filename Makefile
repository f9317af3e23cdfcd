# Developer and CI entry points. CI runs .ci/run, which runs `make test`.
#
# Engine tests run against a real Docker engine: `engine` makes sure one
# answers, starting one as root on Debian (with busybox-static, which the
# test images are made of; elsewhere they take busybox from an image); see
# scripts/engine.sh.

# Root shells may lack the Go toolchain on their PATH.
export PATH := $(PATH):/usr/local/go/bin

GO ?= go
# Flags of `go test` in `make test`: the race detector on, no cached
# results (tests talk to a live engine), and a bound well above the slowest
# package, so that a hang fails, and a loaded machine does not: the root
# package (every test binary run with -short under four backends) takes
# 10-12 min here, 15 min with one more busy core beside it.
GOTESTFLAGS ?= -race -count=1 -timeout 30m
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME ?= 10s
# GOOS/GOARCH pairs that `cross` builds; the module must build for all.
PLATFORMS ?= linux/amd64 darwin/amd64 windows/amd64 linux/arm64 darwin/arm64

.PHONY: engine test test-podman podman-gate kube kube-gate windows-gate lint cross fuzz demo e2e clean clean-images chaos chaos-short

engine:
	bash scripts/engine.sh

# The whole gate: the lint, then every test against the real engine and
# the short chaos pass, then the gates of the other engines and systems.
# The chaos pass runs alone: beside the Podman gate (a run on 2026-12-05,
# the load 11), Podman 4.3 answered no `docker info` within the 15 s a
# test's start allows. The gates run one after another: beside the
# others (the Kubernetes gate building and running its -race tests) a
# loaded Podman 4.3 failed the Podman gate three times in two days on
# waits sized for it alone (a watchdog's 10 s, a sweep's 5 s budget, a
# keep-alive's 3 s time-to-live, a user's 20 s -timeout). Each gate has
# an engine of its own (Podman's service, the Kubernetes test cluster,
# msb, Wine with this machine's Docker engine). One after another the
# four took 18.8 min of a 39.6 min `make test`; two at a time 16.0 min
# (BENCHMARKS.md, Test runs). `make GATEJOBS=2 test` runs two at a time,
# each gate's output printed whole when it ends (--output-sync, GNU make
# 4; macOS's make 3.81 has none, and there their lines mix); `make
# GATES=podman-gate test` runs fewer.
GATES ?= podman-gate kube-gate msb-gate windows-gate
GATEJOBS ?= 1
GATESYNC := $(if $(filter 3.%,$(MAKE_VERSION)),,--output-sync=recurse)
test: lint engine
	$(GO) test $(GOTESTFLAGS) ./...
	@$(MAKE) --no-print-directory chaos-short
	@$(MAKE) --no-print-directory -j$(GATEJOBS) $(GATESYNC) $(GATES)

# The Podman gate, in `make test` on Linux wherever Podman is installed or
# can be (root on Debian installs it): the engine tests against Podman's
# service (test-podman below: root's, or as another user that user's
# rootless one), then, as root, the crash row as a throw-away unprivileged
# user against rootless Podman (where user namespaces and /dev/net/tun
# allow). The engine-side keeper's rows run against root's Podman too
# (PODMANKEEPERROWS: its socket mounted into the keeper), row 19's three
# deaths of the machine against a second Podman service of its own, and
# GuardAll's rows of images built and volumes made through its proxy
# (the fixture's and the user's module's), which take Podman's answers
# about a removal under way as not yet gone; and a user's own test binary
# (internal/usermod) killed three ways, told where its sandboxes came
# from, and its keep-alives' leases expiring (about a minute more).
# Where Podman cannot be had, or its service cannot be brought up, it says
# so and passes; a test that fails against it fails the gate.
# RIGHTSIZE_SKIP_PODMAN=1 skips it.
PODMANROWS ?= TestWatchdogAfterSIGKILL
PODMANKEEPERROWS ?= ^(TestKeeper|TestRow19|TestGuardAllBuildAndVolume|TestUserModuleGuardAllBuildAndVolume|TestUserModuleDies|TestUserModuleOrigin|TestRowKeepAliveTTL)
podman-gate:
	@if [ -n "$$RIGHTSIZE_SKIP_PODMAN" ]; then echo "podman gate: skipped (RIGHTSIZE_SKIP_PODMAN is set)"; exit 0; fi; \
	if ! bash scripts/podman.sh available; then echo "podman gate: skipped (make test-podman runs it where Podman is)"; exit 0; fi; \
	if ! bash scripts/podman.sh start >/dev/null; then echo "podman gate: skipped: Podman's API service could not be brought up here (the reason is above)"; exit 0; fi; \
	$(MAKE) --no-print-directory test-podman || exit 1; \
	$(MAKE) --no-print-directory test-podman PODMANPKGS=./e2e/ PODMANRUNRE='$(PODMANKEEPERROWS)' || exit 1; \
	if bash scripts/podman.sh rootless-ready; then \
		$(MAKE) --no-print-directory test-podman PODMANRUN=rootless PODMANPKGS=./sandboxtest/ PODMANRUNRE='$(PODMANROWS)'; \
	else echo "podman gate: the rootless row is skipped here"; fi

# The Kubernetes test cluster (scripts/kube.sh): builds kube-apiserver,
# kube-controller-manager, kube-scheduler and kubelet once into the cache
# folder, starts etcd, the control plane and, where one can run, a node on
# loopback, and prints the kubeconfig; `bash scripts/kube.sh stop` stops
# it.
kube:
	@bash scripts/kube.sh build
	@bash scripts/kube.sh start

# The Kubernetes gate, in `make test` on Linux: the tests of KUBEPKGS
# against the test cluster. Where a node runs (root on Linux: kube.sh
# installs containerd, runc and the CNI plugins on Debian), its pods really
# run, and the node's tests get its containerd socket in
# RIGHTSIZE_TEST_KUBE_NODE to import their images; elsewhere pods are
# stored and garbage-collected, never run, and those tests skip saying so.
# It runs when the binaries are in the cache
# (~/.cache/rightsize-kube/<version>/) or can be built within KUBEBUDGET
# seconds: a cold build took 9 min 16 s here on 2 cores (2026-12-03), and
# CI (a fresh clone, 90 min, `make test` about 8 min without this gate) has
# the time. Where it cannot run, or the build goes past the budget, or the
# cluster cannot be started, it says why and passes; a test that fails
# against the cluster fails the gate. It stops the cluster after, unless
# one was up before. RIGHTSIZE_SKIP_KUBE=1 skips it. The command line's
# package is among them for its cluster tests; its Docker engine tests,
# which the whole run above has run, skip here
# (RIGHTSIZE_SKIP_ENGINE_TESTS=1).
KUBEPKGS ?= ./internal/kubetest/ ./internal/backend/kubernetes/ ./backend/kubernetes/ ./cmd/rightsize/
KUBEBUDGET ?= 1800
kube-gate:
	@if [ -n "$$RIGHTSIZE_SKIP_KUBE" ]; then echo "kube gate: skipped (RIGHTSIZE_SKIP_KUBE is set)"; exit 0; fi; \
	if ! bash scripts/kube.sh available; then echo "kube gate: skipped (the reason is above)"; exit 0; fi; \
	if ! RIGHTSIZE_KUBE_BUILD_BUDGET=$(KUBEBUDGET) bash scripts/kube.sh build; then \
		echo "kube gate: skipped: the binaries could not be built within $(KUBEBUDGET)s (the reason is above; \`make kube\` builds them without a bound)"; exit 0; fi; \
	up=; bash scripts/kube.sh status && up=1; \
	kc=$$(bash scripts/kube.sh start) || { echo "kube gate: skipped: the cluster could not be started (the reason is above)"; exit 0; }; \
	node=$$(bash scripts/kube.sh node) || node=; \
	echo "RIGHTSIZE_TEST_KUBECONFIG=$$kc RIGHTSIZE_TEST_KUBE_NODE=$$node RIGHTSIZE_SKIP_ENGINE_TESTS=1 go test $(GOTESTFLAGS) $(KUBEPKGS)"; \
	RIGHTSIZE_TEST_KUBECONFIG=$$kc RIGHTSIZE_TEST_KUBE_NODE=$$node RIGHTSIZE_SKIP_ENGINE_TESTS=1 $(GO) test $(GOTESTFLAGS) $(KUBEPKGS); rc=$$?; \
	[ -n "$$up" ] || bash scripts/kube.sh stop; exit $$rc

# The msb gate, in `make test`: the msb backend's tests against the real
# msb, microsandbox's command line, of the release scripts/msb.sh pins,
# installed from the npm registry into ~/.cache/rightsize-msb/<version>/
# once, each test with an msb home of its own. It says which msb it ran
# against and whether a microVM boots here (where none does, it says why:
# everything up to the boot runs against the real msb, what needs a booted
# sandbox against the stand-in), then which tests skipped, with why.
# Where msb cannot be had it says why and passes; a test that fails
# against it fails the gate. RIGHTSIZE_SKIP_MSB=1 skips it.
MSBPKGS ?= ./internal/backend/msb/
.PHONY: msb-gate
msb-gate:
	@bash scripts/msb.sh gate "$(GO)" "$(GOTESTFLAGS)" $(MSBPKGS)

# The Windows gate, in `make test` on x86-64 Linux wherever Wine is
# installed or can be (root on Debian installs wine64 and MinGW-w64): the
# Windows test binaries of the ledger, the reaper, the memory and Docker
# backends and sandboxtest, run under Wine (scripts/wine.sh says what runs
# and how): the native watchdog, the sweep and the crash rows with no
# engine, then against this machine's Docker engine over TCP on loopback.
# It prints Wine's version and every test it skipped, with why; what Wine
# cannot run is listed in scripts/wine/skips. Where Wine cannot be had it
# says so and passes; a test that fails under Wine fails the gate.
# RIGHTSIZE_SKIP_WINE=1 skips it.
windows-gate:
	@if [ -n "$$RIGHTSIZE_SKIP_WINE" ]; then echo "windows gate: skipped (RIGHTSIZE_SKIP_WINE is set)"; exit 0; fi; \
	if ! bash scripts/wine.sh available; then echo "windows gate: skipped (the reason is above)"; exit 0; fi; \
	GO=$(GO) bash scripts/wine.sh gate

# The engine tests against Podman's Docker-compatible API instead: a
# `podman system service` on a socket of its own (scripts/podman.sh
# installs podman as root on Debian, starts it, and stops it after). One
# package at a time: Podman 4.3 answers nothing for seconds while a build
# of one package holds its storage, and another package's engine
# questions (a 3 s version check, a 15 s resolution) would run out.
# PODMANRUN=rootless runs them as a throw-away unprivileged user against
# that user's rootless service.
# PODMANRUNRE picks tests by name (go test's -run), for example
# `make test-podman PODMANRUN=rootless PODMANPKGS=./sandboxtest/
# PODMANRUNRE=TestWatchdogAfterSIGKILL` for the rootless crash row.
PODMANPKGS ?= ./internal/backend/docker/ ./sandboxtest/ ./internal/reaper/ ./internal/keeper/
PODMANRUNRE ?= .
test-podman:
	@if [ "$(PODMANRUN)" = rootless ]; then \
		bin=$$(mktemp -d /tmp/rz-podman-tests.XXXXXX) && chmod 755 $$bin && \
		for p in $(PODMANPKGS); do n=$$(basename $$p); \
			$(GO) test -c -o $$bin/$$n.test $$p || exit 1; echo $(CURDIR)/$$p > $$bin/$$n.dir; done; \
		chmod 755 $$bin/*.test; \
		bash scripts/podman.sh rootless -- sh -c 'rc=0; for b in '"$$bin"'/*.test; do echo "$$b"; (cd "$$(cat "$${b%.test}.dir")" && "$$b" -test.count=1 -test.timeout=20m -test.run='"'$(PODMANRUNRE)'"') || rc=1; done; exit $$rc'; rc=$$?; \
		rm -rf $$bin; exit $$rc; \
	else \
		host=$$(bash scripts/podman.sh start) || exit 1; \
		echo "DOCKER_HOST=$$host go test -p 1 -count=1 $(PODMANPKGS)"; \
		CONTAINERS_CONF=$$(bash scripts/podman.sh conf) DOCKER_HOST=$$host $(GO) test -p 1 -count=1 -timeout 20m -run '$(PODMANRUNRE)' $(PODMANPKGS); rc=$$?; \
		bash scripts/podman.sh stop; exit $$rc; \
	fi

# gofmt, a tidy module, then go vet and staticcheck as each of the three
# systems sees the code (platform files and tests differ).
lint:
	@files=$$(gofmt -l .); \
	if [ -n "$$files" ]; then echo "gofmt -l: not formatted:"; echo "$$files"; exit 1; fi
	$(GO) mod tidy -diff
	GOBIN=$(CURDIR)/.bin $(GO) install $(STATICCHECK)
	@set -e; for os in linux darwin windows; do \
		echo "GOOS=$$os go vet ./... && GOOS=$$os staticcheck ./..."; \
		GOOS=$$os $(GO) vet ./...; \
		GOOS=$$os .bin/staticcheck ./...; \
	done

cross:
	@set -e; for p in $(PLATFORMS); do \
		echo "CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build ./..."; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./...; \
	done

# Every Fuzz target of FUZZPKGS, FUZZTIME each: `go test -fuzz` takes one
# target at a time, and listing them picks up new ones.
FUZZPKGS ?= ./ledger ./internal/ledger ./internal/isotime ./internal/names
fuzz:
	@set -e; for p in $(FUZZPKGS); do \
		list=$$($(GO) test -list '^Fuzz' $$p); \
		targets=$$(printf '%s\n' "$$list" | grep '^Fuzz' || true); \
		if [ -z "$$targets" ]; then echo "fuzz: no Fuzz targets in $$p"; continue; fi; \
		for t in $$targets; do \
			echo "go test -run='^$$' -fuzz='^$$t$$' -fuzztime=$(FUZZTIME) $$p"; \
			$(GO) test -run='^$$' -fuzz="^$$t$$" -fuzztime=$(FUZZTIME) $$p; \
		done; \
	done

# The demo. Its command line is compiled while scripts/engine.sh brings up
# an engine (apt and dockerd, on a fresh machine): the first run takes the
# longer of the two, not their sum, and on a fresh machine the compile is
# the longer (an empty build cache: about 32 s of it is the standard
# library). So the demo's binary is built for a short compile, not for
# speed: without the kubernetes backend (-tags rightsize_nokube), which it
# does not use and whose client-go was most of the compile; without the
# compiler's optimisations and inlining (-gcflags=all=-N -l: 54 s to 42 s
# on 2 cores, and the demo waits on the engine, not on its own code); and
# without cgo, which it does not need. BENCHMARKS.md, "make demo".
DEMOBUILD ?= -tags rightsize_nokube -gcflags='all=-N -l'
demo:
	@mkdir -p .bin; \
	CGO_ENABLED=0 $(GO) build $(DEMOBUILD) -o .bin/rightsize-demo ./cmd/rightsize & b=$$!; \
	bash scripts/engine.sh || { wait $$b; exit 1; }; \
	wait $$b || exit 1; \
	exec .bin/rightsize-demo demo

# The crash matrix's long rows with their full counts: row 8 (100 sweeping
# rounds beside two live owners) and row 12 (200 random kills); -full is a
# flag of the ./e2e test binary. `make test` runs every row of ./e2e, these
# two with reduced counts (10 rounds, 10 kills). E2ERUN=. runs the whole
# matrix with the full counts.
E2ERUN ?= TestRow08|TestRow12
E2EFLAGS ?= -v
e2e: engine
	$(GO) test -count=1 -timeout 60m $(E2EFLAGS) -run '$(E2ERUN)' ./e2e/ -args -full

clean:
	$(GO) clean ./...
	rm -f coverage.out coverage.html

# The test images (internal/testimage) stay on the engine between runs on
# purpose; this removes those no container uses. They are rebuilt on demand.
clean-images:
	docker image prune --all --force --filter label=dev.rightsize.test-image=1

# The chaos harness (e2e/chaos, docs/chaos.md): owners of sandboxes die at
# random beside sweeps and engine faults, every invariant of the reaper
# checked as they go and at the end; it exits 1 on any violation and
# prints the seed that replays it. `make test` runs the short pass: each
# backend with CHAOSSEED and with a random seed it prints. `make chaos`
# runs the long counts: the memory backend 10,000 deaths, Docker 1,000
# without faults and 1,000 with them (engine restarts included), Podman
# 200 (where scripts/podman.sh can bring it up). CHAOSFLAGS is added to
# every run (-v, -keep, -strict).
CHAOSSEED ?= 1
CHAOSFLAGS ?=
CHAOS = $(GO) run ./e2e/chaos $(CHAOSFLAGS)
chaos-short: engine
	$(CHAOS) -backend memory -deaths 300 -seed $(CHAOSSEED)
	$(CHAOS) -backend memory -deaths 300 -seed 0
	$(CHAOS) -backend docker -deaths 30 -seed $(CHAOSSEED) -faults -restart-every 0
	$(CHAOS) -backend docker -deaths 30 -seed 0 -faults -restart-every 0

chaos: engine
	$(CHAOS) -backend memory -deaths 10000 -seed $(CHAOSSEED)
	$(CHAOS) -backend docker -deaths 1000 -seed $(CHAOSSEED)
	$(CHAOS) -backend docker -deaths 1000 -seed $(CHAOSSEED) -faults
	@if [ -n "$$RIGHTSIZE_SKIP_PODMAN" ] || ! bash scripts/podman.sh available; then echo "chaos: podman skipped (no Podman here, or RIGHTSIZE_SKIP_PODMAN)"; exit 0; fi; \
	host=$$(bash scripts/podman.sh start) || { echo "chaos: podman skipped: its service could not be brought up"; exit 0; }; \
	CONTAINERS_CONF=$$(bash scripts/podman.sh conf) DOCKER_HOST=$$host $(CHAOS) -backend podman -deaths 200 -seed $(CHAOSSEED) -faults; rc=$$?; \
	bash scripts/podman.sh stop; [ $$rc = 0 ] || exit $$rc; \
	if [ -n "$$RIGHTSIZE_SKIP_KUBE" ] || ! bash scripts/kube.sh available || ! bash scripts/kube.sh build; then echo "chaos: kubernetes skipped (no test cluster here, or RIGHTSIZE_SKIP_KUBE)"; exit 0; fi; \
	up=; bash scripts/kube.sh status && up=1; \
	kc=$$(bash scripts/kube.sh start) && node=$$(bash scripts/kube.sh node) || { echo "chaos: kubernetes skipped: the cluster or its node could not be started"; [ -n "$$up" ] || bash scripts/kube.sh stop; exit 0; }; \
	RIGHTSIZE_TEST_KUBECONFIG=$$kc RIGHTSIZE_TEST_KUBE_NODE=$$node $(CHAOS) -backend kubernetes -deaths 100 -seed $(CHAOSSEED) -faults; rc=$$?; \
	[ -n "$$up" ] || bash scripts/kube.sh stop; exit $$rc
