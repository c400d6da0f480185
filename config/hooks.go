package config

import (
	"strings"
	"time"
)

// VPNHooks are [vpn]'s client-connect, client-disconnect and
// learn-address commands (openvpn's --client-connect, --client-disconnect
// and --learn-address, with their environment and arguments), and their
// bounds. Each command is a program's absolute path and leading
// arguments; empty = none. Changing them needs a restart.
type VPNHooks struct {
	ClientConnect    []string
	ClientDisconnect []string
	LearnAddress     []string
	Timeout          time.Duration // per command, queueing and deferral included; default 30s
	Concurrency      int           // commands at once, all three together; default 64
}

func defaultVPNHooks() VPNHooks { return VPNHooks{Timeout: 30 * time.Second, Concurrency: 64} }

func (d *decoder) vpnHooks(t *table, h *VPNHooks) {
	for _, c := range []struct {
		key string
		dst *[]string
	}{{"client_connect", &h.ClientConnect}, {"client_disconnect", &h.ClientDisconnect}, {"learn_address", &h.LearnAddress}} {
		if !t.strings(c.key, c.dst, c.key+` = ["/usr/local/bin/`+strings.ReplaceAll(c.key, "_", "-")+`"]`) {
			continue
		}
		switch {
		case len(*c.dst) == 0:
			d.errorf(t.key(c.key), "name the program, or remove the key", "empty command")
			*c.dst = nil
		case !strings.HasPrefix((*c.dst)[0], "/"):
			d.errorf(indexPath(t.key(c.key), 0), "use the program's absolute path (it runs with a minimal PATH)", "%q is not an absolute path", (*c.dst)[0])
			*c.dst = nil
		}
	}
	t.duration("hook_timeout", &h.Timeout, 100*time.Millisecond, 10*time.Minute)
	t.integer("hook_concurrency", &h.Concurrency, 1, 4096)
}
