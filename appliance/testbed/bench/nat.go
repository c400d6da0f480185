package bench

import (
	"net/netip"

	"github.com/ovfwd/ovfwd/fwd"
	"github.com/ovfwd/ovfwd/fwd/nat"
)

// NAT mode (FwdOptions.NAT): the same frames and cores, with the source
// translated to the appliance's address on the sink side — ovfwd's NAT44
// against Linux's nftables masquerade (conntrack and nf_nat).

// nftMasquerade is the Linux side's rule set, in the appliance namespace.
const nftMasquerade = `table ip ovfwd_bench_nat {
	chain post {
		type nat hook postrouting priority srcnat; policy accept;
		oifname "bnB1" masquerade
	}
}
`

func linuxNAT(t *topology) (undo func(), err error) {
	if _, err := t.app.Run("sh", "-c", "printf '%s' '"+nftMasquerade+"' | nft -f -"); err != nil {
		return nil, err
	}
	return func() { _, _ = t.app.Run("nft", "delete", "table", "ip", "ovfwd_bench_nat") }, nil
}

// ovfwdNAT gives the engine a NAT rule like the masquerade: the generator's
// subnet out of port 1 as port 1's address.
func ovfwdNAT(e *fwd.Engine) error {
	k, err := nat.Compile(nat.Config{Rules: []nat.Rule{{
		Name: "bench", Sources: []netip.Prefix{netip.MustParsePrefix(appAPrefix).Masked()}, Port: 1,
		Outside: []netip.Addr{netip.MustParseAddr(appBIP)}, PortLo: 1024, PortHi: 65535,
	}}})
	if err != nil {
		return err
	}
	e.SetNAT(k)
	return nil
}
