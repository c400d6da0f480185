package config

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// BurntSushi/toml's MetaData knows where keys are, but it neither exports
// positions nor tells the elements of an array of tables apart ("port.name" is
// one entry for every [[port]]). So after toml has accepted a file we scan it
// once more, here, to learn on which line each key path is written, in the
// same path spelling the decoder uses: "port[1].afxdp.frame_size",
// "vpn.listen[0]". The scanner only ever sees valid TOML (toml parsed it
// first), which keeps it small; on anything it does not follow it stops
// indexing rather than guessing, and lookups fall back to an ancestor key.

// lineIndex maps a key path to the 1-based line where it is written.
type lineIndex map[string]int

// lookup is the line of path, or of its nearest indexed ancestor, or 0.
func (ix lineIndex) lookup(path string) int {
	for path != "" {
		if n, ok := ix[path]; ok {
			return n
		}
		path = parentPath(path)
	}
	return 0
}

// parentPath strips the last ".key" or "[i]" from path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func joinPath(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

type lineScanner struct {
	src  []byte
	pos  int
	line int
	ix   lineIndex
	// arrays holds, for each array-of-tables path seen, the index of its
	// latest element ("port" → 1 after the second [[port]]).
	arrays map[string]int
}

func indexLines(src []byte) lineIndex {
	s := &lineScanner{src: src, line: 1, ix: lineIndex{}, arrays: map[string]int{}}
	if len(src) >= 3 && src[0] == 0xef && src[1] == 0xbb && src[2] == 0xbf { // UTF-8 byte order mark
		s.pos = 3
	}
	s.document()
	return s.ix
}

func (s *lineScanner) peek(off int) byte {
	if s.pos+off < len(s.src) {
		return s.src[s.pos+off]
	}
	return 0
}

func (s *lineScanner) eof() bool { return s.pos >= len(s.src) }

// advance moves n bytes, counting newlines.
func (s *lineScanner) advance(n int) {
	for ; n > 0 && s.pos < len(s.src); n-- {
		if s.src[s.pos] == '\n' {
			s.line++
		}
		s.pos++
	}
}

func (s *lineScanner) record(path string, line int) {
	if _, ok := s.ix[path]; !ok {
		s.ix[path] = line
	}
}

// skipBlank skips spaces and tabs, and with newlines also line ends and
// comments.
func (s *lineScanner) skipBlank(newlines bool) {
	for !s.eof() {
		switch c := s.peek(0); {
		case c == ' ' || c == '\t':
			s.pos++
		case newlines && (c == '\n' || c == '\r'):
			s.advance(1)
		case newlines && c == '#':
			s.skipComment()
		default:
			return
		}
	}
}

func (s *lineScanner) skipComment() {
	for !s.eof() && s.peek(0) != '\n' {
		s.pos++
	}
}

func (s *lineScanner) document() {
	table := ""
	for {
		s.skipBlank(true)
		if s.eof() {
			return
		}
		start := s.pos
		switch {
		case s.peek(0) == '[' && s.peek(1) == '[':
			s.advance(2)
			table = s.header(true)
		case s.peek(0) == '[':
			s.advance(1)
			table = s.header(false)
		default:
			s.keyValue(table)
		}
		if s.pos == start { // nothing understood: stop rather than loop
			return
		}
		// The rest of the line can only be blank or a comment.
		s.skipBlank(false)
		if s.peek(0) == '#' {
			s.skipComment()
		}
		for !s.eof() && s.peek(0) != '\n' {
			s.pos++
		}
	}
}

// header reads the key of a [table] or [[array]] header (after its opening
// brackets) and returns the table's path.
func (s *lineScanner) header(array bool) string {
	line := s.line
	keys := s.dottedKey()
	if keys == nil {
		return ""
	}
	path := ""
	for i, k := range keys {
		path = joinPath(path, k)
		last := i == len(keys)-1
		if last && array {
			n, seen := s.arrays[path]
			if seen {
				n++
			}
			s.arrays[path] = n
			s.record(path, line)
			path = indexPath(path, n)
		} else if n, ok := s.arrays[path]; ok {
			path = indexPath(path, n)
		}
		s.record(path, line)
	}
	return path
}

// keyValue reads "key = value" inside table.
func (s *lineScanner) keyValue(table string) {
	line := s.line
	keys := s.dottedKey()
	if keys == nil {
		return
	}
	path := table
	for _, k := range keys {
		path = joinPath(path, k)
		s.record(path, line)
	}
	s.skipBlank(false)
	if s.peek(0) != '=' {
		return
	}
	s.advance(1)
	s.skipBlank(false)
	s.value(path)
}

// dottedKey reads a.b."c d".'e' and stops after it (and after a closing ]
// or ]] if one follows). It returns nil when no key is there.
func (s *lineScanner) dottedKey() []string {
	var keys []string
	for {
		s.skipBlank(false)
		k, ok := s.simpleKey()
		if !ok {
			return nil
		}
		keys = append(keys, k)
		s.skipBlank(false)
		if s.peek(0) != '.' {
			break
		}
		s.advance(1)
	}
	for s.peek(0) == ']' {
		s.advance(1)
	}
	return keys
}

func isBareKeyByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func (s *lineScanner) simpleKey() (string, bool) {
	switch s.peek(0) {
	case '"':
		start := s.pos
		s.basicString()
		return unescapeBasic(s.src[start+1 : max(start+1, s.pos-1)]), true
	case '\'':
		start := s.pos
		s.literalString()
		return string(s.src[start+1 : max(start+1, s.pos-1)]), true
	}
	start := s.pos
	for !s.eof() && isBareKeyByte(s.peek(0)) {
		s.pos++
	}
	return string(s.src[start:s.pos]), s.pos > start
}

// value skips one value, indexing the elements of arrays and the keys of
// inline tables under path.
func (s *lineScanner) value(path string) {
	switch c := s.peek(0); {
	case c == '"' && s.peek(1) == '"' && s.peek(2) == '"':
		s.multiline('"')
	case c == '\'' && s.peek(1) == '\'' && s.peek(2) == '\'':
		s.multiline('\'')
	case c == '"':
		s.basicString()
	case c == '\'':
		s.literalString()
	case c == '[':
		s.advance(1)
		for i := 0; ; i++ {
			s.skipBlank(true)
			if s.eof() || s.peek(0) == ']' {
				s.advance(1)
				return
			}
			elem := indexPath(path, i)
			s.record(elem, s.line)
			before := s.pos
			s.value(elem)
			s.skipBlank(true)
			if s.peek(0) == ',' {
				s.advance(1)
			} else if s.pos == before {
				return
			}
		}
	case c == '{':
		s.advance(1)
		for {
			s.skipBlank(true)
			if s.eof() || s.peek(0) == '}' {
				s.advance(1)
				return
			}
			before := s.pos
			s.keyValue(path)
			s.skipBlank(true)
			if s.peek(0) == ',' {
				s.advance(1)
			} else if s.pos == before {
				return
			}
		}
	default:
		s.bare()
	}
}

// bare skips a number, boolean or date-time. A date-time may hold one space
// between its date and time ("1979-05-27 07:32:00").
func (s *lineScanner) bare() {
	start := s.pos
	for !s.eof() {
		switch s.peek(0) {
		case ',', ']', '}', '#', ' ', '\t', '\n', '\r':
			if s.peek(0) == ' ' && s.pos-start == 10 && s.src[start+4] == '-' && isDigit(s.peek(1)) {
				s.pos++
				continue
			}
			return
		}
		s.pos++
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// basicString skips "…" with escapes, leaving pos after the closing quote.
func (s *lineScanner) basicString() {
	s.advance(1)
	for !s.eof() {
		switch s.peek(0) {
		case '\\':
			s.advance(2)
		case '"':
			s.advance(1)
			return
		case '\n':
			return
		default:
			s.pos++
		}
	}
}

func (s *lineScanner) literalString() {
	s.advance(1)
	for !s.eof() {
		switch s.peek(0) {
		case '\'':
			s.advance(1)
			return
		case '\n':
			return
		default:
			s.pos++
		}
	}
}

// multiline skips a multi-line string whose quote character is q (three
// quotes open and close it); up to two more quotes may end the content right
// before the closing three.
func (s *lineScanner) multiline(q byte) {
	s.advance(3)
	for !s.eof() {
		c := s.peek(0)
		if c == '\\' && q == '"' {
			s.advance(2)
			continue
		}
		if c == q && s.peek(1) == q && s.peek(2) == q {
			s.advance(3)
			for i := 0; i < 2 && s.peek(0) == q; i++ {
				s.advance(1)
			}
			return
		}
		s.advance(1)
	}
}

// unescapeBasic decodes the escapes TOML allows in a basic-string key. An
// escape it does not know is kept as written; the key then simply does not
// match and lookups fall back to the enclosing table.
func unescapeBasic(b []byte) string {
	if !strings.ContainsRune(string(b), '\\') {
		return string(b)
	}
	var out strings.Builder
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out.WriteByte(b[i])
			continue
		}
		i++
		switch b[i] {
		case 'b':
			out.WriteByte('\b')
		case 't':
			out.WriteByte('\t')
		case 'n':
			out.WriteByte('\n')
		case 'f':
			out.WriteByte('\f')
		case 'r':
			out.WriteByte('\r')
		case 'e':
			out.WriteByte(0x1b)
		case '"', '\\':
			out.WriteByte(b[i])
		case 'x', 'u', 'U':
			n := 8
			switch b[i] {
			case 'x':
				n = 2
			case 'u':
				n = 4
			}
			if i+n <= len(b)-1 {
				if r, err := strconv.ParseUint(string(b[i+1:i+1+n]), 16, 32); err == nil && utf8.ValidRune(rune(r)) {
					out.WriteRune(rune(r))
					i += n
					continue
				}
			}
			out.WriteByte('\\')
			out.WriteByte(b[i])
		default:
			out.WriteByte('\\')
			out.WriteByte(b[i])
		}
	}
	return out.String()
}
