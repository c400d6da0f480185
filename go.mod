module github.com/ovfwd/ovfwd

go 1.26.0

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/asavie/xdp v0.3.3
	github.com/cilium/ebpf v0.22.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
)
