package config

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"time"
)

// decoder walks the generic tree toml produced (map[string]any) against the
// schema, collecting every error instead of stopping at the first.
type decoder struct {
	file  string
	lines lineIndex
	errs  ErrorList
	bad   map[string]bool // keys that already have an error
}

// errorf records an error at key (a full path; "" for none).
func (d *decoder) errorf(key, fix, format string, args ...any) {
	line := 0
	if key != "" {
		line = d.lines.lookup(key)
		if line < 1 {
			line = 1 // the key exists, so the file has a line; never report 0 for a key
		}
	}
	if d.bad == nil {
		d.bad = map[string]bool{}
	}
	d.bad[key] = true
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Key: key, Msg: fmt.Sprintf(format, args...), Fix: fix})
}

// table is one TOML table being decoded. Every getter marks its key used;
// done reports the keys nobody asked for.
type table struct {
	d     *decoder
	path  string
	m     map[string]any
	known []string
}

func (t *table) key(k string) string { return joinPath(t.path, k) }

func (t *table) get(k string) (any, bool) {
	t.known = append(t.known, k)
	v, ok := t.m[k]
	return v, ok
}

// done reports unknown keys, suggesting the nearest known one.
func (t *table) done() {
	var unknown []string
	for k := range t.m {
		if !contains(t.known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		fix := "remove it"
		if s := nearest(k, t.known); s != "" {
			fix = fmt.Sprintf("did you mean %q?", s)
		} else if len(t.known) > 0 {
			fix = "remove it; known keys here: " + strings.Join(t.known, ", ")
		}
		where := "at the top level"
		if t.path != "" {
			where = "in [" + t.path + "]"
		}
		t.d.errorf(t.key(k), fix, "unknown key %s", where)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// nearest is the candidate within edit distance 2 of s, if any.
func nearest(s string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(s, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// typeName is how an operator would call the TOML type of v.
func typeName(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("string %q", v)
	case int64:
		return fmt.Sprintf("integer %d", v)
	case float64:
		return fmt.Sprintf("float %v", v)
	case bool:
		return fmt.Sprintf("boolean %v", v)
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("date-time %v", v)
}

func (t *table) wrongType(key string, v any, want, example string) {
	t.d.errorf(key, "write it as "+example, "expected %s, got %s", want, typeName(v))
}

// sub is the table at k; an absent table decodes as empty.
func (t *table) sub(k string) *table {
	s := &table{d: t.d, path: t.key(k)}
	v, ok := t.get(k)
	if !ok {
		return s
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.wrongType(t.key(k), v, "a table", "["+t.key(k)+"] with keys below it")
		return s
	}
	s.m = m
	return s
}

// list is the array of tables at k ([[k]] or k = [{…}, …]).
func (t *table) list(k string) []*table {
	v, ok := t.get(k)
	if !ok {
		return nil
	}
	var ms []map[string]any
	switch v := v.(type) {
	case []map[string]any:
		ms = v
	case []any:
		for i, e := range v {
			m, ok := e.(map[string]any)
			if !ok {
				t.wrongType(indexPath(t.key(k), i), e, "a table", "[["+t.key(k)+"]] sections")
				continue
			}
			ms = append(ms, m)
		}
	default:
		t.wrongType(t.key(k), v, "an array of tables", "[["+t.key(k)+"]] sections")
		return nil
	}
	out := make([]*table, len(ms))
	for i, m := range ms {
		out[i] = &table{d: t.d, path: indexPath(t.key(k), i), m: m}
	}
	return out
}

func (t *table) str(k string, dst *string) bool {
	v, ok := t.get(k)
	if !ok {
		return false
	}
	s, ok := v.(string)
	if !ok {
		t.wrongType(t.key(k), v, "a string", fmt.Sprintf("%s = \"…\"", k))
		return false
	}
	*dst = s
	return true
}

func (t *table) boolean(k string, dst *bool) bool {
	v, ok := t.get(k)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		t.wrongType(t.key(k), v, "a boolean", k+" = true or "+k+" = false")
		return false
	}
	*dst = b
	return true
}

// integer decodes an integer in [lo, hi].
func (t *table) integer(k string, dst *int, lo, hi int) bool {
	v, ok := t.get(k)
	if !ok {
		return false
	}
	return t.intValue(t.key(k), v, dst, lo, hi)
}

func (t *table) intValue(key string, v any, dst *int, lo, hi int) bool {
	n, ok := v.(int64)
	if !ok {
		t.wrongType(key, v, "an integer", fmt.Sprintf("a whole number from %d to %d, without quotes", lo, hi))
		return false
	}
	if n < int64(lo) || n > int64(hi) {
		t.d.errorf(key, fmt.Sprintf("use a value from %d to %d", lo, hi), "%d is out of range", n)
		return false
	}
	*dst = int(n)
	return true
}

// enum decodes a string that must be one of allowed.
func (t *table) enum(k string, dst *string, allowed ...string) bool {
	var s string
	if !t.str(k, &s) {
		return false
	}
	if !contains(allowed, s) {
		t.d.errorf(t.key(k), "use one of "+strings.Join(allowed, ", "), "unknown %s %q", strings.ReplaceAll(k, "_", " "), s)
		return false
	}
	*dst = s
	return true
}

// duration decodes a Go duration string ("10s", "1m30s") in [lo, hi].
func (t *table) duration(k string, dst *time.Duration, lo, hi time.Duration) bool {
	v, ok := t.get(k)
	if !ok {
		return false
	}
	s, ok := v.(string)
	if !ok {
		t.wrongType(t.key(k), v, "a duration string", fmt.Sprintf("%s = \"%v\" (units ms, s, m, h)", k, lo))
		return false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.d.errorf(t.key(k), `write a number with a unit, e.g. "10s", "500ms", "5m"`, "bad duration %q", s)
		return false
	}
	if d < lo || d > hi {
		t.d.errorf(t.key(k), fmt.Sprintf("use a duration from %v to %v", lo, hi), "%v is out of range", d)
		return false
	}
	*dst = d
	return true
}

// array is the array at k, or nil after reporting a wrong type.
func (t *table) array(k, example string) ([]any, bool) {
	v, ok := t.get(k)
	if !ok {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		t.wrongType(t.key(k), v, "an array", example)
		return nil, false
	}
	return a, true
}

func (t *table) strings(k string, dst *[]string, example string) bool {
	a, ok := t.array(k, example)
	if !ok {
		return false
	}
	out := make([]string, 0, len(a))
	good := true
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			t.wrongType(indexPath(t.key(k), i), e, "a string", example)
			good = false
			continue
		}
		out = append(out, s)
	}
	if good {
		*dst = out
	}
	return good
}

// prefixes decodes an array of prefixes; see parsePrefix.
func (t *table) prefixes(k string, dst *[]netip.Prefix, iface bool) bool {
	var ss []string
	if !t.strings(k, &ss, k+` = ["198.18.0.0/24", "2001:db8::/64"]`) {
		return false
	}
	out := make([]netip.Prefix, 0, len(ss))
	good := true
	for i, s := range ss {
		p, ok := t.d.parsePrefix(indexPath(t.key(k), i), s, iface)
		good = good && ok
		out = append(out, p)
	}
	if good {
		*dst = out
	}
	return good
}

func (t *table) prefix(k string, dst *netip.Prefix) bool {
	var s string
	if !t.str(k, &s) {
		return false
	}
	p, ok := t.d.parsePrefix(t.key(k), s, false)
	if ok {
		*dst = p
	}
	return ok
}

// parsePrefix parses a network prefix, or with iface an interface address
// with its subnet length (host bits then required to name a host).
func (d *decoder) parsePrefix(key, s string, iface bool) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		fix := `write an address, a slash and a length, e.g. "198.18.0.0/24" or "2001:db8::/64"`
		if _, aerr := netip.ParseAddr(s); aerr == nil {
			fix = fmt.Sprintf("add the prefix length, e.g. %q", s+"/24")
			if strings.Contains(s, ":") {
				fix = fmt.Sprintf("add the prefix length, e.g. %q", s+"/64")
			}
		}
		d.errorf(key, fix, "bad prefix %q", s)
		return netip.Prefix{}, false
	}
	if p.Addr().Is4In6() {
		d.errorf(key, "write the IPv4 form, "+p.Addr().Unmap().String(), "IPv4-mapped address in %q", s)
		return netip.Prefix{}, false
	}
	if p.Addr().Zone() != "" {
		d.errorf(key, "remove the %zone", "zone not allowed in %q", s)
		return netip.Prefix{}, false
	}
	if iface {
		return d.checkInterfaceAddress(key, s, p)
	}
	if p.Masked() != p {
		d.errorf(key, fmt.Sprintf("use %q", p.Masked().String()), "host bits set in prefix %q", s)
		return netip.Prefix{}, false
	}
	return p, true
}

