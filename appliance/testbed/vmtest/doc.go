// Package vmtest boots QEMU guests with a real Linux kernel for the tests
// that no namespace on the host can give: the VFIO layer against the
// kernel's vfio-pci and an IOMMU (vfio_test.go), the installed package
// under a real systemd (appliance_test.go), the XDP fast path on 6.1's
// verifier (fastpath_test.go), and AF_XDP on a real NIC driver, virtio_net
// with several queues, on Linux 6.12 (virtio_test.go).
//
// The guests run Debian bookworm's 6.1 kernel (linux-image-6.1.0-N-amd64)
// or bookworm-security's 6.12 cloud kernel, taken with `apt-get download`
// and unpacked into a cache (nothing is installed on the host), under QEMU
// 7.2 in TCG (no KVM needed). The versions are pinned by series (KernelPin,
// QEMUSeries); a host whose apt or QEMU offers another series fails with a
// message saying so, because the module lists and the emulator quirks the
// tests work around are those of these versions. Kernel and guest images are cached under CacheRoot,
// keyed by the exact package versions, so a fresh clone on the same machine
// reuses them and a new package version rebuilds them.
//
// A guest reports on its second serial port (ttyS1), one line per step; the
// first serial port is the console, printed when a test fails.
package vmtest
