// Package migrate is the migration suite: real OpenVPN server
// configurations (config/openvpnconf/testdata) with an easy-rsa PKI are
// turned into ovfwd.toml by `ovfwd import`, pass `ovfwd check` run as root
// (which checks as the unit's user) after the operator runs the steps it
// names, and then serve a stock openvpn 2.6 client using that
// configuration's own style of client profile through `ovfwd run`,
// started as packaging/ovfwd.service starts it, in the vpne2e namespace lab.
package migrate
