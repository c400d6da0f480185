package config_test

import (
	"fmt"

	"github.com/ovfwd/ovfwd/config"
)

func ExampleParse() {
	_, err := config.Parse("ovfwd.toml", []byte(`
[appliance]
mode = "router"
bacth = 64

[[port]]
name = "lan0"
driver = "dpdk"
ifname = "eth1"
addresses = ["198.18.0.1/24"]

[[route]]
prefix = "198.18.64.1/20"
via = "198.18.9.1"

[vpn]
enabled = true
pool_v4 = "198.18.0.0/16"
ca = "ca.crt"
cert = "server.crt"
key = "server.key"
`))
	fmt.Println(err)
	// Output:
	// ovfwd.toml:4: appliance.bacth: unknown key in [appliance] (fix: did you mean "batch"?)
	// ovfwd.toml:8: port[0].driver: unknown driver "dpdk" (fix: use one of auto, vfio, afxdp, afxdp-copy, mlx5-sim)
	// ovfwd.toml:13: route[0].prefix: host bits set in prefix "198.18.64.1/20" (fix: use "198.18.64.0/20")
	// ovfwd.toml:14: route[0].via: no port reaches next hop 198.18.9.1 (fix: use a next hop inside one of the ports' subnets, or name the port)
	// ovfwd.toml:17: vpn.enabled: VPN enabled without tls_crypt or tls_auth (fix: add tls_crypt = "tls-crypt.key"; ovfwd pki init writes one)
	// ovfwd.toml:18: vpn.pool_v4: pool_v4 198.18.0.0/16 overlaps the subnet of port "lan0" 198.18.0.0/24 (line 10) (fix: choose a prefix that no port subnet, pool or uplink route uses)
}
