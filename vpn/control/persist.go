package control

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// lease is the pool addresses a common name last had.
type lease struct{ v4, v6 netip.Addr }

// maxLeaseLine bounds one line of a lease file (a common name is at most 64
// characters in X.509; openvpn's own lines are shorter still).
const maxLeaseLine = 512

// parseLeases reads an ifconfig-pool-persist file: one "name,ipv4[,ipv6]"
// per line, as openvpn 2.6 writes ipp.txt (pool.c ifconfig_pool_write),
// so an operator can bring openvpn's file along. Either address may be
// empty. Lines that do not parse are skipped and counted; a later line for
// a name wins.
func parseLeases(data []byte) (map[string]lease, int) {
	out := map[string]lease{}
	bad := 0
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, maxLeaseLine), maxLeaseLine)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 2 || len(f) > 3 || f[0] == "" {
			bad++
			continue
		}
		var l lease
		ok := true
		if f[1] != "" {
			a, err := netip.ParseAddr(f[1])
			ok = err == nil && a.Is4()
			l.v4 = a
		}
		if len(f) == 3 && f[2] != "" {
			a, err := netip.ParseAddr(f[2])
			ok = ok && err == nil && a.Is6() && a.Zone() == ""
			l.v6 = a
		}
		if !ok {
			bad++
			continue
		}
		out[f[0]] = l
	}
	if sc.Err() != nil {
		bad++
	}
	return out, bad
}

// formatLeases is parseLeases' inverse, sorted by name.
func formatLeases(m map[string]lease) []byte {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		if !leaseName(n) {
			continue
		}
		l := m[n]
		v4, v6 := "", ""
		if l.v4.IsValid() {
			v4 = l.v4.String()
		}
		if l.v6.IsValid() {
			v6 = l.v6.String()
		}
		fmt.Fprintf(&b, "%s,%s,%s\n", n, v4, v6)
	}
	return b.Bytes()
}

// leaseName reports whether a common name can be a lease file's first
// field and read back as itself: no comma, no control character (a CN may
// hold a newline, which would start a line of its own), nothing
// TrimSpace or a comment would change.
func leaseName(n string) bool {
	return n != "" && n[0] != '#' && n == strings.TrimSpace(n) &&
		!strings.ContainsFunc(n, func(r rune) bool { return r == ',' || isControl(r) })
}

// writeFileAtomic replaces path with data (temporary file and rename), so
// a crash never leaves half a file.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}
