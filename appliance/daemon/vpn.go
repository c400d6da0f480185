package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/vpn"
	"github.com/ovfwd/ovfwd/vpn/control"
	"github.com/ovfwd/ovfwd/vpn/hooks"
	"github.com/ovfwd/ovfwd/vpn/pki"
	"github.com/ovfwd/ovfwd/vpn/statickey"
)

// vpnServer is the OpenVPN server role: the data channel runs in the
// engine's workers (a vpn.Tunnel registered with SetTunnel, fed P_DATA_V2
// by the steering program), the control channel on a kernel UDP socket
// (the steering program passes every other packet to the VPN port to the
// kernel). It is also the control server's DataPlane: peers it
// establishes get a tunnel entry and host routes for their VPN addresses.
type vpnServer struct {
	d      *daemon
	tun    *vpn.Tunnel
	srv    *control.Server
	conn   *kernelDataConn // P_DATA_V2 the kernel reassembled goes to the data plane (kerneldata.go)
	listen string
	served chan struct{}
	// maxPeers is the size the tunnel table and pools were built for.
	maxPeers int

	// iroutes are the networks behind clients, by certificate common name
	// ([[vpn.iroute]]); fixed at start.
	iroutes map[string][]netip.Prefix

	// cfg is the [vpn] in force (reload replaces it); crl* watch the
	// revocation list so a changed file applies without a SIGHUP.
	// reconfMu serialises reconfigure (reload's goroutine and the control
	// loop's watchCRL) and guards cfg and crlStamp.
	reconfMu   sync.Mutex
	cfg        config.VPN
	crlStamp   fileStamp
	crlChecked time.Time // control loop only

	mu    sync.Mutex
	peers map[uint32]control.Peer
	// irouteOwner is the peer whose tunnel each iroute leads into: with
	// two sessions of one common name the newest wins, and the older one
	// going away must not take the route with it.
	irouteOwner map[netip.Prefix]uint32
	// cids are the management interface's client ids by peer id: unique
	// for the daemon's life, as openvpn's (multi.c cid_counter).
	cids    map[uint32]uint64
	nextCID uint64

	// hooks are [vpn]'s client_connect, client_disconnect and
	// learn_address commands; nil without any.
	hooks *hooks.Hooks
}

var _ control.DataPlane = (*vpnServer)(nil)

