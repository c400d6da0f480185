//go:build mlx5lab

package dp

// LabBuild says whether the Lab variants are compiled in.
const LabBuild = true

// rxLab holds a queue's variant switches and the context the
// fresh-context variant zeroes.
type rxLab struct {
	Lab
	ctx [120]byte
}

// freshContext zeroes the context when the fresh-context variant is on, as
// a per-CQE struct would be, and says whether it is.
func (l *rxLab) freshContext() bool {
	if !l.FreshContext {
		return false
	}
	l.ctx = [120]byte{}
	return true
}

func (l *rxLab) farL2() bool       { return !l.NoFarPrefetch }
func (l *rxLab) plain() bool       { return !l.GeneralDecoder }
func (l *rxLab) record() bool      { return !l.NoRecord }
func (l *rxLab) cqePrefetch() bool { return !l.NoCQEPrefetch }

// SetLab selects the variants for q (the zero Lab is the product's path).
func (q *RxQueue) SetLab(l Lab) error {
	q.lab.Lab = l
	q.setDist(q.dist)
	return nil
}
