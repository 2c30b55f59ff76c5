package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestRunArguments(t *testing.T) {
	t.Parallel()
	getenv := func(string) string { return "" }
	tests := []struct {
		name    string
		args    []string
		want    string // stdout
		wantErr string // substring of the error; "" for none
	}{
		{"print workers", []string{"-print-workers", "-rates", "20,200", "-provider-latency", "0ms,1s"}, "600\n", ""},
		{"bad rate", []string{"-rates", "20,fast"}, "", `-rates: "fast" is not valid`},
		{"empty latencies", []string{"-provider-latency", ","}, "", "-provider-latency: empty list"},
		{"no key", []string{"-url", "http://127.0.0.1:1"}, "", "the API URL and key are required"},
		{"latency without the proxy", []string{"-key", "k", "-provider-latency", "1s"}, "", "needs the latency proxy"},
		{"stray argument", []string{"now"}, "", "unexpected arguments"},
		{"unknown scenario", []string{"-scenarios", "throughput,soak"}, "", `unknown scenario "soak"`},
		{"bad duplicates clients", []string{"-dup-clients", "64,many"}, "", `-dup-clients: "many" is not valid`},
		{"bad agent rate", []string{"-agent-rates", "10,lots"}, "", `-agent-rates: "lots" is not valid`},
		{"agent latency without the proxy", []string{"-key", "k", "-scenarios", "agent", "-agent-latency", "1s"}, "", "needs the latency proxy"},
		{"in flight without the proxy", []string{"-key", "k", "-scenarios", "inflight"}, "", "needs the latency proxy"},
		{"no duplicates clients", []string{"-key", "k", "-scenarios", "duplicates", "-dup-clients", "0"}, "", "clients 0 must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append(tt.args, "-out", ""), getenv, &stdout, &stderr)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("run(%q) = %v, want no error", tt.args, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("run(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
			if got := stdout.String(); got != tt.want {
				t.Errorf("run(%q) printed %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}
