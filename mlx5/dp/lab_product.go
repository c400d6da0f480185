//go:build !mlx5lab

package dp

// LabBuild says whether the Lab variants are compiled in.
const LabBuild = false

// rxLab is empty in the product build and answers with constants, so the
// variant checks in poll and deliver compile away.
type rxLab struct{}

func (rxLab) freshContext() bool { return false }
func (rxLab) farL2() bool        { return true }
func (rxLab) plain() bool        { return true }
func (rxLab) record() bool       { return true }
func (rxLab) cqePrefetch() bool  { return true }

// SetLab refuses every variant: this build has none.
func (q *RxQueue) SetLab(l Lab) error {
	if l != (Lab{}) {
		return errNoLab
	}
	return nil
}
