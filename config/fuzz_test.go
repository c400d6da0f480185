package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

var bareKeyRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// FuzzParse: Parse never panics; every error that names a key names a real
// line of the input, and an unknown key's line shows that key.
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile(examplePath); err == nil {
		f.Add(string(data))
	}
	f.Add(twoPorts)
	f.Add(twoPorts + "[vpn]\nenabled = true\npool_v4 = \"198.18.0.0/23\"\n")
	f.Add("[appliance]\nworkers = \"1-3\"\nbatch = 1\ncolour = 1\n")
	f.Add("[[port]]\nname = \"a\"\nmlx5 = { prefetch_distance = 99, x = 1 }\n[[port]]\nname = \"a\"\n")
	f.Add("[[route]]\nprefix = \"198.18.0.1/24\"\nvia = \"fe80::1\"\n[route.x]\ny = 1\n")
	f.Add("a.b.\"c\\u0064\" = '''\nx'''\n[[vpn.client]]\nremote = 1\n[[vpn.client]]\nroutes = [\n1,\n\"x\"]\n")
	f.Add("port = [{name = \"x\", bogus = 1}, 3]\n")
	f.Add("t = 1979-05-27 07:32:00\nvpn = { client = [ { name = 1 } ] }\n")
	f.Fuzz(func(t *testing.T, src string) {
		_, err := Parse("f.toml", []byte(src))
		if err == nil {
			return
		}
		errs, ok := err.(ErrorList)
		if !ok || len(errs) == 0 {
			t.Fatalf("error %T %v is not a non-empty ErrorList", err, err)
		}
		lines := strings.Split(src, "\n")
		for _, e := range errs {
			if e.Key == "" {
				continue
			}
			if e.Line < 1 || e.Line > len(lines) {
				t.Fatalf("%v: line outside the file's %d lines", e, len(lines))
			}
			last := e.Key[strings.LastIndexAny(e.Key, ".")+1:]
			text := lines[e.Line-1]
			if strings.HasPrefix(e.Msg, "unknown key") && bareKeyRE.MatchString(last) && !strings.Contains(text, "\\") && !strings.Contains(text, last) {
				t.Fatalf("%v: line %d is %q, which does not show the key", e, e.Line, text)
			}
		}
	})
}
