package config

import (
	"net/netip"
	"strings"
	"time"
)

// Management is [management]: OpenVPN's management interface, the subset
// monitoring and admin tools use (appliance/mgmt).
type Management struct {
	// Socket is the unix socket (absolute path; "" = off, the default),
	// as openvpn's "management PATH unix".
	Socket string
	// Listen is an optional TCP address on loopback, as openvpn's
	// "management IP PORT PWFILE"; it needs PasswordFile.
	Listen netip.AddrPort
	// PasswordFile holds the password TCP clients must give first (its
	// first line, as openvpn reads it).
	PasswordFile string
	// MaxClients caps the connections served at once.
	MaxClients int
}

// StatusFile is [status] file, file_interval and file_version: openvpn's
// "status FILE N" and "status-version V".
type StatusFile struct {
	Path     string        // absolute; "" = off (the default)
	Interval time.Duration // rewritten this often (openvpn's default is 60 s)
	Version  int           // 1, 2 or 3 (openvpn's default is 1)
}

// DefaultManagement is [management] when the file says nothing: off.
func DefaultManagement() Management { return Management{MaxClients: 16} }

// DefaultStatusFile is the status file's defaults: off, openvpn's interval
// and version when turned on.
func DefaultStatusFile() StatusFile { return StatusFile{Interval: 60 * time.Second, Version: 1} }

func (d *decoder) management(t *table, m *Management) {
	if t.str("socket", &m.Socket) && m.Socket != "" && !strings.HasPrefix(m.Socket, "/") {
		d.errorf(t.key("socket"), `use an absolute path, e.g. "/run/ovfwd/management.sock", or "" to turn it off`, "socket path %q is not absolute", m.Socket)
	}
	var s string
	if t.str("listen", &s) && s != "" {
		ap, err := netip.ParseAddrPort(s)
		switch {
		case err != nil || ap.Port() == 0:
			d.errorf(t.key("listen"), `write address:port, e.g. "127.0.0.1:7505", or "" for none`, "bad listen address %q", s)
		case !ap.Addr().IsLoopback():
			d.errorf(t.key("listen"), `use a loopback address (127.0.0.1 or [::1]); remote tools reach it through ssh`, "management on %s is not loopback: its password travels in clear text", ap.Addr())
		default:
			m.Listen = ap
		}
	}
	if t.str("password_file", &m.PasswordFile) && m.PasswordFile != "" && !strings.HasPrefix(m.PasswordFile, "/") {
		d.errorf(t.key("password_file"), `use an absolute path, e.g. "/etc/ovfwd/management.pw"`, "password file path %q is not absolute", m.PasswordFile)
	}
	if m.Listen.IsValid() && m.PasswordFile == "" {
		d.errorf(t.key("listen"), `add password_file = "/etc/ovfwd/management.pw" (openvpn's management-client-auth pw file)`, "TCP management needs a password file")
	}
	t.integer("max_clients", &m.MaxClients, 1, 1024)
	t.done()
}

// statusFile decodes the status file's keys of [status].
func (d *decoder) statusFile(t *table, f *StatusFile) {
	if t.str("file", &f.Path) && f.Path != "" && !strings.HasPrefix(f.Path, "/") {
		d.errorf(t.key("file"), `use an absolute path, e.g. "/run/ovfwd/openvpn-status.log", or "" to turn it off`, "status file path %q is not absolute", f.Path)
	}
	t.duration("file_interval", &f.Interval, time.Second, time.Hour)
	t.integer("file_version", &f.Version, 1, 3)
}
