# lockhub: `make run` starts the hub with an embedded Redis; `make test` runs every test.
GO ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS := ./...

.PHONY: run test deps lint fmt bench fuzz image

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
test: deps
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

# deps installs what the tests need on a fresh Debian machine, or says how.
deps:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v podman >/dev/null 2>&1 || missing="$$missing podman"; \
	[ -f /etc/ssl/certs/ca-certificates.crt ] || missing="$$missing ca-certificates"; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing:$$missing"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
		else \
			echo "missing:$$missing. Install with: sudo apt-get install -y$$missing"; exit 1; \
		fi; \
	fi; \
	v=$$(redis-server --version | sed -n 's/.*v=\([0-9]*\)\..*/\1/p'); \
	if [ "$${v:-0}" -lt 7 ]; then echo "redis-server 7 or newer is needed (sharded pub/sub); found $$(redis-server --version)"; exit 1; fi

fmt:
	gofmt -w .

lint:
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
