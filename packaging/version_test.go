package packaging

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestVersionsSortAcrossTags runs version.sh on a scratch repository as
// its history grows past release tags: every version is valid for dpkg,
// sorts after all earlier ones (dpkg --compare-versions), and the builds
// between two tags sort between them.
func TestVersionsSortAcrossTags(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Fatalf("dpkg is needed to compare versions: %v", err)
	}
	script, err := filepath.Abs("version.sh")
	if err != nil {
		t.Fatal(err)
	}
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	commit := func() {
		t.Helper()
		git("commit", "-q", "--allow-empty", "-m", "c")
	}
	version := func() string {
		t.Helper()
		out, err := exec.Command(script, repo).Output()
		if err != nil {
			t.Fatalf("version.sh: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	commit()

	type point struct{ what, want string } // want: a regexp the version matches
	var seen []string
	step := func(p point) {
		t.Helper()
		v := version()
		if !regexp.MustCompile(`^` + p.want + `$`).MatchString(v) {
			t.Errorf("%s: version %q, want %s", p.what, v, p.want)
		}
		if out, err := exec.Command("dpkg", "--validate-version", v).CombinedOutput(); err != nil {
			t.Errorf("%s: %q is not a Debian version: %s", p.what, v, out)
		}
		for _, prev := range seen {
			if err := exec.Command("dpkg", "--compare-versions", v+"-1", "gt", prev+"-1").Run(); err != nil {
				t.Errorf("%s: %s does not sort after the earlier %s", p.what, v, prev)
			}
		}
		seen = append(seen, v)
	}
	step(point{"no tag, 1 commit", `0\.0\.0~git1\.[0-9a-f]{12}`})
	commit()
	step(point{"no tag, 2 commits", `0\.0\.0~git2\.[0-9a-f]{12}`})
	git("tag", "v0.1.0")
	step(point{"on v0.1.0", `0\.1\.0`})
	for i := 1; i <= 10; i++ { // 9 -> 10 must still sort up
		commit()
		step(point{"past v0.1.0", `0\.1\.1~git` + strconv.Itoa(i) + `\.[0-9a-f]{12}`})
	}
	git("tag", "-a", "-m", "release", "v0.1.1")
	step(point{"on annotated v0.1.1", `0\.1\.1`})
	commit()
	git("tag", "not-a-release")
	step(point{"past v0.1.1, other tags ignored", `0\.1\.2~git1\.[0-9a-f]{12}`})
	git("tag", "v0.2.0")
	step(point{"on v0.2.0", `0\.2\.0`})

	// What the old scheme produced for an untagged tree sorted above any
	// later release; the new one stays below the first.
	if err := exec.Command("dpkg", "--compare-versions", seen[0]+"-1", "lt", "0.1.0-1").Run(); err != nil {
		t.Errorf("untagged %s does not sort below the first release 0.1.0", seen[0])
	}
	// A changed tracked file marks the version dirty, still sorting after
	// the clean build of the same commit.
	if err := os.WriteFile(filepath.Join(repo, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "f")
	step(point{"on v0.2.0, uncommitted change", `0\.2\.0\.dirty`})
}
