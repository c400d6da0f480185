package vpne2e

import (
	"os"
	"strings"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// FastPathEnv is the suite's fast-path switch: with
// OVFWD_TEST_FAST_PATH=xdp every ovfwd the suite starts runs with
// fast_path = "xdp" (the XDP fast path on every AF_XDP port, veths
// included), and the veth ends facing ovfwd's ports get GRO, which is what
// the kernel needs to take a frame an XDP program redirected into their
// peer (drivers/net/veth.c veth_xdp_xmit: the receiving veth must run
// NAPI, which an XDP program or GRO turns on). OVFWD_TEST_FAST_PATH=off
// runs it with fast_path = "off" (no fast path in the XDP programs).
// Unset, the suite runs as configured (fast_path = "auto": the ingress
// programs have it, but nothing is redirected out of a veth).
const FastPathEnv = "OVFWD_TEST_FAST_PATH"

// FastPathForced says whether the suite runs with the fast path forced on.
func FastPathForced() bool { return os.Getenv(FastPathEnv) == "xdp" }

// WithFastPath is cfg (an ovfwd config) with the fast_path FastPathEnv
// asks for, unchanged when it asks for none.
func WithFastPath(cfg string) string {
	v := os.Getenv(FastPathEnv)
	if v != "xdp" && v != "off" {
		return cfg
	}
	line := "fast_path = \"" + v + "\"\n"
	if strings.Contains(cfg, "[appliance]\n") {
		return strings.Replace(cfg, "[appliance]\n", "[appliance]\n"+line, 1)
	}
	return "[appliance]\n" + line + cfg
}

// PeerNAPI turns GRO on for dev in ns when the fast path is forced: dev is
// the far end of a veth whose near end is one of ovfwd's ports.
func PeerNAPI(ns *netns.NS, dev string) error {
	if !FastPathForced() {
		return nil
	}
	_, err := ns.Run("ethtool", "-K", dev, "gro", "on")
	return err
}
