// Package monitor is the suite of an OpenVPN operator's monitoring tools
// against `ovfwd run` (as its unit runs it) with stock openvpn 2.6
// clients connected, in the vpne2e namespace lab: unmodified third-party
// clients of the management interface and of the status file read them,
// kill clients and follow their traffic.
//
//   - Debian's Go management library
//     (golang-github-apparentlymart-go-openvpn-mgmt-dev, Go source under
//     /usr/share/gocode): testdata/gomgmt is built against it in GOPATH
//     mode (GO111MODULE=off GOPATH=/usr/share/gocode), so the library never
//     enters go.mod.
//   - the npm package telnet-openvpn (0.1.9, with telnet-client 0.16),
//     installed with npm into a temporary directory, on the loopback TCP
//     interface with its password (testdata/npm/client.js).
//   - a process of another user (setpriv) on the management socket opened
//     to everyone: it reads, its kill is refused by the daemon.
//   - collectd's openvpn plugin (Debian collectd-core,
//     /usr/lib/collectd/openvpn.so), run in the foreground with the csv
//     plugin, on status files of versions 1, 2 and 3.
//
// Then the same two clients, connected in the same order to a fresh ovfwd
// and to a stock openvpn 2.6 server in the same namespaces, give status
// files (versions 2 and 3) and "status 3" answers that are equal field by
// field once what differs between any two runs is set aside (times,
// ports, byte counts, the title, row order).
//
// The package holds tests only.
package monitor
