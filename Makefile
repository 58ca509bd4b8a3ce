# lockhub: `make run` starts the hub with an embedded Redis; `make test` runs every test.
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS := ./...

.PHONY: run test deps lint fmt bench fuzz image client-deps client-test client-lint

# The browser client's npm package: its dev dependencies (typescript, react, esbuild)
# come from the committed package-lock.json, nothing else from the network.
CLIENT := web/static/lockhub

run:
	$(GO) run ./cmd/lockhub

# The container image (cmd/lockhub/Containerfile), built with Debian's podman from a
# static binary, the CA certificates of this machine and a passwd of the non-root user;
# nothing is fetched, and no layer is cached (buildah 1.28 reused a LABEL layer made
# with another VERSION). IMAGE names it; VERSION is its org.opencontainers.image.version.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE ?= localhost/lockhub:$(VERSION)
image: deps
	@ctx=$$(mktemp -d) && trap 'rm -rf "$$ctx"' EXIT && \
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o "$$ctx/lockhub" ./cmd/lockhub && \
	cp /etc/ssl/certs/ca-certificates.crt "$$ctx/" && \
	echo 'nonroot:x:65532:65532:lockhub:/:/sbin/nologin' > "$$ctx/passwd" && \
	podman build -q --layers=false -f cmd/lockhub/Containerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) "$$ctx" >/dev/null && \
	echo "built $(IMAGE)"

# Every test, with the race detector, against real redis-server and Chromium processes
# the tests start themselves on free ports.
test: deps client-test
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# client-deps installs the client's dev dependencies when the lock file changed.
client-deps: deps
	@if [ ! -f $(CLIENT)/node_modules/.package-lock.json ] || [ $(CLIENT)/package-lock.json -nt $(CLIENT)/node_modules/.package-lock.json ]; then \
		cd $(CLIENT) && npm ci --no-audit --no-fund; \
	fi

# The client's unit tests under Node (fake socket and clock) and its pack test. The
# Chromium tests in web/e2e (go test) use the same node_modules for the React example.
client-test: client-deps
	cd $(CLIENT) && npm test

client-lint: client-deps
	cd $(CLIENT) && npm run lint

# deps installs what the tests need on a fresh Debian machine, or says how.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v podman >/dev/null 2>&1 || missing="$$missing podman"; \
	[ -f /etc/ssl/certs/ca-certificates.crt ] || missing="$$missing ca-certificates"; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
		else \
			echo "missing:$$missing. Install with: sudo apt-get install -y$$missing"; exit 1; \
		fi; \
	fi; \
	v=$$(redis-server --version | sed -n 's/.*v=\([0-9]*\)\..*/\1/p'); \
	if [ "$${v:-0}" -lt 7 ]; then echo "redis-server 7 or newer is needed (sharded pub/sub); found $$(redis-server --version)"; exit 1; fi; \
	n=$$(node --version | sed -n 's/^v\([0-9]*\)\..*/\1/p'); \
	if [ "$${n:-0}" -lt 18 ]; then echo "node 18 or newer is needed (node --test, the browser client's tests); found $$(node --version)"; exit 1; fi

fmt:
	gofmt -w .

lint: client-lint
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)

# Benchmarks; each reports its figures against a baseline measured in the same run.
bench: deps
	$(GO) test -run='^$$' -bench=. -benchtime=2s -count=1 ./locks/ ./hub/

# Each fuzz target for FUZZTIME (go test fuzzes one target of one package at a time).
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzValidate$$' -fuzztime=$(FUZZTIME) ./locks/
	for f in FuzzDecodeRequest FuzzDecodeServerFrame FuzzTimeUnmarshal; do \
		$(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) ./protocol/ || exit 1; \
	done
