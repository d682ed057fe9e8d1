# freqcap: make test | make run | make build | make bench
GO ?= go
SERVICES := counter callback

.PHONY: test run build bench gobench lint docker-check redis-server

## test: vet, then every test with the race detector against a real redis-server
test: redis-server
	$(GO) vet ./...
	$(GO) test -race -count=1 ./...

## run: build the services and start Redis, counter and callback locally
run: build
	$(GO) run ./dev/stack

## build: release binaries into bin/, built as the Dockerfiles build them
build:
	@mkdir -p bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/ $(addprefix ./,$(SERVICES))

## bench: load-test the whole stack against a bare net/http baseline (about 8 min); writes bench/RESULTS.md
bench: redis-server
	@command -v wrk >/dev/null 2>&1 || { echo "wrk is required: apt-get install -y wrk"; exit 1; }
	$(GO) run ./bench

## gobench: Go benchmarks of the store, parsing and handlers
gobench: redis-server
	$(GO) test -run='^$$' -bench=. -benchmem ./...

## docker-check: validate compose.yaml and build each binary exactly as its Dockerfile does
docker-check:
	./scripts/docker-check

lint:
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: files above need formatting"; exit 1; }
	$(GO) vet ./...

# Tests start their own redis-server; install it when it is missing.
redis-server:
	@command -v redis-server >/dev/null 2>&1 && exit 0; \
	if command -v apt-get >/dev/null 2>&1; then \
		echo "redis-server missing: installing it with apt-get"; \
		SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq redis-server; \
	else \
		echo "redis-server is required: install Redis 7 (macOS: brew install redis; others: https://redis.io/docs/latest/operate/oss_and_stack/install/)"; \
		exit 1; \
	fi
