package openvpnconf

import (
	"fmt"
	"math/bits"
	"net/netip"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Verdict is what import did with an option.
type Verdict string

const (
	Mapped    Verdict = "mapped"     // onto the ovfwd.toml key(s) named
	NotNeeded Verdict = "not needed" // ovfwd always behaves so, or has nothing it would act on
	Refused   Verdict = "refused"    // no ovfwd equivalent; the note says what is lost and what to do
)

// Row is one option line of the input and what became of it.
type Row struct {
	Line    int
	Option  string // the table's name for it: "port", `push "route"`, "<ca>"
	Text    string // the line as written (parameters re-joined)
	Verdict Verdict
	Keys    string // ovfwd.toml keys it set
	Note    string
	// Fatal: without this option the server cannot serve its clients at
	// all (a TCP or TAP server), so import writes nothing.
	Fatal bool
}

// Port is a [[port]] import writes: a server.conf names no NICs.
type Port struct {
	IfName    string
	Addresses []netip.Prefix
}

// ParsePort reads IFNAME=PREFIX[,PREFIX…], e.g.
// "eth0=192.0.2.1/24,2001:db8::1/64".
func ParsePort(s string) (Port, error) {
	name, addrs, _ := strings.Cut(s, "=")
	if name == "" || len(name) > 15 || strings.ContainsAny(name, "/ \t") {
		return Port{}, fmt.Errorf("bad interface name in %q (want IFNAME=ADDR/LEN[,ADDR/LEN])", s)
	}
	p := Port{IfName: name}
	for _, a := range strings.Split(addrs, ",") {
		if a == "" {
			continue
		}
		pfx, err := netip.ParsePrefix(a)
		if err != nil {
			return Port{}, fmt.Errorf("port %s: %v", name, err)
		}
		p.Addresses = append(p.Addresses, pfx)
	}
	return p, nil
}

// Options steer a translation.
type Options struct {
	// Source is the server.conf's path, for the header; Dir its directory,
	// which relative paths are resolved against (openvpn-server@.service
	// runs in it), unless the file says cd.
	Source, Dir string
	// KeyDir is where inline blocks are written; "" refuses inline
	// private keys (import needs -o to know where).
	KeyDir string
	// CCD replaces the file's client-config-dir.
	CCD string
	// ReadCCD reads a client-config-dir: file name → contents. nil skips
	// reading it (the ccd files are then listed as refused).
	ReadCCD func(dir string) (map[string][]byte, error)
	Ports   []Port
}

// OutFile is an inline block written out as a file.
type OutFile struct {
	Path   string
	Data   []byte
	Secret bool // private: 0640, group of the daemon
}

// Result is a translation.
type Result struct {
	TOML  []byte
	Rows  []Row
	Files []OutFile
}

// Fatal lists the rows that stop the translation.
func (r *Result) Fatal() []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Fatal {
			out = append(out, row)
		}
	}
	return out
}

// Count is how many rows have verdict v.
func (r *Result) Count(v Verdict) int {
	n := 0
	for _, row := range r.Rows {
		if row.Verdict == v {
			n++
		}
	}
	return n
}

// vpn collects what becomes [vpn], in the order it is written.
type vpn struct {
	listen                          []string
	port                            int
	ca, cert, key                   string
	tlsCrypt, tlsAuth, tlsCryptV2   string
	keyDirection                    *int
	authDigest                      string
	crl                             string
	pool4, pool6                    netip.Prefix
	pushRoutes                      []netip.Prefix
	ciphers                         []string
	keepalive                       [2]int
	renegSec                        *int
	maxPeers, handshakeRate         int
	replayWindow, tunMTU            int
	compress                        bool
	clientToClient, duplicateCN     bool
	poolPersist                     string
	redirect                        []string
	dns                             []netip.Addr
	dnsDomain                       string
	authVerify                      []string
	clientConnect, clientDisconnect []string
	learnAddress                    []string
	usernameAsCN                    bool
	verifyClientCert                string
	ccd                             []ccd
}

