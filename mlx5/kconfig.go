package mlx5

import (
	"bufio"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
)

// kernelVFIO reads CONFIG_VFIO from the running kernel's config
// (/proc/config.gz): "y", "m", "n" (not set), or "" when unknown.
func kernelVFIO(paths Paths) string {
	f, err := os.Open(filepath.Join(paths.Proc, "config.gz"))
	if err != nil {
		return ""
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		switch l := sc.Text(); {
		case l == "# CONFIG_VFIO is not set":
			return "n"
		case strings.HasPrefix(l, "CONFIG_VFIO="):
			return strings.TrimPrefix(l, "CONFIG_VFIO=")
		}
	}
	return ""
}

// noVFIOProblem explains a missing /dev/vfio/vfio as precisely as the
// kernel config allows.
func noVFIOProblem(paths Paths) SetupProblem {
	if kernelVFIO(paths) == "n" {
		return SetupProblem{
			What: "the running kernel was built without VFIO (CONFIG_VFIO is not set in /proc/config.gz), so /dev/vfio/vfio cannot exist",
			Fix: "boot a kernel built with CONFIG_VFIO=m, CONFIG_VFIO_PCI=m and CONFIG_VFIO_IOMMU_TYPE1=m (any distribution kernel has them),\n" +
				"then modprobe vfio-pci; until then use the AF_XDP driver (driver = \"afxdp\")",
		}
	}
	return SetupProblem{
		What: "/dev/vfio/vfio does not exist: the VFIO modules are not loaded",
		Fix: "modprobe vfio-pci   (if the module does not exist the kernel lacks it: it needs\n" +
			"CONFIG_VFIO=m, CONFIG_VFIO_PCI=m and CONFIG_VFIO_IOMMU_TYPE1=m; install a distribution kernel or rebuild)",
	}
}
