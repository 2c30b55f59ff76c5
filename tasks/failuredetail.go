package tasks

import (
	"context"
	"fmt"
	"time"
)

// FailureDetail is what a surface that speaks another API's errors (the
// OpenAI-compatible endpoint) needs beyond a task's public Failure.
type FailureDetail struct {
	// ProviderCode is the classified code of the task's last failed
	// attempt ("" when none): a word-shaped code (provider.token), never
	// the provider's text.
	ProviderCode string
	// Wait is how long the provider key the task is on stays paused by a
	// rate limit: what the provider asked, less the time already waited.
	Wait time.Duration
	// AttemptsLeft is set when the task ended before spending its attempt
	// bound (a stream makes one attempt): a client's retry then stands in
	// for the retries Tollgate did not make.
	AttemptsLeft bool
}

// FailureDetail reads the owner's task's last provider code and the pause
// left on its provider key (the last attempt's key, else its model's).
func (s *Service) FailureDetail(ctx context.Context, owner, id string) (FailureDetail, error) {
	t, err := s.read(ctx, answerColumns, owner, id)
	if err != nil {
		return FailureDetail{}, err
	}
	modelKey := ""
	if m, _, err := s.cfg.Catalog.Resolve(t.Model); err == nil {
		modelKey = m.Provider
	}
	d := FailureDetail{AttemptsLeft: t.Attempts < s.maxAttemptsOf(t)}
	var code *string
	err = s.pool.QueryRow(ctx, `
		WITH last AS (
			SELECT error_code, provider_key FROM task_attempts WHERE task_id = $1 ORDER BY attempt DESC LIMIT 1)
		SELECT (SELECT error_code FROM last),
		       COALESCE((SELECT GREATEST(paused_until - now(), interval '0') FROM provider_keys
		                  WHERE key = COALESCE((SELECT provider_key FROM last), $2) AND state = 'paused'), interval '0')`,
		t.ID, modelKey).Scan(&code, &d.Wait)
	if err != nil {
		return FailureDetail{}, fmt.Errorf("tasks: failure detail: %w", err)
	}
	if code != nil {
		d.ProviderCode = *code
	}
	return d, nil
}