type ccd struct {
	cn          string
	v4, v6      netip.Addr
	pushRoutes  []netip.Prefix
	iroutes     []netip.Prefix
	disable     bool
	refusedNote []string
}

type translator struct {
	o        Options
	f        *File
	v        vpn
	mss      int
	logLevel string
	rows     []Row
	files    []OutFile
	dir      string // after cd
	ccdDir   string
	ccdLine  int
	authLine int // the auth line, applied once tls-auth is known
	authArg  string
}

// Translate maps f onto an ovfwd.toml.
func Translate(f *File, o Options) (*Result, error) {
	t := &translator{o: o, f: f, dir: o.Dir}
	for _, d := range f.Directives {
		if d.Name == "cd" && len(d.Args) == 1 {
			t.dir = t.abs(d.Args[0])
		}
	}
	for _, d := range f.Directives {
		t.directive(d)
	}
	t.finishAuth()
	for _, in := range f.Inlines {
		t.inline(in)
	}
	t.readCCD()
	t.finish()
	sort.SliceStable(t.rows, func(i, j int) bool { return t.rows[i].Line < t.rows[j].Line })
	res := &Result{Rows: t.rows, Files: t.files}
	if len(res.Fatal()) == 0 {
		res.TOML = t.render()
	}
	return res, nil
}

func (t *translator) abs(p string) string {
	if filepath.IsAbs(p) || t.dir == "" {
		return filepath.Clean(p)
	}
	return filepath.Join(t.dir, p)
}

func (t *translator) add(r Row) { t.rows = append(t.rows, r) }