// startVPN registers the tunnel with the engine and starts the control
// server. Call it before the workers start.
func (d *daemon) startVPN(c *config.VPN) (*vpnServer, error) {
	v := &vpnServer{d: d, peers: map[uint32]control.Peer{}, served: make(chan struct{}), maxPeers: c.MaxPeers,
		iroutes: map[string][]netip.Prefix{}, irouteOwner: map[netip.Prefix]uint32{}, cids: map[uint32]uint64{}}
	for _, ir := range c.IRoutes {
		v.iroutes[ir.CommonName] = ir.Routes
	}
	for _, cd := range c.CCD {
		if len(cd.IRoutes) > 0 {
			v.iroutes[cd.CommonName] = cd.IRoutes
		}
	}
	cc, err := controlConfig(c)
	if err != nil {
		return nil, err
	}
	v.cfg = *c
	v.crlStamp = stampOf(c.CRL)
	d.engine.SetClientToClient(c.ClientToClient)
	v.tun = vpn.NewTunnel(vpn.TunnelConfig{Queues: len(d.engine.Workers()), MaxPeers: c.MaxPeers, ReplayWindow: c.ReplayWindow})
	cc.Logf = func(format string, args ...any) {
		d.log.InfoContext(context.WithValue(context.Background(), logKey, format), fmt.Sprintf(format, args...), "component", "vpn")
	}
	cc.Event = d.vpnEvent
	cc.SendPing = v.sendPing
	if h := c.Hooks; len(h.ClientConnect)+len(h.ClientDisconnect)+len(h.LearnAddress) > 0 {
		// dev names the tunnel for scripts that key state by it; ovfwd has
		// no tun device, so it is the process's name.
		srv := hooks.Server{Dev: "ovfwd", Config: d.path, Port: c.Port, TunMTU: c.TunMTU, Started: time.Now()}
		if c.PoolV4.IsValid() {
			srv.Local4 = c.PoolV4.Masked().Addr().Next()
		}
		if c.PoolV6.IsValid() {
			srv.Local6 = c.PoolV6.Masked().Addr().Next()
		}
		v.hooks = &hooks.Hooks{Server: srv,
			ClientConnect: h.ClientConnect, ClientDisconnect: h.ClientDisconnect, LearnAddress: h.LearnAddress,
			Timeout: h.Timeout, Runner: &hooks.Runner{Concurrency: h.Concurrency}, Logf: cc.Logf}
		cc.Hooks = v.hooks
	}
	if v.srv, err = control.NewServer(cc, v); err != nil {
		return nil, err
	}
	// One socket: the control server answers from the socket it reads.
	// With the unspecified IPv6 address in listen, one dual-stack socket
	// serves IPv4 and IPv6 clients alike.
	addr := netip.AddrPortFrom(c.Listen[0], uint16(c.Port))
	for _, a := range c.Listen {
		if a == netip.IPv6Unspecified() {
			addr = netip.AddrPortFrom(a, uint16(c.Port))
		}
	}
	if len(c.Listen) > 1 && addr.Addr() != netip.IPv6Unspecified() {
		d.log.Warn("vpn listens on one address only", "used", addr, "configured", c.Listen)
	}
	pc, err := net.ListenPacket("udp", addr.String())
	if err != nil {
		v.srv.Close()
		return nil, fmt.Errorf("vpn: %w", err)
	}
	if v.conn, err = newKernelDataConn(pc.(*net.UDPConn), d.wake); err != nil {
		pc.Close()
		v.srv.Close()
		return nil, fmt.Errorf("vpn: socket %s: destination addresses (IP_PKTINFO): %w", addr, err)
	}
	v.listen = addr.String()
	if rcv, snd, err := setSocketBuffers(v.conn.UDPConn, controlSocketBuffer); err != nil || rcv < controlSocketBuffer || snd < controlSocketBuffer {
		d.log.Warn("vpn control socket buffers smaller than wanted; handshake bursts may overflow them",
			"want", controlSocketBuffer, "rcvbuf", rcv, "sndbuf", snd, "err", err)
	}
	d.engine.SetTunnel(v.tun, uint16(c.Port))
	go func() {
		defer close(v.served)
		if err := v.srv.Serve(v.conn); err != nil {
			d.log.Error("vpn control socket failed", "err", err)
		}
	}()
	d.log.Info("vpn server", "listen", v.listen, "pool_v4", c.PoolV4, "pool_v6", c.PoolV6, "ciphers", c.Ciphers)
	return v, nil
}

