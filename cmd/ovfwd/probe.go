package main

import (
	"os"

	"github.com/ovfwd/ovfwd/mlx5"
)

func probeCmd(args []string) error {
	fs := newFlags("probe", "[-pci ADDR]")
	pci := fs.String("pci", "", "PCI function to bring up (default: every vfio-pci bound ConnectX)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return mlx5.Probe(os.Stdout, *pci)
}
