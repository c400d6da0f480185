module github.com/ovfwd/ovfwd

go 1.26.0

require github.com/vishvananda/netns v0.0.5

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/asavie/xdp v0.3.3 // indirect
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	golang.org/x/crypto v0.59.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