// controlConfig maps [vpn] onto the control server's configuration,
// reading the key files.
func controlConfig(c *config.VPN) (control.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.Cert, c.Key)
	if err != nil {
		return control.Config{}, fmt.Errorf("vpn: server certificate: %w", err)
	}
	caPEM, err := os.ReadFile(c.CA)
	if err != nil {
		return control.Config{}, fmt.Errorf("vpn: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return control.Config{}, fmt.Errorf("vpn: no certificate in %s", c.CA)
	}
	t, err := vpnTunables(c)
	if err != nil {
		return control.Config{}, err
	}
	cc := control.Config{
		Certificate: cert, ClientCAs: pool,
		Pool4: c.PoolV4, Pool6: c.PoolV6, Routes: t.Routes,
		Ping: t.Ping, PingRestart: t.PingRestart, RenegSec: t.RenegSec, TunMTU: t.TunMTU,
		MaxPeers: t.MaxPeers, MaxHalfOpen: t.MaxHalfOpen, HandshakeRate: t.HandshakeRate,
		MaxHalfOpenPerSource: t.MaxHalfOpenPerSource, HandshakeTimeout: t.HandshakeTimeout,
		DuplicateCN: t.DuplicateCN, Revoked: t.Revoked, Clients: t.Clients, Push: t.Push,
		Auth: t.Auth, UsernameAsCN: t.UsernameAsCN, AuthFailLimit: t.AuthFailLimit, AuthFailWindow: t.AuthFailWindow,
		PoolPersist: c.PoolPersist, VerifyClientCert: c.VerifyClientCert,
	}
	if c.TLSCryptV2 != "" {
		text, err := os.ReadFile(c.TLSCryptV2)
		if err != nil {
			return control.Config{}, fmt.Errorf("vpn: %w", err)
		}
		k, err := control.ParseTLSCryptV2ServerKey(text)
		if err != nil {
			return control.Config{}, fmt.Errorf("vpn: %s: %w", c.TLSCryptV2, err)
		}
		cc.TLSCryptV2 = &k
	}
	keyFile := c.TLSCrypt
	cc.Wrap = control.WrapTLSCrypt
	if c.TLSAuth != "" {
		keyFile, cc.Wrap = c.TLSAuth, control.WrapTLSAuth
		cc.KeyDirection = control.KeyDirection(c.KeyDirection)
		switch c.TLSAuthDigest {
		case "SHA256":
			cc.AuthDigest = control.DigestSHA256
		case "SHA512":
			cc.AuthDigest = control.DigestSHA512
		}
	}
	if cc.TLSCryptV2 == nil {
		text, err := os.ReadFile(keyFile)
		if err != nil {
			return control.Config{}, fmt.Errorf("vpn: %w", err)
		}
		if cc.WrapKey, err = statickey.Parse(text); err != nil {
			return control.Config{}, fmt.Errorf("vpn: %s: %w", keyFile, err)
		}
	}
	for _, name := range c.Ciphers {
		switch name {
		case config.CipherAES256GCM:
			cc.Ciphers = append(cc.Ciphers, vpn.AES256GCM)
		case config.CipherAES128GCM:
			cc.Ciphers = append(cc.Ciphers, vpn.AES128GCM)
		case config.CipherChaCha20Poly1305:
			cc.Ciphers = append(cc.Ciphers, vpn.ChaCha20Poly1305)
		}
	}
	return cc, nil
}

// vpnTunables maps the [vpn] settings a reload may change (what is
// pushed, keepalive, renegotiation, admission limits and operator policy)
// onto the control server's Tunables; startVPN and reload share it so both
// read [vpn] alike. It reads the revocation list, so it can fail.
func vpnTunables(c *config.VPN) (control.Tunables, error) {
	t := control.Tunables{
		Routes: c.PushRoutes, Ping: c.KeepaliveInterval, PingRestart: c.KeepaliveTimeout,
		RenegSec: time.Duration(c.RenegSec) * time.Second, TunMTU: c.TunMTU,
		MaxPeers: c.MaxPeers, MaxHalfOpen: c.MaxHalfOpen, HandshakeRate: float64(c.HandshakeRate),
		MaxHalfOpenPerSource: c.MaxHalfOpenPerSource, HandshakeTimeout: c.HandshakeTimeout,
		DuplicateCN: c.DuplicateCN, Push: pushOptions(c), Clients: map[string]control.ClientPolicy{},
	}
	if c.RenegSec == 0 {
		t.RenegSec = -1 // the control server's "never"; its 0 means its default
	}
	if len(c.AuthUserPassVerify) > 0 {
		t.Auth = &control.UserPass{Command: c.AuthUserPassVerify, Timeout: c.AuthTimeout, Concurrency: c.AuthConcurrency}
		t.UsernameAsCN, t.AuthFailLimit, t.AuthFailWindow = c.UsernameAsCommonName, c.AuthFailLimit, c.AuthFailWindow
	}
	for _, cd := range c.CCD {
		t.Clients[cd.CommonName] = control.ClientPolicy{IPv4: cd.IPv4, IPv6: cd.IPv6, Routes: cd.PushRoutes, Disabled: cd.Disable}
	}
	if c.CRL != "" {
		caPEM, err := os.ReadFile(c.CA)
		if err != nil {
			return t, fmt.Errorf("vpn: %w", err)
		}
		crl, err := pki.LoadCRL(c.CRL, caPEM)
		if err != nil {
			return t, fmt.Errorf("vpn: crl %s: %w", c.CRL, err)
		}
		t.Revoked = crl.Revoked
	}
	return t, nil
}

