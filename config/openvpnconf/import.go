package openvpnconf

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
)

// maxCCDFiles and maxCCDFile bound what is read from a client-config-dir.
const (
	maxCCDFiles = 100_000
	maxCCDFile  = 64 << 10
)

// ReadCCD reads every regular file of a client-config-dir; each file's
// name is a client's common name.
func ReadCCD(dir string) (map[string][]byte, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(ents) > maxCCDFiles {
		return nil, fmt.Errorf("%d files, more than %d", len(ents), maxCCDFiles)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		if len(data) > maxCCDFile {
			return nil, fmt.Errorf("%s: larger than %d bytes", e.Name(), maxCCDFile)
		}
		out[e.Name()] = data
	}
	return out, nil
}

// Import reads the server.conf at path and translates it (see Translate);
// o.Source and o.Dir default to path and its directory, o.ReadCCD to
// ReadCCD.
func Import(path string, o Options) (*Result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if o.Source == "" {
		o.Source = path
	}
	if o.Dir == "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		o.Dir = filepath.Dir(abs)
	}
	if o.ReadCCD == nil {
		o.ReadCCD = ReadCCD
	}
	return Translate(f, o)
}

// WriteFiles writes the inline blocks out: certificates 0644, private
// keys 0640 and, when this process may (root), owned by group (the
// daemon's, "ovfwd"), so the unit's user reads them and no one else does.
// A file that exists with other contents is an error, never overwritten.
func (r *Result) WriteFiles(group string) error {
	gid := -1
	if g, err := user.LookupGroup(group); err == nil && os.Geteuid() == 0 {
		gid, _ = strconv.Atoi(g.Gid)
	}
	for _, f := range r.Files {
		if old, err := os.ReadFile(f.Path); err == nil {
			if !bytes.Equal(old, f.Data) {
				return fmt.Errorf("%s exists with other contents: move it away or give another -o directory", f.Path)
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		mode := os.FileMode(0o644)
		if f.Secret {
			mode = 0o640
		}
		if err := os.WriteFile(f.Path, f.Data, mode); err != nil {
			return err
		}
		if err := os.Chmod(f.Path, mode); err != nil {
			return err
		}
		if f.Secret && gid >= 0 {
			if err := os.Chown(f.Path, -1, gid); err != nil {
				return err
			}
		}
	}
	return nil
}
