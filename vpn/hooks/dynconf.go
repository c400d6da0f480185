package hooks

import (
	"fmt"
	"net/netip"
	"strings"
)

// Dynamic is what a client-connect command's configuration file says, in
// the options ovfwd applies per client (those of a [[vpn.ccd]]), with
// openvpn's client-config-dir syntax (options.c, OPT_P_INSTANCE).
type Dynamic struct {
	IPv4, IPv6 netip.Addr     // ifconfig-push, ifconfig-ipv6-push
	Push       []string       // push "…": options added to this client's PUSH_REPLY
	IRoutes    []netip.Prefix // iroute, iroute-ipv6
	Disable    bool           // disable: refuse the client
	Ignored    []string       // options ovfwd does not apply, for the log
}

// maxConfigFile bounds the file read back from the command.
const maxConfigFile = 64 << 10

// ParseConfig reads a dynamic configuration file. An option whose
// arguments are wrong is an error (openvpn refuses the client when its
// ccd options do not parse); an option ovfwd does not support is listed
// in Ignored.
func ParseConfig(data []byte) (Dynamic, error) {
	var d Dynamic
	if len(data) > maxConfigFile {
		return d, fmt.Errorf("larger than %d bytes", maxConfigFile)
	}
	for n, line := range strings.Split(string(data), "\n") {
		toks, err := tokens(line)
		if err != nil {
			return d, fmt.Errorf("line %d: %v", n+1, err)
		}
		if len(toks) == 0 {
			continue
		}
		o := struct {
			Name string
			Args []string
		}{strings.TrimPrefix(toks[0], "--"), toks[1:]}
		if strings.HasPrefix(o.Name, "<") {
			return d, fmt.Errorf("line %d: inline blocks are not allowed here", n+1)
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("line %d: %s: %s", n+1, o.Name, fmt.Sprintf(format, a...))
		}
		switch o.Name {
		case "ifconfig-push":
			if len(o.Args) < 1 || len(o.Args) > 3 {
				return d, bad("takes an address and a netmask")
			}
			a, err := netip.ParseAddr(o.Args[0])
			if err != nil || !a.Is4() {
				return d, bad("%q is not an IPv4 address", o.Args[0])
			}
			d.IPv4 = a
		case "ifconfig-ipv6-push":
			if len(o.Args) < 1 || len(o.Args) > 2 {
				return d, bad("takes an address/length")
			}
			p, err := netip.ParsePrefix(o.Args[0])
			if err != nil || !p.Addr().Is6() {
				return d, bad("%q is not an IPv6 address/length", o.Args[0])
			}
			d.IPv6 = p.Addr()
		case "iroute":
			if len(o.Args) < 1 || len(o.Args) > 2 {
				return d, bad("takes a network and a netmask")
			}
			mask := "255.255.255.255"
			if len(o.Args) == 2 {
				mask = o.Args[1]
			}
			p, err := prefix4(o.Args[0], mask)
			if err != nil {
				return d, bad("%v", err)
			}
			d.IRoutes = append(d.IRoutes, p)
		case "iroute-ipv6":
			if len(o.Args) != 1 {
				return d, bad("takes a network/length")
			}
			p, err := netip.ParsePrefix(o.Args[0])
			if err != nil || !p.Addr().Is6() {
				return d, bad("%q is not an IPv6 network/length", o.Args[0])
			}
			d.IRoutes = append(d.IRoutes, p.Masked())
		case "push":
			if len(o.Args) != 1 {
				return d, bad("takes one quoted option")
			}
			// A comma would split the option in the PUSH_REPLY into two
			// the command did not write.
			opt := strings.TrimSpace(o.Args[0])
			if opt == "" || len(opt) > 256 || strings.ContainsFunc(opt, func(r rune) bool { return r == ',' || r < 0x20 || r == 0x7f }) {
				return d, bad("%q is not one option", o.Args[0])
			}
			d.Push = append(d.Push, opt)
		case "disable":
			d.Disable = true
		default:
			d.Ignored = append(d.Ignored, o.Name)
		}
	}
	return d, nil
}

// prefix4 is NET MASK as a prefix; the mask must be contiguous.
func prefix4(network, mask string) (netip.Prefix, error) {
	a, err := netip.ParseAddr(network)
	if err != nil || !a.Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 network", network)
	}
	m, err := netip.ParseAddr(mask)
	if err != nil || !m.Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not a netmask", mask)
	}
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	bits := 0
	for v&0x80000000 != 0 {
		bits++
		v <<= 1
	}
	if v != 0 {
		return netip.Prefix{}, fmt.Errorf("%q is not a contiguous netmask", mask)
	}
	return netip.PrefixFrom(a, bits).Masked(), nil
}

// tokens splits one line as openvpn's options.c parse_line does: blanks
// separate, '#' or ';' starting a token ends the line, double quotes
// group and take backslash escapes, single quotes group verbatim, and a
// backslash outside quotes escapes the next character.
func tokens(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in := false // inside a token
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			if in {
				out, in = append(out, cur.String()), false
				cur.Reset()
			}
		case !in && (c == '#' || c == ';'):
			return out, nil
		case c == '"' || c == '\'':
			in = true
			j := i + 1
			for ; j < len(line) && line[j] != c; j++ {
				if c == '"' && line[j] == '\\' && j+1 < len(line) {
					j++
				}
				cur.WriteByte(line[j])
			}
			if j == len(line) {
				return nil, fmt.Errorf("unterminated quote")
			}
			i = j
		case c == '\\':
			if i+1 == len(line) {
				return nil, fmt.Errorf("backslash at the end of the line")
			}
			in = true
			i++
			cur.WriteByte(line[i])
		default:
			in = true
			cur.WriteByte(c)
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out, nil
}
