# freqcap: make help lists the targets
GO ?= go
SERVICES := counter callback
# The commit the binaries say they are (--version, freqcap_build_info).
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)$(shell git diff --quiet HEAD 2>/dev/null || echo -modified)
LDFLAGS := -s -w -X github.com/freqcap/freqcap/shared/buildinfo.Commit=$(COMMIT)

.PHONY: help test test-cluster run smoke-run dashboard-check fuzz build bench bench-instructions gobench lint docker-check test-tools redis-server proto proto-check

# Code generation for proto/: pinned tools, installed into bin/tools.
BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_CONNECT_GO_VERSION := v1.21.1
TOOLS := $(CURDIR)/bin/tools

## help: list the targets
help:
	@grep -E '^## [a-z-]+:' $(MAKEFILE_LIST) | sed 's/^## //' | awk -F': ' '{ printf "  make %-16s %s\n", $$1, $$2 }'

## test: vet, then every test with the race detector against a real redis-server, then against a real Redis Cluster
test: test-tools
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...
	FREQCAP_TEST_REDIS=cluster $(GO) test -race -count=1 ./...

## test-cluster: every test against a Redis Cluster of 3 masters and 3 replicas only
test-cluster: test-tools
	FREQCAP_TEST_REDIS=cluster $(GO) test -race -count=1 ./...

## run: build the services and start Redis, counter and callback locally (Ctrl-C stops them)
run: build redis-server
	$(GO) build -o bin/stack ./dev/stack
	exec bin/stack

## smoke-run: start make run on free ports, count one notice, stop it with Ctrl-C
smoke-run:
	./scripts/smoke-run

## build: release binaries into bin/, built as the Dockerfiles build them
build:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='$(LDFLAGS)' -o bin/ $(addprefix ./,$(SERVICES))

## bench: load-test the whole stack against a bare net/http baseline (about 20 min); writes bench/RESULTS.md
bench: test-tools
	@command -v wrk >/dev/null 2>&1 || { echo "wrk is required: apt-get install -y wrk"; exit 1; }
	$(GO) run ./bench

## bench-instructions: redis-server instructions per notice (a run, and end to end through callback and the counter), read and limiter check, and the services' own per request in their handlers, counted under valgrind's callgrind (about 17 min)
bench-instructions:
	@command -v valgrind >/dev/null 2>&1 || { echo "valgrind is required: apt-get install -y valgrind"; exit 1; }
	$(GO) run ./bench/instructions

## gobench: Go benchmarks of the store, parsing and handlers
gobench: test-tools
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## dashboard-check: validate the Grafana dashboard (layout, PromQL via promtool, metrics the services export) and the Prometheus config
dashboard-check: test-tools
	$(GO) test -count=1 ./dev/observability/
	$(GO) test -count=1 -run 'Dashboard' ./counter ./callback

## fuzz: run every fuzz target for FUZZTIME (30s) each; make test runs their seed corpora
FUZZTIME ?= 30s
FUZZ_TARGETS := ./campaign:FuzzCheckRead ./client:FuzzCapAnswers ./client:FuzzCapBody ./client:FuzzVerdictAnswers ./client:FuzzDecideBody ./counter:FuzzParseQuery ./counter:FuzzDecodeBatch ./counter:FuzzBatchJSON ./counter:FuzzDecideJSON ./counter:FuzzVerdictsJSON ./counter:FuzzConnectJSON ./counter:FuzzLimitJSON ./counter:FuzzLimitAnswerJSON ./callback:FuzzParseNotice ./callback:FuzzJournalEntry ./shared/signing:FuzzVerify ./shared/ids:FuzzValidKey ./shared/ids:FuzzValidID
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz $(FUZZ_TARGETS)

## docker-check: validate compose.yaml and build each binary exactly as its Dockerfile does
docker-check:
	./scripts/docker-check

## proto: lint proto/ and regenerate gen/ with buf (commit what it writes)
proto:
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(TOOLS) $(GO) install connectrpc.com/connect/cmd/protoc-gen-connect-go@$(PROTOC_GEN_CONNECT_GO_VERSION)
	PATH="$(TOOLS):$$PATH" buf lint
	rm -rf gen
	PATH="$(TOOLS):$$PATH" buf generate

## proto-check: fail when the committed gen/ differs from what make proto writes
proto-check: proto
	@test -z "$$(git status --porcelain -- gen)" || { git status --short -- gen; echo "gen/ is stale: run make proto and commit it"; exit 1; }

## lint: gofmt and go vet
lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

# Tests start their own redis-server, and check the dashboard's PromQL with
# promtool (Debian's prometheus package); install what is missing.
test-tools: redis-server
	@command -v promtool >/dev/null 2>&1 && exit 0; \
	$(call apt_install,prometheus,promtool (brew install prometheus))

# make run and the tests need the real redis-server (Redis 7): install it
# when it is missing.
redis-server:
	@command -v redis-server >/dev/null 2>&1 && exit 0; \
	$(call apt_install,redis-server,Redis 7 (brew install redis; https://redis.io/docs/latest/operate/oss_and_stack/install/))

# apt_install installs a Debian package for the command it brings, or says
# what to install elsewhere. Debian's packages also enable a server of
# their own (redis-server on 6379, Prometheus) on a machine with systemd:
# only the commands are wanted, so that server is stopped and disabled.
define apt_install
	if command -v apt-get >/dev/null 2>&1; then \
		echo "installing with apt-get: $(1)"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $(1) || exit 1; \
		if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled $(1) >/dev/null 2>&1; then \
			echo "the $(1) package enabled a service; only its command is needed here: stopping and disabling it"; \
			$$SUDO systemctl disable --now $(1) >/dev/null 2>&1 || true; \
		fi; \
	else \
		echo "required: $(2)"; exit 1; \
	fi
endef
