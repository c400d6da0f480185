// Package adversary holds the adversarial client suite: ovfwd run as its
// unit runs it in a namespace lab (appliance/testbed/vpne2e), a stock
// openvpn 2.6 client that must keep connecting and passing traffic, and
// ovfwd's own client (vpn/control) made to misbehave from another
// namespace with a valid profile: a control-stream flood, a half-open
// flood from one address, a client that never reads, renegotiations with
// another certificate and a revoked one, 200 concurrent bad logins, and
// (against a tls-crypt-v2 server) a client key used to inject into
// another client's session from that client's spoofed address.
// Each attack must move the counter that names it while the daemon's
// memory and goroutines stay within the bounds the test states
// (docs/hardening.md lists the limits).
package adversary
