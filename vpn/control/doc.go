// Package control implements the OpenVPN 2.6 control channel, server role
// (Server) and client role (Client, client*.go), over UDP (IPv4 and IPv6): packet framing, tls-crypt v1 / tls-auth
// wrapping, the reliability layer, TLS 1.2/1.3 with client certificates
// (crypto/tls over a net.Conn adapter), key method 2, data-key derivation
// (TLS-EKM, legacy PRF fallback), PUSH_REPLY, renegotiation, keepalive
// reaping and the security gates in front of all of it. File and function
// names in comments are OpenVPN 2.6's sources (github.com/OpenVPN/openvpn,
// src/openvpn/) unless another tree is named; the protocol is also written
// up in the OpenVPN wire-protocol draft (github.com/OpenVPN/openvpn-rfc).
//
// The package is the control plane: it may allocate and lock, and it never
// sees P_DATA_V2 traffic except in kernel-socket mode (Config.DataPacket).
// It drives the data plane only through the DataPlane interface.
//
// Threading contract:
//   - HandlePacket may be called from any goroutine; Serve calls it from its
//     read loop. A packet is authenticated (tls-crypt / tls-auth) before any
//     per-session state is looked up or created; a new client gets a
//     stateless reply whose session id is an HMAC cookie, and a session
//     exists only once the client echoes that cookie.
//   - Each key negotiation (key_id 0, then one per renegotiation) runs its
//     TLS handshake and key method 2 exchange on a goroutine of its own,
//     blocked in crypto/tls reads on the key's reliable byte stream.
//   - One timer goroutine per Server drives retransmission, hand-window,
//     renegotiation, lame-duck expiry, pings and ping-restart.
//   - Locks: Server.mu (session map, pools, counters) is taken before a
//     session's mu, never after it. DataPlane methods are called with a
//     session's mu held and must not call back into the Server.
//
// Every client is treated as an adversary that holds valid keys: what one
// session may make the server buffer, queue or run is bounded and each
// bound is counted (spec.go, DropReason; docs/hardening.md).
//
// The code is role-symmetric where that was cheap (wrapper, reliable,
// streamConn, keyMethod2 and splitKey2 all take the role), so the client
// role can reuse them; the tests drive the server with such a client.
package control
