package config

import (
	"strings"
	"testing"
)

// The glean limits are [appliance] keys: today's
// constants are the defaults, a config sets them, and a bad value names
// the file, line and key with the allowed range.
func TestGleanKeys(t *testing.T) {
	d := Default().Appliance
	if d.GleanSourceRate != 50 || d.GleanSourceBurst != 64 || d.GleanPortRate != 500 || d.GleanPortBurst != 256 {
		t.Fatalf("defaults %d/%d %d/%d, want 50/64 500/256", d.GleanSourceRate, d.GleanSourceBurst, d.GleanPortRate, d.GleanPortBurst)
	}
	c, err := Parse("ovfwd.toml", []byte("[appliance]\nglean_source_rate = 200\nglean_source_burst = 1000\nglean_port_rate = 4000\nglean_port_burst = 2000\n"+twoPorts))
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Appliance; a.GleanSourceRate != 200 || a.GleanSourceBurst != 1000 || a.GleanPortRate != 4000 || a.GleanPortBurst != 2000 {
		t.Fatalf("parsed %d/%d %d/%d", a.GleanSourceRate, a.GleanSourceBurst, a.GleanPortRate, a.GleanPortBurst)
	}
	for _, bad := range []struct{ key, val, msg string }{
		{"glean_source_rate", "0", "0 is out of range"},
		{"glean_source_burst", "-5", "-5 is out of range"},
		{"glean_port_rate", "2000000", "2000000 is out of range"},
		{"glean_port_burst", `"lots"`, `expected an integer, got string "lots"`},
	} {
		src := "[appliance]\nmode = \"router\"\n" + bad.key + " = " + bad.val + " #<\n" + twoPorts
		list := parseErrs(t, src)
		if len(list) != 1 {
			t.Fatalf("%s = %s: %d errors: %v", bad.key, bad.val, len(list), list)
		}
		e := list[0]
		if e.File != "ovfwd.toml" || e.Line != markedLine(t, src) || e.Key != "appliance."+bad.key ||
			!strings.Contains(e.Msg, bad.msg) || (bad.val != `"lots"` && !strings.Contains(e.Error(), "1000000")) {
			t.Errorf("%s = %s: %q (file %s line %d key %s)", bad.key, bad.val, e.Error(), e.File, e.Line, e.Key)
		}
	}
}
