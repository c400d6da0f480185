package control_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/vpn/control"
)

// TestUserPassGroup: the command's last "group NAME" line is the client's
// access group, admitted at once or deferred; malformed names, a refusal
// and a flood of output give none.
func TestUserPassGroup(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "verify.sh")
	script := fmt.Sprintf(`#!/bin/sh
u=$(sed -n 1p "$1")
case "$u" in
staff) echo "hello"; echo "group contractors"; echo "group staff"; exit 0;;
deferred) echo "group staff"; (sleep 0.2; echo 1 > "$auth_control_file") & exit 2;;
bad) echo "group two words"; echo "group %s"; exit 0;;
refused) echo "group staff"; exit 1;;
flood) head -c 100000 /dev/zero | tr '\0' 'x'; echo; echo "group late"; exit 0;;
esac
exit 0
`, strings.Repeat("g", 65))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	u := &control.UserPass{Command: []string{path}, Timeout: 3 * time.Second, Dir: t.TempDir()}
	for _, c := range []struct {
		user, group string
		ok          bool
	}{
		{"staff", "staff", true},
		{"deferred", "staff", true},
		{"bad", "", true},
		{"none", "", true},
		{"refused", "", false},
		{"flood", "", true},
	} {
		g, err := u.VerifyGroup(context.Background(), control.AuthRequest{Username: c.user, Password: "pw",
			Source: netip.MustParseAddrPort("198.18.9.9:4000")})
		if (err == nil) != c.ok || g != c.group {
			t.Errorf("%s: group %q err %v, want group %q ok %v", c.user, g, err, c.group, c.ok)
		}
	}
}
