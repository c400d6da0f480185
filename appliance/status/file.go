package status

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FileMode is the status file's mode: readable by the daemon's group, so
// an exporter or collectd in that group reads it (openvpn creates it 0600
// as root, status.c status_open).
const FileMode = 0o640

// File rewrites an openvpn status file ("status FILE N" with
// "status-version V") from the appliance's snapshots. Unlike openvpn,
// which truncates and rewrites the file in place, each version is written
// beside it and renamed over it, so a reader never sees half a file.
type File struct {
	path     string
	interval time.Duration
	version  int
	snap     func() Snapshot
	report   func(err error) // a write failed (err) or recovered (nil)

	writes, failures atomic.Uint64

	stop chan struct{}
	done sync.WaitGroup
}

// StartFile writes the file at once (so a bad path fails the start) and
// then every interval until Close. report hears of later failures, once
// per run of them, and of the recovery.
func StartFile(path string, interval time.Duration, version int, snap func() Snapshot, report func(error)) (*File, error) {
	if version < 1 || version > 3 {
		return nil, fmt.Errorf("status file: version %d is not 1, 2 or 3", version)
	}
	f := &File{path: path, interval: interval, version: version, snap: snap, report: report, stop: make(chan struct{})}
	if err := f.Write(); err != nil {
		return nil, err
	}
	f.done.Add(1)
	go f.run()
	return f, nil
}

func (f *File) run() {
	defer f.done.Done()
	t := time.NewTicker(f.interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		err := f.Write()
		if (err != nil) != failing && f.report != nil {
			f.report(err)
		}
		failing = err != nil
	}
}

// Write writes the file now.
func (f *File) Write() error {
	s := f.snap()
	var b strings.Builder
	WriteOpenVPN(&b, &s, f.version, time.Now(), "\n")
	if err := writeAtomic(f.path, b.String()); err != nil {
		f.failures.Add(1)
		return fmt.Errorf("status file: %w", err)
	}
	f.writes.Add(1)
	return nil
}

// Counts are the writes done and failed so far.
func (f *File) Counts() (writes, failures uint64) { return f.writes.Load(), f.failures.Load() }

// Close stops the rewrites; the file keeps its last contents, as
// openvpn's does.
func (f *File) Close() {
	close(f.stop)
	f.done.Wait()
}

func writeAtomic(path, text string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if _, err := tmp.WriteString(text); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(FileMode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
