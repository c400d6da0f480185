package vpnload

import (
	"path/filepath"
	"sync"

	"github.com/ovfwd/ovfwd/appliance/testbed/unit"
)

// ovfwd runs as packaging/ovfwd.service runs it (appliance/testbed/unit).
var loadUnit = sync.OnceValues(unit.Load)

// layout lays out the work directory dir as the unit's: config files
// readable, state/ (the PKI) and run/ (the status socket) its user's.
func layout(dir string) error {
	u, err := loadUnit()
	if err != nil {
		return err
	}
	return u.Layout(dir)
}

// pkiIn is the PKI of work directory dir: the daemon's state, as in
// /var/lib/ovfwd.
func pkiIn(dir string) string { return filepath.Join(dir, "state", "pki") }
