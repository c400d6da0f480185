package afxdp_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/status"
	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
	"github.com/ovfwd/ovfwd/appliance/testbed/unit/unittest"
	"golang.org/x/sys/unix"
)

// startOvfwd runs `ovfwd run` in ns as packaging/ovfwd.service runs it
// (testbed/unit), with config (its status socket path substituted for
// the one {sock} in it), until the test ends. It returns snap, which polls
// the status until ok holds or d passes and returns the last one read.
func startOvfwd(t *testing.T, ns *netns.NS, bin, config string) (snap func(d time.Duration, ok func(*status.Snapshot) bool) *status.Snapshot) {
	t.Helper()
	u := unittest.Load(t)
	dir := unittest.TempDir(t, u)
	sock := filepath.Join(dir, "run", "ovfwd.sock")
	cfg := filepath.Join(dir, "ovfwd.toml")
	must(t, os.WriteFile(cfg, []byte(strings.ReplaceAll(config, "{sock}", sock)), 0o644))
	must(t, u.Layout(dir))
	must(t, u.Access(cfg, unit.Read))
	ubin, err := u.Executable(bin, dir)
	must(t, err)
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name}, u.Argv(ubin, "run", "-c", cfg)...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &netns.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			t.Logf("ovfwd log:\n%s", log.String())
		}
	})
	unittest.Check(t, u, cmd.Process.Pid)
	return func(d time.Duration, ok func(*status.Snapshot) bool) *status.Snapshot {
		t.Helper()
		var last *status.Snapshot
		for deadline := time.Now().Add(d); ; time.Sleep(50 * time.Millisecond) {
			select {
			case err := <-exited:
				t.Fatalf("ovfwd exited: %v", err)
			default:
			}
			s, err := status.Fetch(sock, time.Second)
			if err == nil {
				last = s
				if ok(s) {
					return s
				}
			}
			if time.Now().After(deadline) {
				if last == nil {
					t.Fatalf("no status: %v", err)
				}
				return last
			}
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ifaceMAC(t *testing.T, ns *netns.NS, ifn string) net.HardwareAddr {
	t.Helper()
	var mac net.HardwareAddr
	must(t, ns.Do(func() error {
		i, err := net.InterfaceByName(ifn)
		if err == nil {
			mac = i.HardwareAddr
		}
		return err
	}))
	return mac
}

type packetSocket struct {
	fd int
	sa unix.SockaddrLinklayer
}

// openPacket opens a raw packet socket on ifn in ns for sending frames.
func openPacket(t *testing.T, ns *netns.NS, ifn string) *packetSocket {
	t.Helper()
	p := &packetSocket{}
	must(t, ns.Do(func() error {
		i, err := net.InterfaceByName(ifn)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		p.fd, p.sa = fd, unix.SockaddrLinklayer{Ifindex: i.Index, Halen: 6}
		return nil
	}))
	t.Cleanup(func() { unix.Close(p.fd) })
	return p
}

func (p *packetSocket) send(f []byte) { _ = unix.Sendto(p.fd, f, 0, &p.sa) }
