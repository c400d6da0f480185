package config

import (
	"fmt"
	"strings"
)

// Error is one problem in a configuration file.
//
// Line is 1-based and always set when Key is set. Key is the dotted path of
// the offending key with array indices, as in "port[1].driver"; it is empty
// for problems that belong to no key (a syntax error, a missing section).
type Error struct {
	File string
	Line int
	Key  string
	Msg  string
	Fix  string // how to fix it, in the operator's words; may be empty
}

// Error reads like "ovfwd.toml:12: port[1].driver: unknown driver "dpdk"
// (fix: use one of auto, vfio, afxdp, afxdp-copy, mlx5-sim)".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString(" (fix: ")
		b.WriteString(e.Fix)
		b.WriteString(")")
	}
	return b.String()
}

// ErrorList is every problem found in one file, in line order.
type ErrorList []*Error

// Error is one line per problem.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find the individual *Error values.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}
