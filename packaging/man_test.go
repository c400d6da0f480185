package packaging

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// usageCommands are the commands `ovfwd help` lists (cmd/ovfwd's usage).
func usageCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../cmd/ovfwd/main.go")
	if err != nil {
		t.Fatal(err)
	}
	usage := regexp.MustCompile("(?s)const usage = `(.*?)`").FindSubmatch(b)
	if usage == nil {
		t.Fatal("no usage text in cmd/ovfwd/main.go")
	}
	var cmds []string
	for _, m := range regexp.MustCompile(`(?m)^  ([a-z]+) `).FindAllSubmatch(usage[1], -1) {
		cmds = append(cmds, string(m[1]))
	}
	if len(cmds) < 5 {
		t.Fatalf("usage lists only %v", cmds)
	}
	return cmds
}

// TestManPages renders both pages with man -l (groff's warnings on):
// they render without a warning, ovfwd(8) names every command and
// ovfwd.toml(5) every section of the packaged config.
func TestManPages(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Fatalf("man (man-db) is needed: %v", err)
	}
	render := func(page string) string {
		t.Helper()
		cmd := exec.Command("man", "--warnings", "-l", page)
		cmd.Env = append(os.Environ(), "MANWIDTH=80", "LC_ALL=C.UTF-8", "MAN_KEEP_FORMATTING=0")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || stderr.Len() > 0 {
			t.Errorf("man -l %s: %v\n%s", page, err, stderr.String())
		}
		// Drop overstrike formatting should a pager-less man keep it.
		return regexp.MustCompile(".\b").ReplaceAllString(string(out), "")
	}
	page8 := render("man/ovfwd.8")
	for _, c := range usageCommands(t) {
		if !regexp.MustCompile(`(?m)^ {7}` + c + `\b`).MatchString(page8) {
			t.Errorf("ovfwd(8) has no entry for the command %q", c)
		}
	}
	page5 := render("man/ovfwd.toml.5")
	conf, err := os.ReadFile("ovfwd.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^#? ?(\[\[?[a-z_.]+\]\]?)$`).FindAllSubmatch(conf, -1) {
		if !strings.Contains(page5, string(m[1])) {
			t.Errorf("ovfwd.toml(5) does not name the section %s", m[1])
		}
	}
}

// TestBashCompletion: the completion offers every command, the pki
// subcommands and a command's flags.
func TestBashCompletion(t *testing.T) {
	complete := func(words ...string) []string {
		t.Helper()
		script := `source completion/ovfwd.bash
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _ovfwd; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command("bash", append([]string{"-c", script, "bash"}, words...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	has := func(got []string, want ...string) {
		t.Helper()
		for _, w := range want {
			found := false
			for _, g := range got {
				found = found || g == w
			}
			if !found {
				t.Errorf("completion %v lacks %q", got, w)
			}
		}
	}
	has(complete("ovfwd", ""), usageCommands(t)...)
	has(complete("ovfwd", "pki", ""), "init", "client", "site", "revoke", "tls-crypt-v2")
	has(complete("ovfwd", "reload", "-"), "-c", "-s", "-pid", "-timeout")
	if got := complete("ovfwd", "re"); len(got) != 1 || got[0] != "reload" {
		t.Errorf(`"ovfwd re" completes to %v`, got)
	}
}
