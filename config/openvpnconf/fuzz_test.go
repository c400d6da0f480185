package openvpnconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ovfwd/ovfwd/config"
)

// FuzzParse: Parse and Translate never panic, and whatever Translate
// writes is TOML ovfwd's parser reads with no key it does not know.
func FuzzParse(f *testing.F) {
	names, _ := filepath.Glob("testdata/*")
	for _, n := range names {
		if data, err := os.ReadFile(n); err == nil {
			f.Add(string(data))
		}
	}
	f.Add("server 198.18.0.0 255.255.255.0\npush \"route 1.2.3.4\"\n<ca>\n\x00\"\n</ca>\nlocal ::1\n")
	f.Add("proto \"udp6\" 'x'\n--port 0\nserver-ipv6 2001:db8::/64\npush \"dhcp-option DNS ::\"\nverb 99\nmssfix\n")
	f.Fuzz(func(t *testing.T, src string) {
		file, err := Parse([]byte(src))
		if err != nil {
			return
		}
		res, err := Translate(file, Options{KeyDir: "/k", Ports: []Port{lanPort}})
		if err != nil || res.TOML == nil {
			return
		}
		_, err = config.Parse("/etc/ovfwd/ovfwd.toml", res.TOML)
		if err == nil {
			return
		}
		for _, e := range err.(config.ErrorList) {
			if e.Line == 0 && e.Key == "" || strings.Contains(e.Msg, "unknown key") {
				t.Fatalf("import wrote a file ovfwd cannot read: %v\n%s", e, res.TOML)
			}
		}
	})
}
