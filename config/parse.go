package config

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
)

// Parse decodes and validates data, the contents of filename. filename
// appears in errors and anchors relative key-file paths; Parse does not read
// the file system (Load also checks the key files). The error, when not nil,
// is an ErrorList holding every problem found.
func Parse(filename string, data []byte) (*Config, error) {
	c, d := parse(filename, data)
	if d != nil && len(d.errs) > 0 {
		return nil, d.sorted()
	}
	return c, nil
}

// parse is Parse keeping the decoder, so Load can add its own findings. On
// a syntax error c is nil and d holds only that error.
func parse(filename string, data []byte) (*Config, *decoder) {
	d := &decoder{file: filename}
	root, serr := decodeTOML(filename, data)
	if serr != nil {
		d.errs = ErrorList{serr}
		return nil, d
	}
	d.lines = indexLines(data)
	c := Default()
	c.File = filename
	c.lines = d.lines
	d.decodeRoot(&table{d: d, m: root}, c)
	d.validate(c)
	resolvePaths(c, filepath.Dir(filename))
	return c, d
}

// Load reads, decodes and validates the file at path, and checks that every
// key file the VPN needs can be opened and is a regular file.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		fix := "check the path given with -c"
		if isPermission(err) {
			fix = PermissionFix(path, AccessRead)
		}
		return nil, ErrorList{{File: path, Msg: err.Error(), Fix: fix}}
	}
	c, d := parse(path, data)
	if c == nil {
		return nil, d.sorted()
	}
	for _, f := range c.vpnFiles() {
		if *f.path == "" || d.bad[f.key] {
			continue
		}
		if err := checkKeyFile(*f.path); err != nil {
			fix := "correct the path, relative to the config file's directory, or create the file with ovfwd pki init"
			switch {
			case errors.Is(err, errNotRegular):
				fix = "point it at a PEM or key file"
			case isPermission(err):
				fix = PermissionFix(*f.path, AccessRead)
			}
			d.errorf(f.key, fix, "cannot use %s: %v", *f.path, unwrapPathError(err))
		}
	}
	if len(d.errs) > 0 {
		return nil, d.sorted()
	}
	return c, nil
}

var errNotRegular = errors.New("not a regular file")

// checkKeyFile opens path for reading, as the VPN will.
func checkKeyFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return errNotRegular
	}
	return nil
}

func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// sorted is the errors in file order, keeping the decoder's order on a line.
func (d *decoder) sorted() ErrorList {
	sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
	return d.errs
}
