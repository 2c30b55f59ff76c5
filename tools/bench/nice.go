package bench

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// statNice reads the nice value from a /proc/<pid>/stat line: field 19,
// counted after the command name, which is in parentheses and may hold
// spaces and parentheses itself (so the last ')' ends it).
func statNice(stat []byte) (int, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("bench: stat line without a command name")
	}
	// After ") ": state (field 3), ..., nice (field 19): the 17th.
	fields := bytes.Fields(stat[i+1:])
	if len(fields) < 17 {
		return 0, fmt.Errorf("bench: stat line with %d fields after the command name", len(fields))
	}
	return strconv.Atoi(string(fields[16]))
}
