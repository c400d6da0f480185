package config

import (
	"errors"
	"fmt"

	"github.com/BurntSushi/toml"
)

// decodeTOML parses data into toml's generic tree: tables as map[string]any,
// arrays of tables as []map[string]any, other arrays as []any, and scalars
// as string, int64, float64, bool or a date-time. A syntax error comes back
// as one *Error with toml's line.
func decodeTOML(file string, data []byte) (map[string]any, *Error) {
	var root map[string]any
	if _, err := toml.Decode(string(data), &root); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			fix := "check the TOML syntax"
			if pe.Position.Col > 0 {
				fix = fmt.Sprintf("check the TOML syntax at column %d", pe.Position.Col)
			}
			return nil, &Error{File: file, Line: pe.Position.Line, Msg: pe.Message, Fix: fix}
		}
		return nil, &Error{File: file, Msg: err.Error()}
	}
	return root, nil
}
