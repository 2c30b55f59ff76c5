package tasks

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/redact"
)

// What Create decides from a submission alone, before it reads or writes
// anything: the model of the chain that runs the request, whether the
// reservation is at the default price, the deadline, the key's stored
// form; and the refusals that leave nothing written.
func TestPlanForDecidesBeforeAnythingIsRead(t *testing.T) {
	t.Parallel()
	tools := []provider.Tool{{Type: "function", Function: provider.FunctionDef{Name: "f"}}}
	type decided struct {
		Model     string
		Estimated bool
		Deadline  time.Duration
	}
	cases := []struct {
		name        string
		passThrough bool
		key         string
		chat        provider.Chat
		deadlineS   int
		want        decided
		wantField   string // the field a *ValidationError names; "" for none
	}{
		{"the first model of the chain", false, "k", provider.Chat{Model: "plain", Messages: hello}, 0, decided{"plain", false, time.Hour}, ""},
		{"the first model that can take the request", false, "k", provider.Chat{Model: "plain", Messages: hello, Tools: tools}, 0, decided{"capable", false, time.Hour}, ""},
		{"the request's deadline", false, "k", provider.Chat{Model: "plain", Messages: hello}, 30, decided{"plain", false, 30 * time.Second}, ""},
		{"a pass-through name at the default price", true, "k", provider.Chat{Model: "unlisted", Messages: hello}, 0, decided{"unlisted", true, time.Hour}, ""},
		{"a pass-through name carrying personal data", true, "k", provider.Chat{Model: "ann@example.com", Messages: hello}, 0, decided{}, "model"},
		{"an unknown model", false, "k", provider.Chat{Model: "nonesuch", Messages: hello}, 0, decided{}, "model"},
		{"no key", false, "", provider.Chat{Model: "plain", Messages: hello}, 0, decided{}, "Idempotency-Key"},
		{"no message", false, "k", provider.Chat{Model: "plain"}, 0, decided{}, "messages"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := planService(t, c.passThrough)
			p, err := s.intake.planFor(Submission{OwnerID: "acme", IdempotencyKey: c.key, Request: Request{Chat: c.chat, DeadlineS: c.deadlineS}})
			if c.wantField != "" {
				checkField(t, err, c.wantField)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := decided{Model: p.model.Name, Estimated: p.estimated, Deadline: p.deadline}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if p.key != s.StoredKey(c.key) {
				t.Errorf("key %q; want %q", p.key, s.StoredKey(c.key))
			}
			if p.amount <= 0 {
				t.Errorf("reservation %d, want one above zero", p.amount)
			}
		})
	}
}

// planService is fitService with what planFor needs besides: the
// redaction of stored keys and names, and the default deadline.
func planService(t *testing.T, passThrough bool) *Service {
	t.Helper()
	s := fitService(t)
	r, err := redact.New()
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Redactor, s.guard.digestKey, s.cfg.DefaultDeadline = r, []byte("digest key of the test"), time.Hour
	s.cfg.Catalog.PassThrough = passThrough
	return s
}

// checkField fails t unless err is a *ValidationError naming field.
func checkField(t *testing.T, err error, field string) {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("err = %v, want a *ValidationError on %s", err, field)
	}
	for _, f := range ve.Fields {
		if f.Field == field {
			return
		}
	}
	t.Errorf("err = %v, want one on %s", err, field)
}
