package vmtest

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks an initramfs
// from (Documentation/driver-api/early-userspace/buffer-format.rst).
type cpioWriter struct {
	w   *bufio.Writer
	ino uint32
	err error
}

func newCPIO(w io.Writer) *cpioWriter { return &cpioWriter{w: bufio.NewWriterSize(w, 1<<20)} }

func (c *cpioWriter) pad(n int) {
	if r := n % 4; r != 0 {
		c.w.Write(make([]byte, 4-r))
	}
}

func (c *cpioWriter) header(name string, mode uint32, uid, gid uint32, size int64) {
	c.ino++
	name = strings.TrimPrefix(name, "/")
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		c.ino, mode, uid, gid, 1, 0, size, 0, 0, 0, 0, len(name)+1, 0)
	c.w.WriteString(hdr)
	c.w.WriteString(name)
	c.w.WriteByte(0)
	c.pad(len(hdr) + len(name) + 1)
}

// Dir adds a directory.
func (c *cpioWriter) Dir(name string, perm uint32) { c.header(name, syscall.S_IFDIR|perm, 0, 0, 0) }

// File adds a regular file with the given content.
func (c *cpioWriter) File(name string, perm uint32, data []byte) {
	c.header(name, syscall.S_IFREG|perm, 0, 0, int64(len(data)))
	c.w.Write(data)
	c.pad(len(data))
}

// Symlink adds a symbolic link.
func (c *cpioWriter) Symlink(name, target string) {
	c.header(name, syscall.S_IFLNK|0o777, 0, 0, int64(len(target)))
	c.w.WriteString(target)
	c.pad(len(target))
}

// Copy adds the host file from as name.
func (c *cpioWriter) Copy(name, from string, perm uint32) {
	if c.err != nil {
		return
	}
	b, err := os.ReadFile(from)
	if err != nil {
		c.err = err
		return
	}
	c.File(name, perm, b)
}

// Tree adds everything under root (a guest's root filesystem) with its
// owners and modes; device nodes, sockets and fifos are left out (the guest
// mounts devtmpfs).
func (c *cpioWriter) Tree(root string) {
	if c.err != nil {
		return
	}
	c.err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := st.Mode
		switch {
		case fi.Mode().IsDir():
			c.header(rel, mode, st.Uid, st.Gid, 0)
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			c.header(rel, mode, st.Uid, st.Gid, int64(len(t)))
			c.w.WriteString(t)
			c.pad(len(t))
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			c.header(rel, mode, st.Uid, st.Gid, fi.Size())
			n, err := io.Copy(c.w, f)
			f.Close()
			if err != nil {
				return err
			}
			if n != fi.Size() {
				return fmt.Errorf("%s changed size while archived", p)
			}
			c.pad(int(n))
		}
		return nil
	})
}

// Close writes the trailer and flushes.
func (c *cpioWriter) Close() error {
	c.header("TRAILER!!!", 0, 0, 0, 0)
	if err := c.w.Flush(); err != nil && c.err == nil {
		c.err = err
	}
	return c.err
}
