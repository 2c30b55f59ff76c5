package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClassifyCmd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		body string
		want string
	}{
		{
			name: "openai rate limit with a wait in the message",
			args: []string{"--provider", "openai", "--status", "429"},
			body: `{"error":{"message":"Rate limit reached for gpt-4.1 on tokens per min (TPM). Please try again in 174ms.","type":"tokens","code":"rate_limit_exceeded"}}`,
			want: `{"class":"throttled","code":"rate_limit_exceeded","retryable":true,"retry_after_s":0.174}`,
		},
		{
			name: "anthropic rate limit, repeated headers, the header decides the wait",
			args: []string{"--provider=anthropic", "--status=429", "--header", "retry-after: 2", "--header", "Date:Wed, 21 Oct 2015 07:28:00 GMT"},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`,
			want: `{"class":"throttled","code":"rate_limit_exceeded","retryable":true,"retry_after_s":2}`,
		},
		{
			name: "anthropic credit balance behind 400",
			args: []string{"-provider", "anthropic", "-status", "400"},
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}`,
			want: `{"class":"exhausted","code":"insufficient_quota","retryable":false,"retry_after_s":null}`,
		},
		{
			name: "cloudflare capacity behind 429",
			args: []string{"--provider", "cloudflare", "--status", "429"},
			body: `{"success":false,"errors":[{"code":3040,"message":"Capacity temporarily exceeded, please try again."}]}`,
			want: `{"class":"transient","code":"overloaded","retryable":true,"retry_after_s":null}`,
		},
		{
			name: "cloudflare model on another plan",
			args: []string{"--provider", "cloudflare", "--status", "403"},
			body: `{"result":{},"success":false,"errors":[{"code":5035,"message":"AiError: Model @cf/x is not available on the Workers Free plan"}],"messages":[]}`,
			want: `{"class":"rejected","code":"forbidden","retryable":false,"retry_after_s":null}`,
		},
		{
			name: "empty body, status decides",
			args: []string{"--provider", "openai", "--status", "503"},
			want: `{"class":"transient","code":"service_unavailable","retryable":true,"retry_after_s":null}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if err := classifyCmd(tt.args, strings.NewReader(tt.body), &out); err != nil {
				t.Fatalf("classifyCmd(%q): %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want+"\n", out.String()); diff != "" {
				t.Errorf("classifyCmd(%q) output mismatch (-want +got):\n%s", tt.args, diff)
			}
			if strings.Contains(out.String(), "credit balance") || strings.Contains(out.String(), "Capacity") {
				t.Errorf("output %s contains the provider's message", out.String())
			}
		})
	}
}

func TestClassifyCmdErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no provider", []string{"--status", "429"}, "--provider is required"},
		{"unknown provider", []string{"--provider", "gemini", "--status", "429"}, `unknown kind "gemini"`},
		{"no status", []string{"--provider", "openai"}, "--status must be"},
		{"status out of range", []string{"--provider", "openai", "--status", "1000"}, "--status must be"},
		{"status not a number", []string{"--provider", "openai", "--status", "many"}, "invalid value"},
		{"header without a colon", []string{"--provider", "openai", "--status", "429", "--header", "Retry-After 2"}, "want 'Name: value'"},
		{"header without a name", []string{"--provider", "openai", "--status", "429", "--header", ": 2"}, "want 'Name: value'"},
		{"unknown flag", []string{"--provider", "openai", "--status", "429", "--body", "x"}, "flag provided but not defined"},
		{"positional argument", []string{"--provider", "openai", "--status", "429", "body.json"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := classifyCmd(tt.args, strings.NewReader(`{}`), &out)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("classifyCmd(%q) = %v, want an error containing %q", tt.args, err, tt.wantErr)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing on error", out.String())
			}
		})
	}
}

func TestClassifyCmdHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := classifyCmd([]string{"-h"}, strings.NewReader(""), &out); err != nil {
		t.Fatalf("classifyCmd(-h): %v", err)
	}
	if !strings.HasPrefix(out.String(), "usage: tollgate classify") {
		t.Errorf("help = %q, want the usage", out.String())
	}
}
