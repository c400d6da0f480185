package packaging

import _ "embed"

// Unit is ovfwd.service, the systemd unit the packages install. The
// testbed runs the daemon under its user, capabilities and limits (see
// appliance/testbed/unit); embedding it lets `ovfwd lab` do the same
// outside the source tree.
//
//go:embed ovfwd.service
var Unit string
