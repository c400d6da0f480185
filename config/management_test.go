package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestManagementAndStatusFile(t *testing.T) {
	c, err := Parse("x.toml", []byte(twoPorts+`
[status]
file = "/run/ovfwd/openvpn-status.log"
file_interval = "10s"
file_version = 3

[management]
socket = "/run/ovfwd/management.sock"
listen = "127.0.0.1:7505"
password_file = "/etc/ovfwd/management.pw"
max_clients = 4
`))
	if err != nil {
		t.Fatal(err)
	}
	if f := c.Status.File; f != (StatusFile{Path: "/run/ovfwd/openvpn-status.log", Interval: 10 * time.Second, Version: 3}) {
		t.Errorf("status file %+v", f)
	}
	if m := c.Management; m.Socket != "/run/ovfwd/management.sock" || m.Listen != netip.MustParseAddrPort("127.0.0.1:7505") ||
		m.PasswordFile != "/etc/ovfwd/management.pw" || m.MaxClients != 4 {
		t.Errorf("management %+v", m)
	}
	d, err := Parse("x.toml", []byte(twoPorts))
	if err != nil {
		t.Fatal(err)
	}
	if d.Management.Socket != "" || d.Management.Listen.IsValid() || d.Status.File.Path != "" || d.Status.File.Version != 1 ||
		d.Status.File.Interval != time.Minute || d.Management.MaxClients != 16 {
		t.Errorf("defaults: %+v %+v", d.Management, d.Status.File)
	}
}

func TestManagementRefused(t *testing.T) {
	for text, want := range map[string]string{
		"[management]\nlisten = \"198.18.0.1:7505\"\npassword_file = \"/p\"\n": "not loopback",
		"[management]\nlisten = \"127.0.0.1:7505\"\n":                          "needs a password file",
		"[management]\nsocket = \"run/m.sock\"\n":                              "not absolute",
		"[management]\nlisten = \"127.0.0.1\"\npassword_file = \"/p\"\n":       "bad listen address",
		"[status]\nfile = \"status.log\"\n":                                    "not absolute",
		"[status]\nfile_version = 4\n":                                         "out of range",
		"[status]\nfile_interval = \"10ms\"\n":                                 "out of range",
	} {
		_, err := Parse("x.toml", []byte(twoPorts+text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", text, err, want)
		}
	}
}
