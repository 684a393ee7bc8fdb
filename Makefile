# foreman — see README.md. Every target works on a fresh Debian 12 machine after .ci/run's installs.
GO        ?= go
BIN       := bin/foreman
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Static binary: cgo is required by libcontainer's nsenter; netgo/osusergo keep libc's resolver and
# user lookups out so the static link is clean (see shared/reference/libcontainer.md §3);
# urfave_cli_no_docs drops the CLI's markdown/man generator, whose package init (~1 ms) every start
# of the binary paid: CLI, supervisor, container init and shim.
TAGS      := netgo osusergo urfave_cli_no_docs
LDFLAGS   := -s -w -X main.version=$(VERSION) -linkmode external -extldflags -static
TESTFLAGS ?= -count=1 -timeout 25m
# make fuzz: how long each fuzz target runs; make test fuzzes each for FUZZSMOKE.
FUZZTIME  ?= 60s
FUZZSMOKE ?= 2s

.PHONY: release build run test test-python test-deps lint fuzz bench cluster cluster-stop jepsen jepsen-smoke jepsen-secure storm clean

build:
	CGO_ENABLED=1 $(GO) build -trimpath -tags '$(TAGS)' -ldflags '$(LDFLAGS)' -o $(BIN) .

# Release artifacts into dist/ (README "Releases"): static linux/amd64 and linux/arm64 binaries,
# tarballs, Debian packages, an OCI image layout tarball and SHA256SUMS, the same bytes from the
# same commit. VERSION must be given (vX.Y.Z); the default above is for `make build` only.
release:
	@$(GO) build -o bin/foreman-release ./release/cmd/release
	@bin/foreman-release -version '$(if $(filter command line environment,$(origin VERSION)),$(VERSION))' -tags '$(TAGS)'

# A single-node dev agent on 127.0.0.1:7070 with a temporary data dir.
run: build
	$(BIN) agent --dev

# The whole suite (unit, package, in-process cluster, system tests, jepsen smoke), after lint,
# then a short fuzzing smoke of every fuzz target (plain go test already replays their corpora).
# test-deps installs what the suite needs (ip, iptables, ...) when missing, as root on Debian,
# or fails with the command to run: the suite must run, not skip, on a fresh machine.
test: test-deps lint build
	FOREMAN_BIN=$(CURDIR)/$(BIN) CGO_ENABLED=1 $(GO) test $(TESTFLAGS) -p 2 ./...
	GO=$(GO) FUZZTIME=$(FUZZSMOKE) ./scripts/fuzz.sh
	$(MAKE) --no-print-directory test-python

# The Python SDK's tests (clients/python) against dev agents of bin/foreman. Debian's pip refuses
# the system Python (PEP 668), so: a venv that sees Debian's pytest and setuptools, the package
# installed into it offline from a copy (the tree stays clean), pytest bounded by PYTEST_LIMIT.
PYTHON       ?= /usr/bin/python3
PYVENV       := bin/python-venv
PYTEST_LIMIT ?= 110
test-python: build
	rm -rf $(PYVENV)
	$(PYTHON) -m venv --system-site-packages --without-pip $(PYVENV)
	cp -r clients/python $(PYVENV)/src
	rm -rf $(PYVENV)/src/build $(PYVENV)/src/*.egg-info # a stale in-tree build would be installed
	$(PYVENV)/bin/python -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-build-isolation --no-index --no-deps $(PYVENV)/src
	FOREMAN_BIN=$(CURDIR)/$(BIN) PYTHONDONTWRITEBYTECODE=1 timeout -k 10 $(PYTEST_LIMIT) $(PYVENV)/bin/python -m pytest -q clients/python

test-deps:
	./scripts/test-deps.sh

# Fails when go.mod/go.sum are not tidy (prints the diff), gofmt would change a file (lists it),
# or go vet reports anything, in the default build and with the jepsen clock hook.
GOFILES = $$(git ls-files --cached --others --exclude-standard '*.go')
lint:
	$(GO) mod tidy -diff
	@test -z "$$(gofmt -l $(GOFILES))" || (echo "gofmt would change:"; gofmt -l $(GOFILES); exit 1)
	$(GO) vet ./...
	$(GO) vet -tags jepsenclock ./...

# Every fuzz target for FUZZTIME each, one after the other (FUZZ=regexp picks targets); a
# failing input lands in <package>/testdata/fuzz/<target>/ (docs/security.md, "Fuzzing").
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

bench: build
	FOREMAN_BIN=$(CURDIR)/$(BIN) ./scripts/bench.sh

# Three local agents on 127.0.0.1:7070/7080/7090, data under ./.cluster (stop with make cluster-stop).
# TLS=1 make cluster: HTTPS, mutual TLS between agents and encrypted gossip (certificates in .cluster/tls).
cluster: build
	./scripts/cluster.sh start

cluster-stop:
	./scripts/cluster.sh stop

# FOREMAN_JEPSEN_SECURE=1 make jepsen: the whole matrix with ACL and TLS on (make jepsen-secure: only
# the smoke's ACL+TLS scenario).
# The full matrix includes the clock nemesis: it needs the test-only clock hook (-tags jepsenclock).
jepsen: storm
	CGO_ENABLED=1 $(GO) build -trimpath -tags '$(TAGS) jepsenclock' -ldflags '$(LDFLAGS)' -o bin/foreman-jepsen .
	FOREMAN_BIN=$(CURDIR)/bin/foreman-jepsen FOREMAN_JEPSEN=full $(GO) test -count=1 -timeout 6h -run 'TestJepsen' -v ./jepsen/

# The issue-13 storm at full size: 300 container + 5,000 process jobs without requests on three
# agents (make test runs a smaller one); part of make jepsen.
storm: build
	FOREMAN_BIN=$(CURDIR)/$(BIN) FOREMAN_STORM=full $(GO) test -count=1 -timeout 30m -run 'TestSystemStorm' -v ./systest/
	FOREMAN_BIN=$(CURDIR)/$(BIN) FOREMAN_UPGRADE=full $(GO) test -count=1 -timeout 30m -run 'TestSystemUpgradeFromRelease' -v ./systest/

jepsen-smoke: build
	CGO_ENABLED=1 $(GO) build -trimpath -tags '$(TAGS) jepsenclock' -ldflags '$(LDFLAGS)' -o bin/foreman-jepsen .
	FOREMAN_BIN=$(CURDIR)/$(BIN) FOREMAN_JEPSEN_CLOCK_BIN=$(CURDIR)/bin/foreman-jepsen $(GO) test -count=1 -timeout 15m -run 'TestJepsenSmoke' -v ./jepsen/

jepsen-secure: build
	FOREMAN_BIN=$(CURDIR)/$(BIN) FOREMAN_JEPSEN=secure $(GO) test -count=1 -timeout 10m -run 'TestJepsenSecure' -v ./jepsen/

clean:
	rm -rf bin .cluster
