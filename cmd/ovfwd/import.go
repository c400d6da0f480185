package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ovfwd/ovfwd/config/openvpnconf"
)

// unitGroup is the group the packaged unit runs ovfwd with: private keys
// import writes are readable by it.
const unitGroup = "ovfwd"

func importCmd(args []string) error {
	fs := newFlags("import", "SERVER.CONF [-o FILE] [-ccd DIR] [-port IFNAME=ADDR/LEN[,ADDR/LEN] …]")
	out := fs.String("o", "", "write the ovfwd.toml here (inline keys beside it) instead of to standard output")
	ccd := fs.String("ccd", "", "read this client-config-dir instead of the one server.conf names")
	var ports stringList
	fs.Var(&ports, "port", "add a [[port]] for interface IFNAME with its addresses (repeat per NIC)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if err := wantArgs(fs, pos, 1, 1); err != nil {
		return err
	}
	o := openvpnconf.Options{CCD: *ccd}
	for _, p := range ports {
		port, err := openvpnconf.ParsePort(p)
		if err != nil {
			return err
		}
		o.Ports = append(o.Ports, port)
	}
	if *out != "" {
		abs, err := filepath.Abs(*out)
		if err != nil {
			return err
		}
		o.KeyDir = filepath.Dir(abs)
	}
	res, err := openvpnconf.Import(pos[0], o)
	if err != nil {
		return err
	}
	report(os.Stderr, res)
	if fatal := res.Fatal(); len(fatal) > 0 {
		return fmt.Errorf("nothing written: %d option(s) have no ovfwd equivalent a client could still connect through (see above)", len(fatal))
	}
	if err := res.WriteFiles(unitGroup); err != nil {
		return err
	}
	if *out == "" {
		_, err := os.Stdout.Write(res.TOML)
		return err
	}
	if err := os.WriteFile(*out, res.TOML, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s; next: ovfwd check %s (as root: it checks as the ovfwd user)\n", *out, *out)
	return nil
}

// report lists every option that was not simply mapped, then the counts.
func report(w io.Writer, res *openvpnconf.Result) {
	for _, r := range res.Rows {
		if r.Verdict == openvpnconf.Mapped && !r.Fatal {
			continue
		}
		where := ""
		if r.Line > 0 {
			where = fmt.Sprintf("line %d: ", r.Line)
		}
		text := r.Text
		if text == "" {
			text = r.Option
		}
		tag := string(r.Verdict)
		if r.Fatal {
			tag = "refused, fatal"
		}
		fmt.Fprintf(w, "%s%s: %s: %s\n", where, text, tag, r.Note)
	}
	fmt.Fprintf(w, "%d options: %d mapped, %d not needed, %d refused\n", len(res.Rows),
		res.Count(openvpnconf.Mapped), res.Count(openvpnconf.NotNeeded), res.Count(openvpnconf.Refused))
}
