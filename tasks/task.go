package tasks

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/provider"
)

// Status is where a task is in its life. Exactly one at a time.
type Status string

// The statuses. Succeeded, failed and canceled are final.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCanceled  Status = "canceled"
)

// Final reports whether no further change can happen.
func (s Status) Final() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCanceled
}

// Errors returned by this package.
var (
	ErrNotFound = errors.New("tasks: not found")
	// ErrIdempotencyKeyReused: the key names an earlier task whose request
	// differs. Nothing was changed.
	ErrIdempotencyKeyReused = errors.New("tasks: idempotency key reused with a different request")
	// ErrInvalidCursor: a list cursor that this service did not issue.
	ErrInvalidCursor = errors.New("tasks: invalid cursor")
)

// FieldError names one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every problem found in a request, so a client can
// fix them all at once.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "tasks: invalid request: " + strings.Join(parts, "; ")
}

// Limits bound what a request may ask for.
const (
	MaxMessages    = 1000
	MaxModelLength = 200
	MaxMaxTokens   = 1_000_000
	MaxKeyLength   = 255
)

// Request is what a client asks for, as submitted. It is stored as is and
// hashed in canonical form to recognise retries.
type Request struct {
	Model     string             `json:"model,omitempty"`
	Messages  []provider.Message `json:"messages"`
	MaxTokens int                `json:"max_tokens,omitempty"`
	Metadata  map[string]any     `json:"metadata,omitempty"`
}

// Validate returns a *ValidationError listing every problem, or nil.
func (r Request) Validate() error {
	var fe []FieldError
	if len(r.Model) > MaxModelLength {
		fe = append(fe, FieldError{"model", fmt.Sprintf("must be at most %d characters", MaxModelLength)})
	}
	if len(r.Messages) == 0 {
		fe = append(fe, FieldError{"messages", "must hold at least one message"})
	}
	if len(r.Messages) > MaxMessages {
		fe = append(fe, FieldError{"messages", fmt.Sprintf("must hold at most %d messages", MaxMessages)})
	}
	for i, m := range r.Messages {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			fe = append(fe, FieldError{fmt.Sprintf("messages[%d].role", i), "must be system, user or assistant"})
		}
		if m.Content == "" {
			fe = append(fe, FieldError{fmt.Sprintf("messages[%d].content", i), "must not be empty"})
		}
	}
	if r.MaxTokens < 0 || r.MaxTokens > MaxMaxTokens {
		fe = append(fe, FieldError{"max_tokens", fmt.Sprintf("must be between 1 and %d", MaxMaxTokens)})
	}
	if fe != nil {
		return &ValidationError{Fields: fe}
	}
	return nil
}

// ValidIdempotencyKey reports whether key is 1–255 printable ASCII
// characters.
func ValidIdempotencyKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyLength {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// Hash returns the SHA-256 of the request's canonical JSON. encoding/json
// writes struct fields in declaration order and map keys sorted, so equal
// requests hash equally whatever order their JSON keys arrived in.
func (r Request) Hash() []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		// A decoded request always re-encodes; failing here is a bug.
		panic(fmt.Sprintf("tasks: encode request: %v", err))
	}
	sum := sha256.Sum256(buf.Bytes())
	return sum[:]
}

// Usage is a task's token usage and where the figures came from.
type Usage struct {
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	Source       budget.Source `json:"source"`
}

// Result is a succeeded task's output.
type Result struct {
	Output       string `json:"output"`
	Model        string `json:"model"`
	FinishReason string `json:"finish_reason,omitempty"`
	Usage        Usage  `json:"usage"`
	CostMicros   int64  `json:"cost_micros"`
}

// Failure is why a task failed, in stable terms a client can act on. It
// never carries a provider's own message.
type Failure struct {
	Code      string `json:"code"`
	Class     string `json:"class"`
	Retryable bool   `json:"retryable"`
	Message   string `json:"message"`
}

// Task is one model task as clients see it.
type Task struct {
	ID             string         `json:"id"`
	OwnerID        string         `json:"-"`
	Status         Status         `json:"status"`
	IdempotencyKey string         `json:"idempotency_key"`
	Model          string         `json:"model"`
	Attempts       int            `json:"attempts"`
	ReservedMicros int64          `json:"reserved_micros"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
	FinishedAt     *time.Time     `json:"finished_at"`
	Result         *Result        `json:"result"`
	Error          *Failure       `json:"error"`
	Metadata       map[string]any `json:"metadata"`
	Request        Request        `json:"-"`
}

// failureFor turns a classified provider error into a task failure. Codes
// and messages are Tollgate's own, one per class.
func failureFor(pe *provider.Error, exhaustedAttempts bool) Failure {
	f := Failure{Class: string(pe.Class), Retryable: pe.Retryable()}
	switch pe.Class {
	case provider.ClassRejected:
		f.Code, f.Message = "provider_rejected", "The model provider rejected the request; repeating it unchanged will fail again."
	case provider.ClassExhausted:
		f.Code, f.Message = "provider_exhausted", "The provider account's credit or quota is exhausted."
	case provider.ClassThrottled:
		f.Code, f.Message = "provider_throttled", "The provider kept rate-limiting the request until the attempt limit."
	case provider.ClassAmbiguous:
		f.Code, f.Message = "provider_ambiguous", "The provider may have processed the request but no answer arrived."
	default:
		f.Code, f.Message = "provider_unavailable", "The provider failed with a temporary error."
	}
	if pe.Code == "malformed_response" || pe.Code == "empty_output" {
		f.Code, f.Message = "invalid_output", "The provider's answer was empty or malformed."
	}
	if exhaustedAttempts {
		f.Message += " The attempt limit was reached."
	}
	return f
}
