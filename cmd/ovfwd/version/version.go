// Package version holds the build's version: packaging/version.sh's string
// (0.3.1, 0.3.2~git5.<hash>), which the Makefile links in and the package
// carries too.
package version

import "runtime/debug"

// Version is set with -ldflags -X at build time; a plain `go build` gets
// fallback's.
var Version string

func init() {
	if Version == "" {
		info, _ := debug.ReadBuildInfo()
		Version = fallback(info)
	}
}

// fallback is the version of a build the Makefile did not stamp: below
// every tagged release (the '~'), with the commit when Go recorded it.
func fallback(info *debug.BuildInfo) string {
	v := "0.0.0~dev"
	if info == nil {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if len(rev) >= 12 {
		v += "." + rev[:12]
	}
	if modified == "true" {
		v += ".dirty"
	}
	return v
}
