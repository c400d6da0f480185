//go:build linux

package mlx5_test

import (
	"os"
	"testing"

	"github.com/ovfwd/ovfwd/mlx5"
)

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Every error after the container is open must come back as an error with
// all fds closed. Here the "container" is /dev/null, so the first ioctl
// (VFIO_GET_API_VERSION) fails with ENOTTY. OpenVFIO once set its named
// result to nil before its deferred cleanup ran and panicked on it, leaking
// the fds (a real group then reopened with EBUSY). The guest test in
// appliance/testbed/vmtest covers the same paths on a real kernel.
func TestOpenVFIOErrorAfterContainerClosesEverything(t *testing.T) {
	h := newFakeHost(t)
	h.function(addr, "0x15b3", "0x1017", "vfio-pci", "7")
	h.link("dev/vfio/vfio", "/dev/null")
	h.write("dev/vfio/7", "")
	before := openFDs(t)
	for i := 0; i < 3; i++ {
		v, err := mlx5.OpenVFIO(h.paths, addr, 0)
		if err == nil {
			v.Close()
			t.Fatal("OpenVFIO on /dev/null as the container succeeded")
		}
		if v != nil {
			t.Fatalf("OpenVFIO returned a VFIO with error %v", err)
		}
		t.Logf("attempt %d: %v", i, err)
	}
	if after := openFDs(t); after != before {
		t.Fatalf("%d fds open before OpenVFIO, %d after three failed opens", before, after)
	}
}
