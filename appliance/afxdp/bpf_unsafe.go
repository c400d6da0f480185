package afxdp

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The bpf(2) calls this package needs. Invariant for every unsafe use here:
// the attr structs are plain Go values that stay alive (runtime.KeepAlive)
// across the syscall, their layout matches the kernel's union bpf_attr
// prefix for the command, and every pointer stored in them as a uint64
// points to Go memory kept alive the same way.

type mapCreateAttr struct {
	mapType    uint32
	keySize    uint32
	valueSize  uint32
	maxEntries uint32
	mapFlags   uint32
	innerMapFD uint32
	numaNode   uint32
	mapName    [16]byte
}

type mapElemAttr struct {
	mapFD uint32
	_     uint32
	key   uint64
	value uint64
	flags uint64
}

type progLoadAttr struct {
	progType           uint32
	insnCnt            uint32
	insns              uint64
	license            uint64
	logLevel           uint32
	logSize            uint32
	logBuf             uint64
	kernVersion        uint32
	progFlags          uint32
	progName           [16]byte
	progIfindex        uint32
	expectedAttachType uint32
}

type linkCreateAttr struct {
	progFD     uint32
	targetFD   uint32 // the ifindex for XDP
	attachType uint32
	flags      uint32
}

func bpfCall(cmd int, attr unsafe.Pointer, size uintptr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

func bpfName(s string) (n [16]byte) {
	copy(n[:15], s)
	return n
}

// bpfMapCreate makes a map and returns its fd.
func bpfMapCreate(name string, typ, keySize, valueSize, maxEntries uint32) (int, error) {
	a := mapCreateAttr{mapType: typ, keySize: keySize, valueSize: valueSize, maxEntries: maxEntries, mapName: bpfName(name)}
	fd, err := bpfCall(unix.BPF_MAP_CREATE, unsafe.Pointer(&a), unsafe.Sizeof(a))
	if err != nil {
		return -1, fmt.Errorf("afxdp: create map %s: %w", name, err)
	}
	return fd, nil
}

func bpfMapUpdate(fd int, key, value []byte) error {
	a := mapElemAttr{mapFD: uint32(fd), key: uint64(uintptr(unsafe.Pointer(&key[0]))), value: uint64(uintptr(unsafe.Pointer(&value[0]))), flags: bpfAnyElem}
	_, err := bpfCall(unix.BPF_MAP_UPDATE_ELEM, unsafe.Pointer(&a), unsafe.Sizeof(a))
	runtime.KeepAlive(key)
	runtime.KeepAlive(value)
	return err
}

func bpfMapDelete(fd int, key []byte) error {
	a := mapElemAttr{mapFD: uint32(fd), key: uint64(uintptr(unsafe.Pointer(&key[0])))}
	_, err := bpfCall(unix.BPF_MAP_DELETE_ELEM, unsafe.Pointer(&a), unsafe.Sizeof(a))
	runtime.KeepAlive(key)
	return err
}

// bpfMapLookup copies the value for key into value (for per-CPU maps value
// holds one 8-byte-aligned slot per possible CPU).
func bpfMapLookup(fd int, key, value []byte) error {
	a := mapElemAttr{mapFD: uint32(fd), key: uint64(uintptr(unsafe.Pointer(&key[0]))), value: uint64(uintptr(unsafe.Pointer(&value[0])))}
	_, err := bpfCall(unix.BPF_MAP_LOOKUP_ELEM, unsafe.Pointer(&a), unsafe.Sizeof(a))
	runtime.KeepAlive(key)
	runtime.KeepAlive(value)
	return err
}

// bpfProgLoad loads an XDP program; on a verifier error the message carries
// the tail of the verifier log.
func bpfProgLoad(name string, insns []uint64) (int, error) {
	license := []byte("GPL\x00") // bpf_redirect_map is GPL-only
	log := make([]byte, 1<<16)
	a := progLoadAttr{
		progType: unix.BPF_PROG_TYPE_XDP,
		insnCnt:  uint32(len(insns)),
		insns:    uint64(uintptr(unsafe.Pointer(&insns[0]))),
		license:  uint64(uintptr(unsafe.Pointer(&license[0]))),
		progName: bpfName(name),
	}
	fd, err := bpfCall(unix.BPF_PROG_LOAD, unsafe.Pointer(&a), unsafe.Sizeof(a))
	if err != nil {
		// Load again with the log on only when it failed: the log costs
		// verifier time and is only read on error.
		a.logLevel, a.logSize, a.logBuf = 1, uint32(len(log)), uint64(uintptr(unsafe.Pointer(&log[0])))
		_, _ = bpfCall(unix.BPF_PROG_LOAD, unsafe.Pointer(&a), unsafe.Sizeof(a))
		msg := strings.TrimRight(string(log[:clen(log)]), "\n")
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		err = fmt.Errorf("afxdp: load program %s: %w\n%s", name, err, msg)
	}
	runtime.KeepAlive(insns)
	runtime.KeepAlive(license)
	runtime.KeepAlive(log)
	return fd, err
}

func clen(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

// bpfLinkCreateXDP attaches prog to ifindex through a bpf_link, whose Close
// detaches it. flags is unix.XDP_FLAGS_DRV_MODE or XDP_FLAGS_SKB_MODE.
func bpfLinkCreateXDP(progFD, ifindex int, flags uint32) (int, error) {
	a := linkCreateAttr{progFD: uint32(progFD), targetFD: uint32(ifindex), attachType: bpfXDPAttachType, flags: flags}
	return bpfCall(unix.BPF_LINK_CREATE, unsafe.Pointer(&a), unsafe.Sizeof(a))
}

type objInfoAttr struct {
	bpfFD   uint32
	infoLen uint32
	info    uint64
}

// bpfProgID returns the kernel's id of the program behind fd
// (BPF_OBJ_GET_INFO_BY_FD; bpf_prog_info starts with type, id).
func bpfProgID(fd int) (uint32, error) {
	var info [64]byte
	a := objInfoAttr{bpfFD: uint32(fd), infoLen: uint32(len(info)), info: uint64(uintptr(unsafe.Pointer(&info[0])))}
	_, err := bpfCall(unix.BPF_OBJ_GET_INFO_BY_FD, unsafe.Pointer(&a), unsafe.Sizeof(a))
	runtime.KeepAlive(&info)
	if err != nil {
		return 0, err
	}
	return uint32(info[4]) | uint32(info[5])<<8 | uint32(info[6])<<16 | uint32(info[7])<<24, nil
}

// ProgramExists reports whether a BPF program with this id is still loaded
// anywhere (BPF_PROG_GET_FD_BY_ID).
func ProgramExists(id uint32) bool {
	a := struct{ id, next, flags uint32 }{id: id}
	fd, err := bpfCall(unix.BPF_PROG_GET_FD_BY_ID, unsafe.Pointer(&a), unsafe.Sizeof(a))
	if err != nil {
		return err != unix.ENOENT
	}
	unix.Close(fd)
	return true
}

type testRunAttr struct {
	progFD      uint32
	retval      uint32
	dataSizeIn  uint32
	dataSizeOut uint32
	dataIn      uint64
	dataOut     uint64
	repeat      uint32
	duration    uint32
}

// bpfTestRun runs an XDP program once on frame (BPF_PROG_TEST_RUN) and
// returns its verdict.
func bpfTestRun(progFD int, frame []byte) (uint32, error) {
	out := make([]byte, len(frame)+512)
	a := testRunAttr{progFD: uint32(progFD), dataSizeIn: uint32(len(frame)), dataSizeOut: uint32(len(out)),
		dataIn: uint64(uintptr(unsafe.Pointer(&frame[0]))), dataOut: uint64(uintptr(unsafe.Pointer(&out[0]))), repeat: 1}
	_, err := bpfCall(unix.BPF_PROG_TEST_RUN, unsafe.Pointer(&a), unsafe.Sizeof(a))
	runtime.KeepAlive(frame)
	runtime.KeepAlive(out)
	return a.retval, err
}
