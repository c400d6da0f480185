package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ovfwd/ovfwd/config"
)

// Under systemd each line carries its syslog priority, so journald files
// errors as errors and warnings as warnings; attributes bound with With
// survive, and JSON lines are prefixed too.
func TestJournalLinesCarryPriority(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var out bytes.Buffer
		sw := newLogSwitch(&out, true, config.Log{Level: "debug", Format: format})
		log := slog.New(sw).With("component", "vpn")
		log.Error("e")
		log.Warn("w")
		log.Info("i")
		log.Debug("d")
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		want := []string{"<3>", "<4>", "<6>", "<7>"}
		if len(lines) != len(want) {
			t.Fatalf("%s: %d lines: %q", format, len(lines), out.String())
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, want[i]) || !strings.Contains(l, "component") {
				t.Errorf("%s: line %d = %q, want prefix %s and the bound attribute", format, i, l, want[i])
			}
		}
	}
	var out bytes.Buffer
	slog.New(newLogSwitch(&out, false, config.Log{Level: "info", Format: "text"})).Warn("w")
	if strings.HasPrefix(out.String(), "<") {
		t.Errorf("not the journal, still prefixed: %q", out.String())
	}
}

// stderrIsJournal follows JOURNAL_STREAM only when it names this
// process's stderr.
func TestStderrIsJournal(t *testing.T) {
	var st unix.Stat_t
	if err := unix.Fstat(int(os.Stderr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	if !stderrIsJournal() {
		t.Error("stderr is the named stream, not detected")
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino+1))
	if stderrIsJournal() {
		t.Error("another stream taken for stderr")
	}
	t.Setenv("JOURNAL_STREAM", "")
	if stderrIsJournal() {
		t.Error("no JOURNAL_STREAM taken for the journal")
	}
}

// vpnEvent's lines: refused logins and revocations are warnings with the
// event and source first; the shipped fail2ban filter matches the refused
// logins only, and takes the source even when the username the client
// chose looks like another source.
func TestVPNEventLinesAndFail2banFilter(t *testing.T) {
	var out bytes.Buffer
	d := &daemon{}
	d.rateLog = newRateLog(newLogSwitch(&out, false, config.Log{Level: "info", Format: "text"}))
	d.log = slog.New(d.rateLog)
	src4 := netip.MustParseAddrPort("198.18.0.7:40001")
	src6 := netip.MustParseAddrPort("[2001:db8::7]:40002")
	d.vpnEvent("auth_failed", "src", src4, "cn", "alice", "user", "x src=198.18.9.9:1 ", "reason", "bad password")
	d.vpnEvent("auth_failed", "src", src6, "cn", "", "user", "bob", "reason", "TEMP:too many failed logins, try again later")
	d.vpnEvent("revoked", "src", src4, "cn", "carol", "serial", "42")
	d.vpnEvent("killed", "src", src4, "cn", "dave", "reason", "bye")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	for i, re := range []string{
		`level=WARN msg="vpn auth failed" event=auth_failed src=198\.18\.0\.7:40001 cn=alice user="x src=198\.18\.9\.9:1 " reason="bad password"$`,
		`level=WARN msg="vpn auth failed" event=auth_failed src=\[2001:db8::7\]:40002 cn="" user=bob reason=`,
		`level=WARN msg="vpn certificate revoked" event=revoked src=198\.18\.0\.7:40001 cn=carol serial=42$`,
		`level=INFO msg="vpn client killed" event=killed src=198\.18\.0\.7:40001 cn=dave reason=bye$`,
	} {
		if i >= len(lines) || !regexp.MustCompile(re).MatchString(lines[i]) {
			t.Errorf("line %d does not match %s:\n%s", i, re, out.String())
		}
	}
	matches := fail2banRegex(t, out.Bytes())
	if want := []string{"198.18.0.7", "2001:db8::7"}; strings.Join(matches, ",") != strings.Join(want, ",") {
		t.Errorf("fail2ban-regex found %q, want %q", matches, want)
	}
}

// fail2banRegex runs the shipped filter over log and returns the address
// of each matched line, in order.
func fail2banRegex(t *testing.T, log []byte) []string {
	t.Helper()
	if _, err := exec.LookPath("fail2ban-regex"); err != nil {
		t.Fatal("fail2ban-regex is not installed (.ci/install-deps installs it)")
	}
	dir := t.TempDir()
	logFile := filepath.Join(dir, "ovfwd.log")
	if err := os.WriteFile(logFile, log, 0o644); err != nil {
		t.Fatal(err)
	}
	filter, err := filepath.Abs("../../packaging/fail2ban/filter.d/ovfwd.conf")
	if err != nil {
		t.Fatal(err)
	}
	// -o ip prints the address fail2ban would ban, one per matched line.
	out, err := exec.Command("fail2ban-regex", "--raw", "-o", "ip", logFile, filter).CombinedOutput()
	if err != nil {
		t.Fatalf("fail2ban-regex: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}
