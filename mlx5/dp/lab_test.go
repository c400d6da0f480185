package dp_test

import (
	"testing"

	"github.com/ovfwd/ovfwd/mlx5/dp"
	"github.com/ovfwd/ovfwd/mlx5/model/dpsim"
)

// TestSetLab: the product build refuses every variant (its queue has no
// switch to set); the lab build takes them, and the zero Lab in both.
func TestSetLab(t *testing.T) {
	for _, l := range []dp.Lab{{FreshContext: true}, {NoCQEPrefetch: true}, {NoFarPrefetch: true}, {GeneralDecoder: true}, {}} {
		port, _, err := dpsim.NewPort(dpsim.Config{PoolID: 5})
		if err != nil {
			t.Fatal(err)
		}
		err = port.Queue(0).RX.SetLab(l)
		port.Close()
		if want := dp.LabBuild || l == (dp.Lab{}); (err == nil) != want {
			t.Errorf("SetLab(%+v) in a build with LabBuild=%v: %v", l, dp.LabBuild, err)
		}
	}
}
