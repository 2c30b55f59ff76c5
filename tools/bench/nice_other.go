//go:build !linux

package bench

import "errors"

// lowerPriority is Linux's alone (see nice_linux.go): elsewhere the
// harness keeps its priority, and the report says so.
func lowerPriority(n int) (restore func() error, err error) {
	return nil, errors.New("bench: lowering the harness's priority is supported on Linux only")
}