// pushOptions are the options [vpn] pushes to every client besides
// addresses and routes: full tunnel (push "redirect-gateway def1 [ipv6]")
// and resolver settings (push "dhcp-option DNS|DNS6|DOMAIN").
func pushOptions(c *config.VPN) []string {
	var o []string
	v4, v6 := slices.Contains(c.RedirectGateway, "ipv4"), slices.Contains(c.RedirectGateway, "ipv6")
	switch {
	case v4 && v6:
		o = append(o, "redirect-gateway def1 ipv6")
	case v4:
		o = append(o, "redirect-gateway def1")
	case v6:
		o = append(o, "redirect-gateway ipv6 !ipv4")
	}
	for _, a := range c.DNS {
		if a.Is4() {
			o = append(o, "dhcp-option DNS "+a.String())
		} else {
			o = append(o, "dhcp-option DNS6 "+a.String())
		}
	}
	if c.DNSDomain != "" {
		o = append(o, "dhcp-option DOMAIN "+c.DNSDomain)
	}
	return o
}

// vpnRestartPart is [vpn] without what vpnTunables covers: what differs
// here needs a restart (new socket, keys, pools or tunnel table). The
// iroutes of [[vpn.ccd]] are fixed at start, like [[vpn.iroute]].
func vpnRestartPart(c config.VPN) config.VPN {
	c.PushRoutes, c.KeepaliveInterval, c.KeepaliveTimeout, c.RenegSec, c.TunMTU = nil, 0, 0, 0, 0
	c.MaxPeers, c.MaxHalfOpen, c.HandshakeRate, c.MaxHalfOpenPerSource, c.HandshakeTimeout = 0, 0, 0, 0, 0
	c.ClientToClient, c.DuplicateCN, c.CRL, c.RedirectGateway, c.DNS, c.DNSDomain = false, false, "", nil, nil, ""
	c.AuthUserPassVerify, c.AuthTimeout, c.AuthConcurrency, c.AuthFailLimit, c.AuthFailWindow, c.UsernameAsCommonName = nil, 0, 0, 0, 0, false
	var ccd []config.VPNCCD
	for _, cd := range c.CCD {
		if len(cd.IRoutes) > 0 {
			ccd = append(ccd, config.VPNCCD{CommonName: cd.CommonName, IRoutes: cd.IRoutes})
		}
	}
	c.CCD = ccd
	return c
}

// reconfigure applies a reloaded [vpn]'s tunables to sessions that start
// from now on; established tunnels keep their keys and pushed options. A
// larger max_peers than the server started with waits for a restart (the
// tunnel table and pools were sized for the old one); it reports whether
// it had to.
func (v *vpnServer) reconfigure(c *config.VPN) (maxPeersPending bool, err error) {
	v.reconfMu.Lock()
	defer v.reconfMu.Unlock()
	return v.reconfigureLocked(c)
}

func (v *vpnServer) reconfigureLocked(c *config.VPN) (maxPeersPending bool, err error) {
	t, err := vpnTunables(c)
	if err != nil {
		return false, err
	}
	if t.MaxPeers > v.maxPeers {
		t.MaxPeers, maxPeersPending = v.maxPeers, true
	}
	if err := v.srv.Reconfigure(t); err != nil {
		return false, err
	}
	v.d.engine.SetClientToClient(c.ClientToClient)
	v.cfg = *c
	v.crlStamp = stampOf(c.CRL)
	return maxPeersPending, nil
}

// fileStamp identifies a version of a file cheaply (size and mtime).
type fileStamp struct {
	size int64
	mod  time.Time
}

