package netns

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// OvfwdBinary is the ovfwd binary the namespace tests and benches run:
// $OVFWD_BIN (`make test` sets it), else a fresh build of cmd/ovfwd in dir.
func OvfwdBinary(dir string) (string, error) {
	if bin := os.Getenv("OVFWD_BIN"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(dir, "ovfwd")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ovfwd/ovfwd/cmd/ovfwd").CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}