func text(d Directive) string {
	parts := []string{d.Name}
	for _, a := range d.Args {
		if a == "" || strings.ContainsAny(a, " \t#;\"") {
			a = strconv.Quote(a)
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

func (t *translator) directive(d Directive) {
	r := Row{Line: d.Line, Option: d.Name, Text: text(d)}
	s, ok := specs[d.Name]
	if d.Name == "push" {
		t.push(d, &r)
		t.add(r)
		return
	}
	if !ok {
		r.Verdict, r.Note = Refused, "not an option ovfwd knows how to translate: check the OpenVPN manual for what it does and whether you need it"
		t.add(r)
		return
	}
	r.Verdict, r.Keys, r.Note, r.Fatal = s.verdict, s.keys, s.note, s.fatal
	if s.apply != nil {
		s.apply(t, d, &r)
	}
	t.add(r)
}

// refuse turns r into a refusal with note.
func refuse(r *Row, format string, args ...any) {
	r.Verdict, r.Keys, r.Note = Refused, "", fmt.Sprintf(format, args...)
}

func wantArgs(d Directive, r *Row, lo, hi int) bool {
	if len(d.Args) < lo || len(d.Args) > hi {
		refuse(r, "expected %d to %d parameters, found %d", lo, hi, len(d.Args))
		return false
	}
	return true
}

func atoi(d Directive, r *Row, i, lo, hi int) (int, bool) {
	if i >= len(d.Args) {
		refuse(r, "missing parameter")
		return 0, false
	}
	n, err := strconv.Atoi(d.Args[i])
	if err != nil || n < lo || n > hi {
		refuse(r, "%q is not a number from %d to %d (the range ovfwd accepts)", d.Args[i], lo, hi)
		return 0, false
	}
	return n, true
}

// netmask reads an IPv4 network and dotted netmask.
func netmask(addr, mask string) (netip.Prefix, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 address", addr)
	}
	m, err := netip.ParseAddr(mask)
	if err != nil || !m.Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not a netmask", mask)
	}
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	n := bits.LeadingZeros32(^v)
	if v<<n != 0 {
		return netip.Prefix{}, fmt.Errorf("%q is not a contiguous netmask", mask)
	}
	return netip.PrefixFrom(a, n), nil
}

// file handles an option naming a file (ca, cert, …): a path, or
// "[inline]" / nothing with an inline block of the same name.
func (t *translator) file(d Directive, r *Row, dst *string) {
	if len(d.Args) == 0 || d.Args[0] == "[inline]" {
		if _, ok := t.f.Inline(d.Name); !ok {
			refuse(r, "no path and no <%s> block", d.Name)
			return
		}
		r.Note = fmt.Sprintf("from the <%s> block", d.Name)
		return // inline() fills dst
	}
	*dst = t.abs(d.Args[0])
}

// inlineFiles are the blocks import writes out, by tag: file name, secret.
var inlineFiles = map[string]struct {
	name, key string
	secret    bool
}{
	"ca":           {"ca.crt", "ca", false},
	"cert":         {"server.crt", "cert", false},
	"key":          {"server.key", "key", true},
	"tls-crypt":    {"tls-crypt.key", "tls_crypt", true},
	"tls-auth":     {"tls-auth.key", "tls_auth", true},
	"tls-crypt-v2": {"tls-crypt-v2.key", "tls_crypt_v2", true},
	"crl-verify":   {"crl.pem", "crl", false},
}

func (t *translator) inline(in Inline) {
	r := Row{Line: in.Line, Option: "<" + in.Tag + ">", Text: "<" + in.Tag + ">"}
	switch in.Tag {
	case "dh":
		r.Verdict, r.Note = NotNeeded, "TLS uses ECDHE (X25519, P-256, P-384); no DH parameters"
		t.add(r)
		return
	case "connection", "extra-certs", "secret", "http-proxy-user-pass", "auth-user-pass", "peer-fingerprint", "pkcs12":
		refuse(&r, "not supported: ovfwd reads ca, cert, key, tls-crypt, tls-auth, tls-crypt-v2 and crl-verify only")
		r.Fatal = in.Tag == "peer-fingerprint" || in.Tag == "secret" || in.Tag == "pkcs12"
		t.add(r)
		return
	}
	out, ok := inlineFiles[in.Tag]
	if !ok {
		refuse(&r, "unknown inline block")
		t.add(r)
		return
	}
	if t.o.KeyDir == "" {
		refuse(&r, "inline blocks are written out as files next to the output: give -o FILE")
		r.Fatal = true
		t.add(r)
		return
	}
	path := filepath.Join(t.o.KeyDir, out.name)
	t.files = append(t.files, OutFile{Path: path, Data: []byte(in.Body), Secret: out.secret})
	dst := map[string]*string{"ca": &t.v.ca, "cert": &t.v.cert, "key": &t.v.key, "tls-crypt": &t.v.tlsCrypt,
		"tls-auth": &t.v.tlsAuth, "tls-crypt-v2": &t.v.tlsCryptV2, "crl-verify": &t.v.crl}[in.Tag]
	*dst = path
	r.Verdict, r.Keys = Mapped, out.key
	mode := "0644"
	if out.secret {
		mode = "0640, group of the ovfwd user"
	}
	r.Note = fmt.Sprintf("written to %s (mode %s)", path, mode)
	t.add(r)
}

// auth sets tls-auth's HMAC; with tls-crypt and AEAD data ciphers nothing
// uses it. It is applied after every line is read: it may come first.
func (t *translator) finishAuth() {
	if t.authLine == 0 {
		return
	}
	for i := range t.rows {
		r := &t.rows[i]
		if r.Line != t.authLine {
			continue
		}
		_, inline := t.f.Inline("tls-auth")
		if t.v.tlsAuth == "" && !inline {
			r.Verdict, r.Keys = NotNeeded, ""
			r.Note = "auth is the HMAC of tls-auth and of CBC data channels; with tls-crypt and AEAD ciphers nothing uses it"
			return
		}
		switch d := strings.ToUpper(t.authArg); d {
		case "SHA1", "SHA256", "SHA512":
			t.v.authDigest = d
		default:
			refuse(r, "tls-auth HMAC %s is not supported: use SHA1, SHA256 or SHA512 (server and clients alike)", t.authArg)
		}
	}
}

func (t *translator) finish() {
	_, crypt := t.f.Inline("tls-crypt")
	_, auth := t.f.Inline("tls-auth")
	_, v2 := t.f.Inline("tls-crypt-v2")
	if (t.v.tlsAuth != "" || auth) && t.v.keyDirection == nil {
		t.add(Row{Option: "key-direction", Verdict: Refused, Fatal: true,
			Note: "tls-auth without a key direction (both directions on one key half) is not supported: " +
				"use tls-auth with direction 0 here and key-direction 1 (or tls-auth FILE 1) in every client profile, then import again"})
	}
	if t.v.tlsCrypt == "" && t.v.tlsAuth == "" && t.v.tlsCryptV2 == "" && !crypt && !auth && !v2 {
		t.add(Row{Option: "tls-auth", Verdict: Refused, Fatal: true,
			Note: "no tls-auth, tls-crypt or tls-crypt-v2: ovfwd admits no unauthenticated control-channel packets; " +
				"make a key (openvpn --genkey tls-crypt tc.key), add tls-crypt tc.key here and to every client profile, then import again"})
	}
	if !t.v.pool4.IsValid() && !t.v.pool6.IsValid() {
		t.add(Row{Option: "server", Verdict: Refused, Fatal: true,
			Note: "no `server` or `server-ipv6` line: ovfwd needs an address pool (pool_v4 / pool_v6)"})
	}
}

func (t *translator) push(d Directive, r *Row) {
	if len(d.Args) != 1 {
		refuse(r, "push takes one quoted option")
		return
	}
	inner := Directive{Line: d.Line}
	toks, err := tokens(d.Args[0])
	if err != nil || len(toks) == 0 {
		refuse(r, "cannot read the pushed option")
		return
	}
	inner.Name, inner.Args = toks[0], toks[1:]
	name := inner.Name
	if name == "dhcp-option" && len(inner.Args) > 0 {
		name += " " + strings.ToUpper(inner.Args[0])
	}
	r.Option = "push \"" + name + "\""
	s, ok := pushSpecs[name]
	if !ok {
		refuse(r, "ovfwd pushes only what it implements (routes, redirect-gateway, DNS, DOMAIN, topology, keepalive, tun-mtu); this option would be lost")
		return
	}
	r.Verdict, r.Keys, r.Note = s.verdict, s.keys, s.note
	if s.apply != nil {
		s.apply(t, inner, r)
	}
}

// readCCD turns the client-config-dir's files into [[vpn.ccd]].
func (t *translator) readCCD() {
	dir := t.ccdDir
	if t.o.CCD != "" {
		dir = t.o.CCD
	}
	if dir == "" {
		return
	}
	if t.o.ReadCCD == nil {
		return
	}
	files, err := t.o.ReadCCD(dir)
	if err != nil {
		t.add(Row{Line: t.ccdLine, Option: "client-config-dir", Verdict: Refused,
			Note: fmt.Sprintf("cannot read %s: %v; give the directory with -ccd DIR", dir, err)})
		return
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		if name == "DEFAULT" {
			t.add(Row{Line: t.ccdLine, Option: "ccd DEFAULT", Verdict: Refused,
				Note: "the DEFAULT file (settings for clients without a file of their own) has no equivalent: put its routes in push_routes"})
			continue
		}
		t.ccdFile(dir, name, files[name])
	}
}

func (t *translator) ccdFile(dir, cn string, data []byte) {
	f, err := Parse(data)
	where := filepath.Join(dir, cn)
	if err != nil {
		t.add(Row{Line: t.ccdLine, Option: "ccd file", Verdict: Refused, Note: fmt.Sprintf("%s: %v", where, err)})
		return
	}
	c := ccd{cn: cn}
	for _, d := range f.Directives {
		r := Row{Line: t.ccdLine, Option: "ccd " + d.Name, Text: where + ":" + strconv.Itoa(d.Line) + ": " + text(d), Verdict: Mapped}
		switch d.Name {
		case "ifconfig-push":
			if len(d.Args) < 1 {
				refuse(&r, "ifconfig-push needs an address")
				break
			}
			a, err := netip.ParseAddr(d.Args[0])
			if err != nil || !a.Is4() {
				refuse(&r, "%q is not an IPv4 address", d.Args[0])
				break
			}
			c.v4, r.Keys = a, "vpn.ccd.ipv4"
		case "ifconfig-ipv6-push":
			if len(d.Args) < 1 {
				refuse(&r, "ifconfig-ipv6-push needs an address")
				break
			}
			p, err := netip.ParsePrefix(d.Args[0])
			if err != nil || !p.Addr().Is6() {
				refuse(&r, "%q is not an IPv6 address/length", d.Args[0])
				break
			}
			c.v6, r.Keys = p.Addr(), "vpn.ccd.ipv6"
		case "iroute", "iroute-ipv6":
			p, err := routePrefix(d)
			if err != nil {
				refuse(&r, "%v", err)
				break
			}
			c.iroutes, r.Keys = append(c.iroutes, p), "vpn.ccd.iroutes"
		case "push":
			if len(d.Args) == 1 {
				if toks, _ := tokens(d.Args[0]); len(toks) > 0 && (toks[0] == "route" || toks[0] == "route-ipv6") {
					if p, err := routePrefix(Directive{Name: toks[0], Args: toks[1:]}); err == nil {
						c.pushRoutes, r.Keys = append(c.pushRoutes, p), "vpn.ccd.push_routes"
						break
					}
				}
			}
			refuse(&r, "per-client pushes other than routes are not supported")
		case "disable":
			c.disable, r.Keys = true, "vpn.ccd.disable"
		case "push-reset":
			refuse(&r, "not supported: every client gets [vpn]'s pushes; this client's would be kept")
		default:
			refuse(&r, "not supported in a client-config-dir file")
		}
		t.add(r)
	}
	t.v.ccd = append(t.v.ccd, c)
}

// routePrefix reads route's "NET MASK" or route-ipv6's "NET/LEN".
func routePrefix(d Directive) (netip.Prefix, error) {
	if len(d.Args) == 0 {
		return netip.Prefix{}, fmt.Errorf("%s needs a network", d.Name)
	}
	if strings.HasSuffix(d.Name, "-ipv6") {
		p, err := netip.ParsePrefix(d.Args[0])
		if err != nil || !p.Addr().Is6() {
			return netip.Prefix{}, fmt.Errorf("%q is not an IPv6 prefix", d.Args[0])
		}
		return p.Masked(), nil
	}
	mask := "255.255.255.255"
	if len(d.Args) > 1 {
		mask = d.Args[1]
	}
	p, err := netmask(d.Args[0], mask)
	if err != nil {
		return netip.Prefix{}, err
	}
	return p.Masked(), nil
}

// logLevel maps openvpn's verb onto [log] level.
func logLevel(verb int) string {
	switch {
	case verb <= 0:
		return "error"
	case verb <= 2:
		return "warn"
	case verb <= 4:
		return "info"
	}
	return "debug"
}

// poolHosts is the number of client addresses in a pool: the network,
// the server's .1 and (IPv4) the broadcast address are not handed out.
func poolHosts(p netip.Prefix) int {
	hostBits := p.Addr().BitLen() - p.Bits()
	if hostBits > 30 {
		return 1 << 30
	}
	n := 1<<hostBits - 2
	if p.Addr().Is4() {
		n--
	}
	return n
}
