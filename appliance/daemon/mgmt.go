package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/ovfwd/ovfwd/appliance/mgmt"
	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/vpn"
)

// monitoring is what OpenVPN operators' tools read: the management
// interface and the status file. Both answer from d.snapshot, and the
// management interface acts through the status socket's kill path.
type monitoring struct {
	history *mgmt.History // the daemon's log and states, for "log" and "state"
	// server and file are nil when off; snapshots read them from any
	// goroutine while a reload replaces them.
	server atomic.Pointer[mgmt.Server]
	file   atomic.Pointer[status.File]
	cfg    config.Config // the [management] and [status] file they run with (Run's goroutine only)
}

// logHistory wraps the daemon's log handler so the management interface
// can replay and follow the log; Run calls it before anything logs.
func (d *daemon) logHistory(next slog.Handler) slog.Handler {
	d.mon = &monitoring{history: mgmt.NewHistory()}
	return d.mon.history.Handler(next)
}

// startMonitoring starts the status file and the management interface.
func (d *daemon) startMonitoring(cfg *config.Config) error {
	if d.mon == nil {
		d.mon = &monitoring{history: mgmt.NewHistory()}
	}
	m := d.mon
	m.cfg.Management, m.cfg.Status.File = cfg.Management, cfg.Status.File
	if f := cfg.Status.File; f.Path != "" {
		sf, err := status.StartFile(f.Path, f.Interval, f.Version, d.snapshot, func(err error) {
			if err != nil {
				d.log.Error("status file not written", "path", f.Path, "err", err)
			} else {
				d.log.Info("status file written again", "path", f.Path)
			}
		})
		if err != nil {
			return err
		}
		m.file.Store(sf)
		d.log.Info("status file", "path", f.Path, "interval", f.Interval, "version", f.Version)
	}
	mc := cfg.Management
	if mc.Socket == "" && !mc.Listen.IsValid() {
		return nil
	}
	access, err := statusAccess(cfg.Status)
	if err != nil {
		return err
	}
	o := mgmt.Options{Socket: mc.Socket, Listen: mc.Listen, MaxClients: mc.MaxClients, Version: d.version,
		StatusFormat: cfg.Status.File.Version, History: m.history, Authorized: access.Authorized, Log: d.log}
	if mc.PasswordFile != "" {
		b, err := os.ReadFile(mc.PasswordFile)
		if err != nil {
			return fmt.Errorf("management: %w", err)
		}
		// openvpn reads the password file's first line.
		o.Password, _, _ = strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
		o.Password = strings.TrimRight(o.Password, "\r")
		if o.Password == "" {
			return fmt.Errorf("management: %s: no password on its first line", mc.PasswordFile)
		}
	}
	s, err := mgmt.Listen(o, mgmtBackend{d})
	if err != nil {
		return err
	}
	m.server.Store(s)
	local4, local6 := d.tunnelAddrs()
	m.history.SetState(d.started, "CONNECTED", "SUCCESS", local4, local6)
	d.log.Info("management interface", "socket", mc.Socket, "listen", mc.Listen)
	return nil
}

// stopMonitoring stops both; the status file keeps its last contents.
func (d *daemon) stopMonitoring() {
	m := d.mon
	if m == nil {
		return
	}
	if s := m.server.Swap(nil); s != nil {
		s.Close()
	}
	if f := m.file.Swap(nil); f != nil {
		f.Close()
	}
}

// reloadMonitoring restarts what a reload changed.
func (d *daemon) reloadMonitoring(nc *config.Config) {
	if m := d.mon; m != nil && m.cfg.Management == nc.Management && m.cfg.Status.File == nc.Status.File {
		return
	}
	d.stopMonitoring()
	if err := d.startMonitoring(nc); err != nil {
		d.log.Error("management interface or status file not restarted", "err", err)
	}
}

// tunnelAddrs are the server's own tunnel addresses (the pools' first),
// which openvpn's "state" shows as its local addresses.
func (d *daemon) tunnelAddrs() (v4, v6 string) {
	d.mu.Lock()
	c := d.cfg.VPN
	d.mu.Unlock()
	if !c.Enabled {
		return "", ""
	}
	first := func(p netip.Prefix) string {
		if !p.IsValid() {
			return ""
		}
		return p.Masked().Addr().Next().String()
	}
	return first(c.PoolV4), first(c.PoolV6)
}

// monitoringCounters are the management interface's and the status
// file's counters for status; nil when neither runs.
func (d *daemon) monitoringCounters() status.Counters {
	m := d.mon
	if m == nil {
		return nil
	}
	srv, file := m.server.Load(), m.file.Load()
	if srv == nil && file == nil {
		return nil
	}
	c := status.Counters{}
	if s := srv; s != nil {
		st := s.Stats()
		c["management_connections"], c["management_refused"] = st.Connections, st.Refused
		c["management_notifications_dropped"], c["management_denied"] = st.Dropped, st.Denied
		c["management_bad_passwords"] = st.BadPassword
	}
	if f := file; f != nil {
		c["status_file_writes"], c["status_file_failures"] = f.Counts()
	}
	return c
}

// dataOverhead is what a P_DATA_V2 packet adds to its payload on the wire:
// opcode and peer id (4), packet id (4), AEAD tag (16), and comp-lzo's
// framing byte (ssl.c tls_prepend_opcode_v2, crypto.c
// openvpn_encrypt_aead, comp.h).
func dataOverhead(c vpn.Comp) int {
	if c == vpn.CompLZO {
		return 25
	}
	return 24
}

// mgmtBackend is the daemon as the management interface's Backend.
type mgmtBackend struct{ d *daemon }

func (b mgmtBackend) Snapshot() status.Snapshot { return b.d.snapshot() }

func (b mgmtBackend) Kill(target string) (int, error) {
	r := b.d.command(status.Request{Op: status.OpKill, Target: target})
	if r.Error != "" {
		return r.Killed, errors.New(r.Error)
	}
	return r.Killed, nil
}

// KillClient finds the client's session by its real address (the data
// plane's, which follows a float) and kills it through the status kill
// path with msg.
func (b mgmtBackend) KillClient(cid uint64, msg string) bool {
	v := b.d.vpn
	if v == nil {
		return false
	}
	var addrs []string
	v.mu.Lock()
	for id, c := range v.cids {
		if c == cid {
			addrs = append(addrs, v.peers[id].Addr.String())
			if ps, ok := v.tun.PeerStats(id); ok {
				addrs = append([]string{netip.AddrPortFrom(ps.Remote.Addr().Unmap(), ps.Remote.Port()).String()}, addrs...)
			}
		}
	}
	v.mu.Unlock()
	for _, a := range addrs {
		if n := v.srv.Kill(a, msg); n > 0 {
			b.d.log.Info("client-kill from the management interface", "cid", cid, "real", a, "message", msg)
			return true
		}
	}
	return false
}

// Signal sends the daemon the signal, so it takes the same path as one
// from systemctl.
func (b mgmtBackend) Signal(name string) error {
	sig := map[string]syscall.Signal{"SIGHUP": syscall.SIGHUP, "SIGTERM": syscall.SIGTERM}[name]
	if sig == 0 {
		return fmt.Errorf("unsupported signal %s", name)
	}
	b.d.log.Info("signal from the management interface", "signal", name)
	return syscall.Kill(os.Getpid(), sig)
}
