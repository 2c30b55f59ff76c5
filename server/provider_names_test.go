package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/redact"
)

// The answer's model, finish reason and system fingerprint are the
// provider's to choose: they are stored and shown as they came only when
// they are plain identifiers; anything else follows the owner's policy as
// client text does, in the task's row, in the replay record and in the
// answer the SDK reads back.
func TestProviderNamesAreKeptOnlyAsPlainIdentifiers(t *testing.T) {
	t.Parallel()
	const sentence = "Internal note: the merger closes Friday, tell nobody"
	cases := []struct {
		name           string
		policy         redact.Policy
		model, finish  string
		fingerprint    string
		secrets        []string // in no row, record or answer
		kept           []string // in the replay record as sent
		wantInRecord   string   // a placeholder the record holds instead
		anthropicModel bool
	}{
		{name: "plain identifiers are kept", policy: redact.PolicyHashOnly,
			model: "gpt-4o-2024-08-06", finish: "length", fingerprint: "fp_44709d6fcb",
			kept: []string{`"model":"gpt-4o-2024-08-06"`, `"finish_reason":"length"`, `"system_fingerprint":"fp_44709d6fcb"`}},
		{name: "an address is redacted", policy: redact.PolicyRedact,
			model: "reply to jane.canary@example.com", finish: "bob.canary@example.org", fingerprint: "fp_ok",
			secrets: []string{"jane.canary@example.com", "bob.canary@example.org"}, wantInRecord: "[EMAIL_", kept: []string{`"system_fingerprint":"fp_ok"`}},
		{name: "a code-shaped key is redacted", policy: redact.PolicyRedact,
			model: "gpt-4o", finish: "sk-proj-CANARYfinish0123456789abcdefghij", fingerprint: "sk-proj-CANARYprint0123456789abcdefghij",
			secrets: []string{"CANARYfinish", "CANARYprint"}, wantInRecord: "[SECRET_", kept: []string{`"model":"gpt-4o"`}},
		{name: "a sentence under hash-only is a digest", policy: redact.PolicyHashOnly,
			model: sentence, finish: sentence, fingerprint: sentence,
			secrets: []string{"merger", "nobody"}, wantInRecord: "[DIGEST:"},
		{name: "an address from Anthropic is redacted", policy: redact.PolicyRedact, anthropicModel: true,
			model: "claude-canary@example.com", finish: "stop because eve.canary@example.net said so",
			secrets: []string{"claude-canary@example.com", "eve.canary@example.net"}, wantInRecord: "[EMAIL_"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, envOptions{catalog: messagesCatalog})
			key := e.owner("acme", accounts.RoleClient, 1_000_000)
			admin := e.owner("ops", accounts.RoleAdmin, 0)
			if r := e.do(http.MethodPut, "/v1/owners/acme/privacy", admin, []byte(`{"redaction_policy":"`+string(c.policy)+`","body_retention_days":30,"metadata_retention_days":400}`), nil); r.status != http.StatusOK {
				t.Fatalf("set policy: %d %s", r.status, r.body)
			}
			e.fake.Script(fake.Scripted{Model: c.model, FinishReason: c.finish, SystemFingerprint: c.fingerprint, Content: "done"})
			var shown []string
			if c.anthropicModel {
				client, _, _ := antSDK(e, key)
				msg, err := client.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "claude-model", MaxTokens: 64,
					Messages: []anthropic.MessageParam{antUserText("hello")}})
				if err != nil {
					t.Fatal(err)
				}
				shown = []string{msg.RawJSON()}
			} else {
				client, _ := sdk(e, key)
				params := chatParams("hello")
				params.Model = "gpt-model"
				got, err := client.Chat.Completions.New(context.Background(), params)
				if err != nil {
					t.Fatal(err)
				}
				shown = []string{got.RawJSON(), string(got.Choices[0].FinishReason)}
			}
			var id, row, stored string
			if err := e.pool.QueryRow(t.Context(), `SELECT t.id::text, t.result::text, r.response::text FROM tasks t JOIN replay_records r ON r.task_id = t.id`).Scan(&id, &row, &stored); err != nil {
				t.Fatal(err)
			}
			record := stored
			if !c.anthropicModel { // a Messages task's record carries anthropic_version, which the contract's ReplayRecord lacks: read its row
				record = string(e.do(http.MethodGet, "/v1/tasks/"+id+"/replay", key, nil, nil).body)
			}
			places := map[string]string{"the task's row": row, "the stored replay response": stored, "the replay record": record, "the answer shown": strings.Join(shown, " ")}
			for place, text := range places {
				for _, s := range c.secrets {
					if strings.Contains(text, s) {
						t.Errorf("%s holds %q: %s", place, s, text)
					}
				}
			}
			compact := strings.ReplaceAll(record, " ", "")
			for _, k := range c.kept {
				if !strings.Contains(compact, k) {
					t.Errorf("the replay record lacks %s: %s", k, record)
				}
			}
			if c.wantInRecord != "" && !strings.Contains(record, c.wantInRecord) {
				t.Errorf("the replay record lacks %s where the provider's text was: %s", c.wantInRecord, record)
			}
			e.checkInvariants()
		})
	}
}
