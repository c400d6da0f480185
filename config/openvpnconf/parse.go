// Package openvpnconf reads an OpenVPN 2.6 server configuration
// (server.conf) and translates it into an ovfwd.toml: every option is
// either mapped onto a key the daemon honours, noted as not needed (ovfwd
// always behaves that way), or refused with the reason and what to do.
// `ovfwd import` is its command; docs/openvpn-migration.md carries its
// option table (Table), checked by this package's tests.
package openvpnconf

import (
	"fmt"
	"strings"
)

// Directive is one option line: its name without a leading "--" and its
// parameters with quotes and escapes removed.
type Directive struct {
	Line int
	Name string
	Args []string
}

// Inline is an inline file block, <tag> … </tag>.
type Inline struct {
	Line int
	Tag  string
	Body string
}

// File is a parsed configuration.
type File struct {
	Directives []Directive
	Inlines    []Inline
}

// Inline returns the block for tag, if there is one.
func (f *File) Inline(tag string) (Inline, bool) {
	for _, in := range f.Inlines {
		if in.Tag == tag {
			return in, true
		}
	}
	return Inline{}, false
}

// maxLine bounds one line, as openvpn's OPTION_LINE_SIZE (256) does more
// tightly; inline blocks are read line by line and bounded in total.
const (
	maxLine   = 4096
	maxInline = 1 << 20
)

// Parse splits a configuration into directives and inline blocks with
// openvpn's rules (options.c, parse_line and read_config_file): '#' or ';'
// at the start of a token ends the line, double quotes group and take
// backslash escapes, single quotes group verbatim, a backslash outside
// quotes escapes the next character, and a line "<tag>" opens an inline
// block closed by "</tag>".
func Parse(data []byte) (*File, error) {
	f := &File{}
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		n := i + 1
		line := lines[i]
		if len(line) > maxLine {
			return nil, fmt.Errorf("line %d: longer than %d bytes", n, maxLine)
		}
		trimmed := strings.TrimSpace(line)
		if tag, ok := openTag(trimmed); ok {
			var body strings.Builder
			closed := false
			for i++; i < len(lines); i++ {
				if strings.TrimSpace(lines[i]) == "</"+tag+">" {
					closed = true
					break
				}
				if body.Len()+len(lines[i]) > maxInline {
					return nil, fmt.Errorf("line %d: <%s> is larger than %d bytes", n, tag, maxInline)
				}
				body.WriteString(lines[i])
				body.WriteByte('\n')
			}
			if !closed {
				return nil, fmt.Errorf("line %d: <%s> is not closed by </%s>", n, tag, tag)
			}
			f.Inlines = append(f.Inlines, Inline{Line: n, Tag: tag, Body: body.String()})
			continue
		}
		toks, err := tokens(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		if len(toks) == 0 {
			continue
		}
		name := strings.TrimPrefix(toks[0], "--")
		if name == "" {
			return nil, fmt.Errorf("line %d: empty option name", n)
		}
		f.Directives = append(f.Directives, Directive{Line: n, Name: name, Args: toks[1:]})
	}
	return f, nil
}

// openTag recognises "<tag>" (not "</tag>").
func openTag(s string) (string, bool) {
	if len(s) < 3 || s[0] != '<' || s[len(s)-1] != '>' || s[1] == '/' {
		return "", false
	}
	tag := s[1 : len(s)-1]
	for _, c := range tag {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return "", false
		}
	}
	return tag, true
}

func tokens(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inToken := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case !inToken && (c == '#' || c == ';'):
			return out, nil
		case c == ' ' || c == '\t' || c == '\f' || c == '\v':
			if inToken {
				out = append(out, cur.String())
				cur.Reset()
				inToken = false
			}
		case c == '"' || c == '\'':
			inToken = true
			j := i + 1
			for ; j < len(line) && line[j] != c; j++ {
				if c == '"' && line[j] == '\\' && j+1 < len(line) {
					j++
				}
				cur.WriteByte(line[j])
			}
			if j >= len(line) {
				return nil, fmt.Errorf("unterminated %c quote", c)
			}
			i = j
		case c == '\\' && i+1 < len(line):
			inToken = true
			i++
			cur.WriteByte(line[i])
		default:
			inToken = true
			cur.WriteByte(c)
		}
	}
	if inToken {
		out = append(out, cur.String())
	}
	return out, nil
}
