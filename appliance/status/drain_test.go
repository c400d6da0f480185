package status

import (
	"path/filepath"
	"testing"
	"time"
)

func TestParseDrain(t *testing.T) {
	for line, want := range map[string]Request{
		"drain":        {Op: OpDrain},
		"drain 10m":    {Op: OpDrain, Target: "10m"},
		"drain cancel": {Op: OpDrain, Target: DrainCancel},
	} {
		got, err := ParseRequest(line)
		if err != nil || got != want {
			t.Errorf("%q: %+v %v, want %+v", line, got, err, want)
		}
	}
	if d := (Request{Op: OpDrain, Target: "90s"}).DrainDeadline(); d != 90*time.Second {
		t.Errorf("deadline %v", d)
	}
	for _, bad := range []string{"drain soon", "drain -5m", "drain 0s", "drain 5m now"} {
		if _, err := ParseRequest(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestDrainCommand: StartDrain's request reaches the handler as parsed,
// the drain comes back, and a handler's error is an error.
func TestDrainCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ovfwd.sock")
	var got []Request
	srv, err := ListenCommands(path, sample, func(r Request) Reply {
		got = append(got, r)
		if r.Target == DrainCancel {
			return Reply{Error: "not draining"}
		}
		return Reply{Drain: &Drain{Since: time.Unix(5, 0), Peers: 3}}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dr, err := StartDrain(path, 2*time.Minute, false, 2*time.Second)
	if err != nil || dr == nil || dr.Peers != 3 || len(got) != 1 || got[0].DrainDeadline() != 2*time.Minute {
		t.Fatalf("drain: %+v %v, handler saw %+v", dr, err, got)
	}
	if _, err := StartDrain(path, 0, true, 2*time.Second); err == nil || err.Error() != "not draining" {
		t.Errorf("cancel: %v", err)
	}
}
