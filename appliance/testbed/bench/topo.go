package bench

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ovfwd/ovfwd/appliance/testbed/netns"
)

// topology: gen [bnA0] ⇄ [bnA1 app bnB1] ⇄ [bnB0] sink.
type topology struct {
	gen, app, sink *netns.NS
	genIf, sinkIf  int // ifindexes of bnA0 (in gen) and bnB0 (in sink)
	genMAC, appA   net.HardwareAddr
	sinkMAC        net.HardwareAddr
	frames         [][]byte // the 60-byte UDP frames the generator sends, one per flow
	// ingressErr is why bnA1's receive work could not be moved to the
	// appliance CPU (threaded NAPI or RPS refused): it then ran as softirq
	// where veth raised it, on the generator's CPU.
	ingressErr error
}

const (
	genIP      = "198.18.20.1"
	appAIP     = "198.18.20.254"
	appBIP     = "198.18.21.254"
	sinkIP     = "198.18.21.1"
	appAPrefix = appAIP + "/24"
	appBPrefix = appBIP + "/24"
)

func buildTopology() (t *topology, err error) {
	t = &topology{}
	defer func() {
		if err != nil {
			t.destroy()
			t = nil
		}
	}()
	for _, p := range []struct {
		ns  **netns.NS
		tag string
	}{{&t.gen, "bgen"}, {&t.app, "bapp"}, {&t.sink, "bsnk"}} {
		if *p.ns, err = netns.Create(p.tag); err != nil {
			return
		}
	}
	if err = netns.Veth(t.gen, "bnA0", t.app, "bnA1"); err != nil {
		return
	}
	if err = netns.Veth(t.sink, "bnB0", t.app, "bnB1"); err != nil {
		return
	}
	steps := []struct {
		ns   *netns.NS
		args []string
	}{
		{t.gen, []string{"ip", "addr", "add", genIP + "/24", "dev", "bnA0"}},
		{t.sink, []string{"ip", "addr", "add", sinkIP + "/24", "dev", "bnB0"}},
		{t.app, []string{"ip", "addr", "add", appAPrefix, "dev", "bnA1"}},
		{t.app, []string{"ip", "addr", "add", appBPrefix, "dev", "bnB1"}},
	}
	for _, s := range steps {
		if _, err = s.ns.Run(s.args...); err != nil {
			return
		}
	}
	if t.genIf, t.genMAC, err = ifInfo(t.gen, "bnA0"); err != nil {
		return
	}
	if _, t.appA, err = ifInfo(t.app, "bnA1"); err != nil {
		return
	}
	if t.sinkIf, t.sinkMAC, err = ifInfo(t.sink, "bnB0"); err != nil {
		return
	}
	// The sink drops everything in XDP, ARP replies included: the
	// appliance gets the sink's MAC statically in both modes.
	if _, err = t.app.Run("ip", "neigh", "replace", sinkIP, "lladdr", t.sinkMAC.String(), "dev", "bnB1", "nud", "permanent"); err != nil {
		return
	}
	return t, nil
}

func (t *topology) destroy() {
	for _, ns := range []*netns.NS{t.gen, t.app, t.sink} {
		if ns != nil {
			ns.Delete()
		}
	}
}

func ifInfo(ns *netns.NS, name string) (idx int, mac net.HardwareAddr, err error) {
	err = ns.Do(func() error {
		ifi, e := net.InterfaceByName(name)
		if e != nil {
			return e
		}
		idx, mac = ifi.Index, ifi.HardwareAddr
		return nil
	})
	return
}

// udpFrame builds a 60-byte Ethernet/IPv4/UDP frame (64 on the wire) with
// a valid IPv4 header checksum (Linux drops bad ones before forwarding).
func udpFrame(dst, src net.HardwareAddr, sip, dip net.IP) []byte {
	f := make([]byte, 60)
	copy(f[0:], dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 46)
	copy(ip[12:], sip)
	copy(ip[16:], dip)
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], 1024)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 26)
	return f
}

// flowFrames is the generator's flow set: n frames to dst, flow i from
// 198.18.20.(1+i%16) port 1024+i/16 to the sink's port 9, so that flow
// hashing (RPS, conntrack, NAT) sees many flows and both sides the same.
func flowFrames(dst, src net.HardwareAddr, n int) [][]byte {
	base := net.ParseIP(genIP).To4()
	var fs [][]byte
	for i := range n {
		sip := net.IPv4(base[0], base[1], base[2], byte(1+i%16)).To4()
		f := udpFrame(dst, src, sip, net.ParseIP(sinkIP).To4())
		binary.BigEndian.PutUint16(f[34:], uint16(1024+i/16))
		fs = append(fs, f)
	}
	return fs
}

// sysctl/sysfs writes go through `ip netns exec`, which mounts the
// namespace's own /sys and /proc/sys.
func nsWrite(ns *netns.NS, path, value string) error {
	_, err := ns.Run("sh", "-c", fmt.Sprintf("echo %s > %s", value, path))
	return err
}

// threadIngressNAPI makes bnA1's NAPI a kernel thread pinned to cpu, as
// every side whose ingress runs in NAPI needs, and returns the thread's PID
// and what turns it back into softirq.
// A kernel that refuses it (before Linux 5.12 there is no threaded file;
// net/core/net-sysfs.c modify_napi_threaded answers EOPNOTSUPP for a device
// without NAPI) leaves the ingress in softirq: PID 0, t.ingressErr says
// why, and Fwd reports the costs as not comparable.
func threadIngressNAPI(t *topology, cpu int) (int, func(), error) {
	if err := setThreaded(t.app, "bnA1", true); err != nil {
		t.ingressRefused("threaded NAPI", err)
		return 0, func() {}, nil
	}
	undo := func() { _ = setThreaded(t.app, "bnA1", false) }
	pid, err := pinNAPIThread("bnA1", cpu)
	if err != nil {
		undo()
		return 0, nil, err
	}
	return pid, undo, nil
}

// setThreaded turns threaded NAPI on or off for ifname in ns; tests replace
// it to inject the kernel's refusal.
var setThreaded = func(ns *netns.NS, ifname string, on bool) error {
	v := "0"
	if on {
		v = "1"
	}
	return nsWrite(ns, "/sys/class/net/"+ifname+"/threaded", v)
}

// ingressRefused records the first refusal to move bnA1's receive work.
func (t *topology) ingressRefused(what string, err error) {
	if t.ingressErr == nil {
		t.ingressErr = fmt.Errorf("%s refused (%w)", what, err)
	}
}

// napiThreads is the thread list of a threaded-NAPI PID (none for 0).
func napiThreads(pid int) []string {
	if pid == 0 {
		return nil
	}
	return []string{strconv.Itoa(pid)}
}

// pinNAPIThread pins the threaded-NAPI kernel thread of ifname to cpu.
// Kernel threads are visible from every namespace; the device name in the
// thread's comm is unique to this benchmark's topology.
func pinNAPIThread(ifname string, cpu int) (int, error) {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !strings.HasPrefix(string(b), "napi/"+ifname+"-") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return pid, pinPID(pid, cpu)
	}
	return 0, fmt.Errorf("bench: no napi/%s-* thread", ifname)
}
