package main

import (
	"fmt"
	"strings"

	"github.com/ovfwd/ovfwd/config"
)

func checkCmd(args []string) error {
	fs := newFlags("check", "[-c] FILE")
	path := fs.String("c", "", "config file (or give it as the argument)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 0, 1); err != nil {
		return err
	}
	file := *path
	if len(pos) == 1 {
		file = pos[0]
	}
	if file == "" {
		file = defaultConfig
	}
	c, err := config.Load(file)
	if err != nil {
		return err
	}
	var ports []string
	for _, p := range c.Ports {
		where := p.IfName
		if where == "" {
			where = p.PCI
		}
		ports = append(ports, fmt.Sprintf("%s (%s %s)", p.Name, p.Driver, where))
	}
	vpn := "off"
	if c.VPN.Enabled {
		vpn = fmt.Sprintf("on, udp port %d", c.VPN.Port)
	}
	fmt.Printf("ok: %s: %s mode, %d ports [%s], %d static routes, vpn %s\n",
		file, c.Appliance.Mode, len(c.Ports), strings.Join(ports, ", "), len(c.Routes), vpn)
	return nil
}
