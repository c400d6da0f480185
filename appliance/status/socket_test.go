package status

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Only a stale socket at the status path is removed: a regular file, a
// directory or a symlink there is refused and left as it was.
func TestListenRefusesWhatIsNotAStaleSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ovfwd.sock")
	target := filepath.Join(dir, "precious")
	if err := os.WriteFile(target, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	for what, make := range map[string]func() error{
		"regular file": func() error { return os.WriteFile(path, []byte("keep me"), 0o600) },
		"directory":    func() error { return os.Mkdir(path, 0o700) },
		"symlink":      func() error { return os.Symlink(target, path) },
	} {
		if err := make(); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Lstat(path)
		srv, err := Listen(path, sample)
		if err == nil {
			srv.Close()
			t.Errorf("%s at the socket path: Listen replaced it", what)
		} else if !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("%s at the socket path: %v", what, err)
		}
		after, err := os.Lstat(path)
		if err != nil || !os.SameFile(before, after) || after.Mode() != before.Mode() {
			t.Errorf("%s at the socket path changed: %v, was %v (%v)", what, after, before, err)
		}
		if b, err := os.ReadFile(target); err != nil || string(b) != "keep me" {
			t.Errorf("%s: the symlink's target changed: %q %v", what, b, err)
		}
		if err := os.RemoveAll(path); err != nil {
			t.Fatal(err)
		}
	}
}

// The socket appears at its path with mode 0660 already: nothing changes
// its mode after it appears (no IN_ATTRIB for its name), so no process
// can connect through a window of umask permissions.
func TestSocketBornWithItsMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ovfwd.sock")
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_ATTRIB|unix.IN_MOVED_TO); err != nil {
		t.Fatal(err)
	}
	old := unix.Umask(0) // the most open umask: only Listen's own mode may count
	srv, err := Listen(path, sample)
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket %v, err %v", fi, err)
	}
	appeared := false
	buf := make([]byte, 64<<10)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		n, err := unix.Read(fd, buf)
		if err == unix.EAGAIN {
			if appeared {
				break
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			// struct inotify_event: wd, mask, cookie, len, then name.
			mask := binary.NativeEndian.Uint32(buf[off+4:])
			size := int(binary.NativeEndian.Uint32(buf[off+12:]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+size], "\x00"))
			off += unix.SizeofInotifyEvent + size
			if name != "ovfwd.sock" {
				continue
			}
			if mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
				appeared = true
			}
			if mask&unix.IN_ATTRIB != 0 {
				t.Errorf("the socket's attributes changed after it appeared at its path (event %#x)", mask)
			}
		}
	}
	if !appeared {
		t.Error("no event for the socket's creation")
	}
}