func stampOf(path string) fileStamp {
	if path == "" {
		return fileStamp{}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{fi.Size(), fi.ModTime()}
}

// crlInterval is how often the control loop looks at the CRL file.
const crlInterval = time.Second

// watchCRL re-reads the revocation list when its file changed, as a reload
// would (openvpn re-reads crl-verify's file on each verification): newly
// revoked clients are disconnected. A list that does not load keeps the
// previous one, with an error logged.
func (v *vpnServer) watchCRL(now time.Time) {
	if now.Sub(v.crlChecked) < crlInterval {
		return
	}
	v.crlChecked = now
	v.reconfMu.Lock()
	defer v.reconfMu.Unlock()
	c := v.cfg
	if c.CRL == "" {
		return
	}
	st := stampOf(c.CRL)
	if st == v.crlStamp || st == (fileStamp{}) {
		return
	}
	if _, err := v.reconfigureLocked(&c); err != nil {
		v.d.log.Error("crl changed but does not load; still using the previous list", "crl", c.CRL, "err", err)
		v.crlStamp = st // once per change, not every second
		return
	}
	v.d.log.Info("crl reloaded", "crl", c.CRL)
}

// sendPing seals a keepalive for the control server and sends it from the
// control socket (the address the client talks to).
func (v *vpnServer) sendPing(id uint32) {
	payload, to, err := v.tun.SealPing(id)
	if err != nil {
		return
	}
	_, _ = v.conn.WriteTo(payload, net.UDPAddrFromAddrPort(to))
}

// service is the control loop's VPN step: the tunnel's clock and events,
// and control packets a worker punted (those that reached the data plane
// instead of the kernel socket).
func (v *vpnServer) service(now time.Time, evs []vpn.Event, buf []byte) []vpn.Event {
	v.watchCRL(now)
	evs = v.tun.Poll(now, evs[:0])
	for _, e := range evs {
		switch e.Kind {
		case vpn.EventFloat:
			// The data plane already sends to the new address; the
			// control channel follows it.
			moved := v.srv.PeerFloated(e.Peer, e.Addr)
			v.d.log.Info("vpn peer moved", "peer", e.Peer, "addr", e.Addr, "control_followed", moved)
		case vpn.EventKeyWearOut, vpn.EventKeyExhausted:
			started := v.srv.Renegotiate(e.Peer)
			v.d.log.Warn("vpn data key wearing out; renegotiating", "peer", e.Peer, "key", e.KeyID, "kind", e.Kind.String(), "started", started)
		case vpn.EventExit:
			// explicit-exit-notify: free the session and addresses now
			// rather than after ping-restart.
			v.d.log.Info("vpn peer said goodbye", "peer", e.Peer)
			v.srv.Disconnect(e.Peer)
		case vpn.EventPingDue, vpn.EventExpired:
			// The control server drives keepalives and reaping through
			// SendPing and LastActivity.
		}
	}
	for i := 0; i < 256; i++ {
		pkt, ok := v.tun.ReadControl(buf)
		if !ok {
			break
		}
		v.srv.HandlePacket(pkt.From, pkt.Data)
	}
	return evs
}

// close tells every client to restart (the server's RESTART notice, up to
// 2 s for acknowledgements), then closes the socket.
func (v *vpnServer) close() error {
	err := v.srv.Close()
	select {
	case <-v.served:
	case <-time.After(time.Second):
		err = errors.Join(err, errors.New("vpn: control socket reader did not stop"))
	}
	if v.hooks != nil {
		// The last client-disconnect and learn-address delete run before
		// the process exits (each within hook_timeout).
		v.hooks.Close()
	}
	return err
}

// AddPeer is control.DataPlane: a tunnel entry and host routes for the
// peer's VPN addresses, and routes for the networks behind it (iroutes),
// from which it may then send.
func (v *vpnServer) AddPeer(p control.Peer) error {
	var allowed []netip.Prefix
	for _, a := range []netip.Addr{p.VPNIPv4, p.VPNIPv6} {
		if a.IsValid() {
			allowed = append(allowed, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	iroutes := v.peerIRoutes(p)
	allowed = append(allowed, iroutes...)
	if err := v.tun.AddPeer(vpn.PeerConfig{ID: p.PeerID, Remote: p.Addr, Comp: p.Comp, AllowedSources: allowed}); err != nil {
		return err
	}
	v.mu.Lock()
	for _, pfx := range allowed {
		v.d.fib.set(srcTunnel, pfx, route{nh: fwd.NextHop{Tunnel: true, Peer: p.PeerID}}, true)
	}
	for _, pfx := range iroutes {
		v.irouteOwner[pfx] = p.PeerID
	}
	v.peers[p.PeerID] = p
	v.cids[p.PeerID] = v.nextCID
	v.nextCID++
	v.mu.Unlock()
	v.d.aclPeer(p.PeerID, aclMember{p.CommonName, p.Group}, true)
	v.d.so.poke()
	v.d.log.Info("vpn peer up", "event", "connect", "src", p.Addr, "cn", p.CommonName, "user", p.Username,
		"peer", p.PeerID, "v4", p.VPNIPv4, "v6", p.VPNIPv6, "cipher", p.Cipher.String(), "iroutes", iroutes)
	if v.hooks != nil {
		// multi.c multi_learn_in_addr_t / multi_learn_in6_addr and the
		// iroutes (multi_add_iroutes), after client-connect.
		for _, pfx := range allowed {
			v.hooks.Learned("add", pfx, &p.Client)
		}
	}
	return nil
}

// peerIRoutes are the networks behind p: its [[vpn.iroute]] and
// [[vpn.ccd]] ones and those its client-connect file named.
func (v *vpnServer) peerIRoutes(p control.Peer) []netip.Prefix {
	fixed := v.iroutes[p.CommonName]
	if len(p.IRoutes) == 0 {
		return fixed
	}
	out := slices.Clone(fixed)
	for _, pfx := range p.IRoutes {
		if !slices.Contains(out, pfx) {
			out = append(out, pfx)
		}
	}
	return out
}

func (v *vpnServer) InstallKey(id uint32, slot vpn.Slot, km *vpn.KeyMaterial) error {
	return v.tun.InstallKey(id, slot, km)
}

func (v *vpnServer) SetPrimary(id uint32, keyID uint8) error { return v.tun.SetPrimary(id, keyID) }

func (v *vpnServer) DropKey(id uint32, keyID uint8) error { return v.tun.DropKey(id, keyID) }

func (v *vpnServer) RemovePeer(id uint32) error {
	var unlearned []netip.Prefix // multi.c multi_route_del: learn-address delete
	v.mu.Lock()
	p, ok := v.peers[id]
	cid := v.cids[id]
	delete(v.peers, id)
	delete(v.cids, id)
	if ok {
		for _, a := range []netip.Addr{p.VPNIPv4, p.VPNIPv6} {
			if a.IsValid() {
				v.d.fib.set(srcTunnel, netip.PrefixFrom(a, a.BitLen()), route{}, false)
				unlearned = append(unlearned, netip.PrefixFrom(a, a.BitLen()))
			}
		}
		for _, pfx := range v.peerIRoutes(p) {
			if owner, has := v.irouteOwner[pfx]; has && owner == id {
				delete(v.irouteOwner, pfx)
				v.d.fib.set(srcTunnel, pfx, route{}, false)
				unlearned = append(unlearned, pfx)
			}
		}
	}
	v.mu.Unlock()
	if ok {
		v.d.aclPeer(id, aclMember{}, false)
		v.d.so.poke()
		// Its NAT sessions and port blocks end before the pool may hand
		// the address to someone else (the caller frees it after this).
		if p.VPNIPv4.IsValid() {
			done := v.d.engine.ReleaseNATClient(p.VPNIPv4)
			for end := time.Now().Add(time.Second); !done() && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
		}
		// Totals as the status file's: link bytes, overhead included.
		var rx, tx uint64
		if ps, ok := v.tun.PeerStats(id); ok {
			over := uint64(dataOverhead(p.Comp))
			rx, tx = ps.RxBytes+over*ps.RxPackets, ps.TxBytes+over*ps.TxPackets
		}
		now := time.Now()
		v.d.log.Info("vpn peer down", "event", "disconnect", "src", p.Addr, "cn", p.CommonName, "user", p.Username,
			"peer", id, "client_id", cid, "v4", p.VPNIPv4, "v6", p.VPNIPv6, "bytes_in", rx, "bytes_out", tx,
			"duration", now.Sub(p.Since).Round(time.Second))
		if v.hooks != nil {
			v.hooks.Disconnected(&p.Client, rx, tx, now)
			for _, pfx := range unlearned {
				v.hooks.Learned("delete", pfx, &p.Client)
			}
		}
	}
	return v.tun.RemovePeer(id)
}

// peerHostRoutes are the connected clients' tunnel addresses as host
// routes.
func (v *vpnServer) peerHostRoutes() []netip.Prefix {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []netip.Prefix
	for _, p := range v.peers {
		for _, a := range []netip.Addr{p.VPNIPv4, p.VPNIPv6} {
			if a.IsValid() {
				out = append(out, netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	return out
}

// ownedIRoutes are the iroutes of the clients connected now.
func (v *vpnServer) ownedIRoutes() []netip.Prefix {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]netip.Prefix, 0, len(v.irouteOwner))
	for p := range v.irouteOwner {
		out = append(out, p)
	}
	return out
}

func (v *vpnServer) LastActivity(id uint32) (rx, tx time.Time) { return v.tun.LastActivity(id) }

// snapshot is the VPN part of status.
func (v *vpnServer) snapshot() *status.VPN {
	s := &status.VPN{Listen: []string{v.listen}, Drops: status.Counters{}}
	v.mu.Lock()
	peers := make([]control.Peer, 0, len(v.peers))
	cids := make(map[uint32]uint64, len(v.cids))
	for _, p := range v.peers {
		peers = append(peers, p)
		cids[p.PeerID] = v.cids[p.PeerID]
	}
	owned := map[uint32][]string{}
	for pfx, id := range v.irouteOwner {
		owned[id] = append(owned[id], pfx.String())
	}
	v.mu.Unlock()
	sort.Slice(peers, func(i, j int) bool { return peers[i].PeerID < peers[j].PeerID })
	for _, p := range peers {
		vp := status.VPNPeer{Name: p.CommonName, Real: p.Addr.String(), ClientID: cids[p.PeerID], PeerID: p.PeerID,
			Username: p.Username, Cipher: p.Cipher.String(), Since: p.Since,
			Group: v.d.aclGroupOf(p.PeerID)}
		vp.IRoutes = owned[p.PeerID]
		sort.Strings(vp.IRoutes)
		for _, a := range []netip.Addr{p.VPNIPv4, p.VPNIPv6} {
			if a.IsValid() {
				vp.Addrs = append(vp.Addrs, a.String())
			}
		}
		if ps, ok := v.tun.PeerStats(p.PeerID); ok {
			vp.Real = ps.Remote.String()
			vp.Rx = status.Traffic{Packets: ps.RxPackets, Bytes: ps.RxBytes}
			vp.Tx = status.Traffic{Packets: ps.TxPackets, Bytes: ps.TxBytes}
			over := uint64(dataOverhead(p.Comp))
			vp.LinkRx, vp.LinkTx = ps.RxBytes+over*ps.RxPackets, ps.TxBytes+over*ps.TxPackets
		}
		if rx, _ := v.tun.LastActivity(p.PeerID); !rx.IsZero() {
			vp.LastSeen = rx
		}
		s.Peers = append(s.Peers, vp)
	}
	ts := v.tun.Stats()
	for r := vpn.TunnelDrop(1); r < vpn.NumTunnelDrops; r++ {
		s.Drops["data_"+r.String()] = ts.Drops[r]
	}
	for name, n := range v.srv.Drops() {
		s.Drops["control_"+name] = n
	}
	s.Drops["kernel_data_refused"] = v.conn.refused.Load()
	if h := v.hooks; h != nil {
		// Failed hooks count with the drops: each is a client refused
		// (client-connect) or an event a script missed.
		for _, m := range []map[string]uint64{h.Connect.Failures("hook_client_connect"), h.Disconnect.Failures("hook_client_disconnect"), h.Learn.Failures("hook_learn_address")} {
			for k, n := range m {
				s.Drops[k] = n
			}
		}
	}
	return s
}

// command runs a write operation from the status socket (already checked
// against the caller's credentials by the status server).
func (d *daemon) command(r status.Request) status.Reply {
	switch r.Op {
	case status.OpKill:
		if d.vpn == nil {
			return status.Reply{Error: "the VPN server is not enabled"}
		}
		msg := "RESTART"
		if r.Halt {
			msg = "HALT"
		}
		n := d.vpn.srv.Kill(r.Target, msg)
		d.log.Info("kill from the status socket", "target", r.Target, "message", msg, "sessions", n)
		if n == 0 {
			return status.Reply{Error: fmt.Sprintf("no connected client named or addressed %q", r.Target)}
		}
		return status.Reply{Killed: n}
	case status.OpDrain:
		return d.drainCommand(r)
	}
	return status.Reply{Error: "unknown operation " + r.Op}
}
