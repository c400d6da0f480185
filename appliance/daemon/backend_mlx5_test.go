package daemon

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ovfwd/ovfwd/appliance/daemon/mlx5sim"
	"github.com/ovfwd/ovfwd/config"
	"github.com/ovfwd/ovfwd/mlx5/model/fullsim"
)

// The daemon's tests run ports on the device model, as cmd/ovfwd lets
// `ovfwd run` do.
func init() { RegisterMLX5Backend(config.DriverMLX5Sim, mlx5sim.Mode, mlx5sim.Open) }

// The daemon services an mlx5 function's event queue and health from the
// control plane: link changes on an idle port are seen within the service
// interval, with no command running to drain the EQ.
func TestMLX5FunctionServiced(t *testing.T) {
	p := &config.Port{Name: "p0", MTU: 1500}
	b, _ := registeredMLX5(config.DriverMLX5Sim)
	fp, closeFn, err := openRegistered(b, p, mlx5PortConfig(p, 0, 1, false), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := closeFn(); err != nil {
			t.Error(err)
		}
	}()
	dev := fp.(*fullsim.Port).Device()
	for i := 0; i < 10; i++ {
		dev.Model().SetLink(i%2 == 1)
	}
	deadline := time.Now().Add(3 * mlx5ServiceInterval)
	for dev.HCA().LinkEvents() < 10 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := dev.HCA().LinkEvents(); n != 10 {
		t.Fatalf("%d of 10 link changes seen within %v", n, 3*mlx5ServiceInterval)
	}
}
