package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/ovfwd/ovfwd/config"
)

// socketFlags adds -s and -c to a command that talks to the status socket;
// the function it returns gives the socket's path once fs is parsed.
func socketFlags(fs *flag.FlagSet) func() (string, error) {
	sock := fs.String("s", defaultSocket, "status socket of the running ovfwd")
	cfgFile := fs.String("c", "", "take the socket path from this config file's [status] socket")
	return func() (string, error) {
		if *cfgFile == "" {
			return *sock, nil
		}
		c, err := config.Load(*cfgFile)
		if err != nil {
			return "", err
		}
		if c.Status.Socket == "" {
			return "", fmt.Errorf("%s turns the status socket off ([status] socket = \"\")", *cfgFile)
		}
		return c.Status.Socket, nil
	}
}

// newFlags makes a command's flag set; -h prints synopsis and flags.
func newFlags(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("ovfwd "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: ovfwd %s %s\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags placed anywhere among the positional arguments (Go's
// flag package stops at the first positional) and returns the positionals.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseFlags parses a command that takes flags only.
func parseFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	return wantArgs(fs, pos, 0, 0)
}

// wantArgs checks the positional count.
func wantArgs(fs *flag.FlagSet, pos []string, min, max int) error {
	if len(pos) < min || len(pos) > max {
		fs.Usage()
		return errUsage
	}
	return nil
}
