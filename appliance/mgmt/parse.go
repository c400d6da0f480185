package mgmt

import (
	"errors"
	"strings"
)

// Bounds of a command line, as openvpn's (options.c parse_line with
// MAX_PARMS 16 and OPTION_PARM_SIZE 256).
const (
	maxParams   = 16
	maxParamLen = 256
	// maxLine bounds one command line; a longer one is refused unread.
	maxLine = 1024
)

var (
	errBackslash = errors.New("bad backslash ('\\') usage")
	errQuote     = errors.New("no closing quotation")
	errParamLen  = errors.New("parameter too long")
)

// ParseLine splits a command line into its parameters the way openvpn's
// management interface does (options.c parse_line): blanks separate
// parameters; "double" and 'single' quotes group, a backslash escapes a
// backslash, a double quote or a blank outside single quotes; a parameter
// starting with ';' or '#' ends the line; at most 16 parameters are read.
func ParseLine(line string) ([]string, error) {
	if nul := strings.IndexByte(line, 0); nul >= 0 {
		line = line[:nul] // where openvpn's C string ends
	}
	const (
		initial = iota
		unquoted
		quoted
		squoted
	)
	var out []string
	var parm []byte
	state := initial
	backslash := false
	for i := 0; i <= len(line) && len(out) < maxParams; i++ {
		in := byte(0)
		if i < len(line) {
			in = line[i]
		}
		if !backslash && in == '\\' && state != squoted {
			backslash = true
			continue
		}
		var c byte
		done := false
		switch state {
		case initial:
			if space(in) {
				break
			}
			if in == ';' || in == '#' {
				return out, nil
			}
			switch {
			case !backslash && in == '"':
				state = quoted
			case !backslash && in == '\'':
				state = squoted
			default:
				c, state = in, unquoted
			}
		case unquoted:
			if !backslash && space(in) {
				done = true
			} else {
				c = in
			}
		case quoted:
			if !backslash && in == '"' {
				done = true
			} else {
				c = in
			}
		case squoted:
			if in == '\'' {
				done = true
			} else {
				c = in
			}
		}
		if in == 0 && (state == quoted || state == squoted) && !done {
			return nil, errQuote
		}
		if backslash && c != 0 && c != '\\' && c != '"' && !space(c) {
			return nil, errBackslash
		}
		backslash = false
		if done {
			out = append(out, string(parm))
			parm, state = parm[:0], initial
			continue
		}
		if c != 0 {
			if len(parm) >= maxParamLen-1 {
				return nil, errParamLen
			}
			parm = append(parm, c)
		}
	}
	return out, nil
}

// space is openvpn's: NUL and the C locale's blanks.
func space(c byte) bool {
	return c == 0 || c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}
