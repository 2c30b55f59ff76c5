package provider

import (
	"context"
	"errors"
	"net/url"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestTransportError(t *testing.T) {
	t.Parallel()
	refused := &url.Error{Op: "Post", URL: "http://x", Err: syscall.ECONNREFUSED}
	clientTimeout := &url.Error{Op: "Post", URL: "http://x", Err: timeoutErr{}}
	tests := []struct {
		name   string
		ctxErr error
		err    error
		sent   bool
		status int
		want   Error
	}{
		{"refused before sending", nil, refused, false, 0, Error{Class: ClassTransient, Code: CodeConnectionError}},
		{"cut after sending", nil, errors.New("EOF"), true, 0, Error{Class: ClassAmbiguous, Code: CodeConnectionCut}},
		{"cut while reading a success", nil, errors.New("unexpected EOF"), true, 200, Error{Class: ClassAmbiguous, Status: 200, Code: CodeConnectionCut}},
		{"deadline before sending", context.DeadlineExceeded, refused, false, 0, Error{Class: ClassTransient, Code: CodeTimeout}},
		{"deadline after sending", context.DeadlineExceeded, refused, true, 0, Error{Class: ClassAmbiguous, Code: CodeTimeout}},
		{"canceled before sending", context.Canceled, refused, false, 0, Error{Class: ClassTransient, Code: CodeCanceled}},
		{"canceled after sending", context.Canceled, refused, true, 0, Error{Class: ClassAmbiguous, Code: CodeCanceled}},
		{"client timeout after sending", nil, clientTimeout, true, 0, Error{Class: ClassAmbiguous, Code: CodeTimeout}},
		{"client timeout before sending", nil, clientTimeout, false, 0, Error{Class: ClassTransient, Code: CodeTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := transportError(tt.ctxErr, tt.err, tt.sent, tt.status)
			if diff := cmp.Diff(&tt.want, got, ignoreRaw); diff != "" {
				t.Errorf("transportError mismatch (-want +got):\n%s", diff)
			}
			if got.Unwrap() == nil {
				t.Error("Unwrap() = nil, want the cause")
			}
		})
	}
}