// checkInterfaceAddress rejects an interface address that names its subnet
// rather than a host (198.18.0.0/24), or the IPv4 broadcast address.
func (d *decoder) checkInterfaceAddress(key, s string, p netip.Prefix) (netip.Prefix, bool) {
	hostBits := p.Addr().BitLen() - p.Bits()
	if p.Addr().Is4() && hostBits >= 2 {
		if p.Addr() == p.Masked().Addr() {
			d.errorf(key, fmt.Sprintf("use a host address of the subnet, e.g. %q", netip.PrefixFrom(p.Addr().Next(), p.Bits()).String()),
				"%q is the subnet's network address, not a host address", s)
			return netip.Prefix{}, false
		}
		if p.Addr() == lastAddr(p) {
			d.errorf(key, "use a host address of the subnet", "%q is the subnet's broadcast address", s)
			return netip.Prefix{}, false
		}
	}
	if p.Addr().IsUnspecified() || p.Addr().IsMulticast() || p.Addr().IsLoopback() {
		d.errorf(key, `use a unicast address, e.g. "198.18.0.1/24"`, "%q is not a usable interface address", s)
		return netip.Prefix{}, false
	}
	return p, true
}

// lastAddr is the highest address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func (d *decoder) parseAddr(key, s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		fix := `write a plain address, e.g. "198.18.0.1" or "2001:db8::1"`
		if strings.Contains(s, "/") {
			fix = fmt.Sprintf("drop the prefix length: %q", s[:strings.IndexByte(s, '/')])
		}
		d.errorf(key, fix, "bad address %q", s)
		return netip.Addr{}, false
	}
	if a.Is4In6() {
		d.errorf(key, "write the IPv4 form, "+a.Unmap().String(), "IPv4-mapped address %q", s)
		return netip.Addr{}, false
	}
	return a, true
}

func (t *table) addr(k string, dst *netip.Addr) bool {
	var s string
	if !t.str(k, &s) {
		return false
	}
	a, ok := t.d.parseAddr(t.key(k), s)
	if ok {
		*dst = a
	}
	return ok
}

func (t *table) addrs(k string, dst *[]netip.Addr) bool {
	var ss []string
	if !t.strings(k, &ss, k+` = ["0.0.0.0", "::"]`) {
		return false
	}
	out := make([]netip.Addr, 0, len(ss))
	good := true
	for i, s := range ss {
		a, ok := t.d.parseAddr(indexPath(t.key(k), i), s)
		good = good && ok
		out = append(out, a)
	}
	if good {
		*dst = out
	}
	return good
}
