# ovfwd — see README.md. Every target that touches namespaces needs root.
GO       ?= go
BIN      := bin/ovfwd
# From the release tags (packaging/version.sh): 0.3.1 on a tag, 0.3.2~git5.<hash>
# past it; the package and `ovfwd version` carry the same string.
VERSION  ?= $(shell ./packaging/version.sh)
LDFLAGS  := -X github.com/ovfwd/ovfwd/cmd/ovfwd/version.Version=$(VERSION)
# Packages with no privileged code run under the race detector too.
PURE     := ./config/... ./fwd/... ./vpn/... ./mlx5/...
# So do the appliance packages with unprivileged tests of concurrent code
# (worker loop and wake, reload, uplinks, status, metrics, netlink sync);
# as root their namespace tests run under it too.
RACE     := $(PURE) ./appliance/runner ./appliance/daemon ./appliance/status ./appliance/metrics \
            ./appliance/nlsync ./appliance/afxdp ./appliance/testbed ./appliance/testbed/netns/...
FUZZTIME ?= 20s

.PHONY: build build-arm64 test test-arm64 deps lab bench fuzz vet package clean vmtest

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ovfwd

build-arm64:
	GOARCH=arm64 CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o bin/arm64/ovfwd ./cmd/ovfwd

deps:
	./.ci/install-deps

vet:
	$(GO) vet ./...

# All tests: unit, fuzz seeds, device model, and the root-only netns tests
# (OVFWD_REQUIRE_PRIV=1 turns a missing privilege into a failure, never a skip).
test: deps build vet
	OVFWD_REQUIRE_PRIV=1 OVFWD_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 35m -p 1 ./...
	@# The XDP fast path forced on (docs/fastpath.md): the afxdp suite, and the
	@# vpne2e tests whose traffic crosses the box outside the tunnel.
	OVFWD_REQUIRE_PRIV=1 OVFWD_TEST_FAST_PATH=xdp $(GO) test -count=1 -timeout 5m ./appliance/afxdp/
	OVFWD_REQUIRE_PRIV=1 OVFWD_TEST_FAST_PATH=xdp OVFWD_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 10m \
		-run 'TestRoutedBesideTunnel|TestOneClient' ./appliance/testbed/vpne2e/
	$(GO) test -race -count=1 -timeout 15m $(RACE)
	@# The mlx5 receive path's measurement variants (mlx5/dp/lab.go).
	$(GO) test -count=1 -tags mlx5lab ./mlx5/dp/ ./mlx5/model/dpsim/
	./.ci/test-arm64

# arm64: vet, the pure-Go tests under qemu-aarch64, the arm64 .deb and .rpm.
test-arm64: deps
	./.ci/test-arm64

# Only the QEMU guests (VFIO on a real kernel; the .deb under systemd).
# `make test` runs them too. Kernel and images are cached in
# /var/cache/ovfwd-vmtest.
vmtest: deps build
	OVFWD_REQUIRE_PRIV=1 OVFWD_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 30m -v ./appliance/testbed/vmtest/

lab: deps build
	./$(BIN) lab

bench: build
	$(GO) test -run '^$$' -bench . -benchmem ./fwd/... ./vpn/... ./mlx5/...

fuzz:
	./.ci/fuzz $(FUZZTIME)

package: deps build build-arm64
	VERSION=$(VERSION) ./packaging/build.sh dist
	VERSION=$(VERSION) OVFWD_BIN=bin/arm64/ovfwd ./packaging/build.sh dist

clean:
	rm -rf bin dist
