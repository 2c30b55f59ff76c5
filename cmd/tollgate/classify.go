package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tollgate/tollgate/provider"
)

const classifyUsage = `usage: tollgate classify --provider openai|anthropic|cloudflare --status N [--header 'Name: value']... < body
  Classifies a provider's error response, whose raw body is read on stdin, as
  Tollgate's client for that provider would, and prints one JSON line:
  {"class":"...","code":"...","retryable":bool,"retry_after_s":N|null}
`

// maxClassifyBody bounds what is read from stdin; the provider clients read
// no more of a response either.
const maxClassifyBody = 4 << 20

// headerFlags collects repeated --header 'Name: value' flags.
type headerFlags http.Header

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	http.Header(h).Add(name, strings.TrimSpace(value))
	return nil
}

// classification is the one line classify prints.
type classification struct {
	Class       provider.Class `json:"class"`
	Code        string         `json:"code"`
	Retryable   bool           `json:"retryable"`
	RetryAfterS *float64       `json:"retry_after_s"` // seconds, null when the provider named no wait
}

// classifyCmd runs `tollgate classify`. It returns an error, and prints
// nothing, for bad flags, an unknown provider or an unreadable stdin; -h
// prints the usage to stdout.
func classifyCmd(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("classify", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, usage printed below
	kind := fs.String("provider", "", "wire format: "+strings.Join(provider.Kinds(), ", "))
	status := fs.Int("status", 0, "HTTP status of the response")
	header := headerFlags{}
	fs.Var(header, "header", "response header 'Name: value' (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, err = io.WriteString(stdout, classifyUsage)
			return err
		}
		return fmt.Errorf("classify: %w\n%s", err, classifyUsage)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("classify: unexpected argument %q (the body is read on stdin)\n%s", fs.Arg(0), classifyUsage)
	case *kind == "":
		return fmt.Errorf("classify: --provider is required\n%s", classifyUsage)
	case *status < 100 || *status > 599:
		return fmt.Errorf("classify: --status must be an HTTP status (100-599)\n%s", classifyUsage)
	}

	body, err := io.ReadAll(io.LimitReader(stdin, maxClassifyBody))
	if err != nil {
		return fmt.Errorf("classify: read stdin: %w", err)
	}
	e, err := provider.Classify(*kind, *status, http.Header(header), body)
	if err != nil {
		return fmt.Errorf("classify: %w", err)
	}
	out := classification{Class: e.Class, Code: e.Code, Retryable: e.Retryable()}
	if e.RetryAfter > 0 {
		s := e.RetryAfter.Seconds()
		out.RetryAfterS = &s
	}
	// One line, the provider's message left out: it can quote prompts.
	return json.NewEncoder(stdout).Encode(out)
}
