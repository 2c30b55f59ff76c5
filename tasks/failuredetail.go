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
	// ProviderParam is the request field the last attempt's rejection
	// named ("" when none): a path of OpenAI request field names
	// (provider.Error.Param), never the provider's text.
	ProviderParam string
	// Wait is how long before a retry can pass: the longer of the pause
	// left on the task's provider key and what the provider asked at the
	// last attempt (which the key's pause caps), less the time already
	// waited.
	Wait time.Duration
	// ContextWindow and ContextTokens are the figures of the last
	// attempt's context-length refusal (provider.Error.ContextWindow,
	// ContextTokens): integers read from the provider's message, 0 when
	// it gave none.
	ContextWindow, ContextTokens int
	// Attempts is how many provider calls the task made, MaxAttempts its
	// bound. A task that ended with attempts unspent (a stream makes
	// one) leaves the rest to the client's retries.
	Attempts, MaxAttempts int
}

// FailureDetail reads the owner's task's last provider code and param, its
// attempts, and the wait left (on its provider key: the last attempt's,
// else its model's). It returns ErrNotFound for another owner's task.
func (s *Service) FailureDetail(ctx context.Context, owner, id string) (FailureDetail, error) {
	return s.reader.failureDetail(ctx, owner, id)
}

// failureDetail carries out Service.FailureDetail.
func (s *reader) failureDetail(ctx context.Context, owner, id string) (FailureDetail, error) {
	t, err := s.read(ctx, clientViewColumns, owner, id)
	if err != nil {
		return FailureDetail{}, err
	}
	modelKey := ""
	if m, _, err := s.cfg.Catalog.Resolve(t.Model); err == nil {
		modelKey = m.Provider
	}
	d := FailureDetail{Attempts: t.Attempts, MaxAttempts: s.cfg.maxAttemptsOf(t)}
	var code, param *string
	var window, tokens *int
	err = s.pool.QueryRow(ctx, `
		WITH last AS (
			SELECT error_code, error_param, error_retry_at, provider_key, context_window, context_tokens FROM task_attempts
			WHERE task_id = $1 ORDER BY attempt DESC LIMIT 1)
		SELECT (SELECT error_code FROM last), (SELECT error_param FROM last),
		       (SELECT context_window FROM last), (SELECT context_tokens FROM last),
		       GREATEST((SELECT paused_until - now() FROM provider_keys
		                  WHERE key = COALESCE((SELECT provider_key FROM last), $2) AND state = 'paused'),
		                (SELECT error_retry_at - now() FROM last), interval '0')`,
		t.ID, modelKey).Scan(&code, &param, &window, &tokens, &d.Wait)
	if err != nil {
		return FailureDetail{}, fmt.Errorf("tasks: failure detail: %w", err)
	}
	if code != nil {
		d.ProviderCode = *code
	}
	if param != nil {
		d.ProviderParam = *param
	}
	if window != nil {
		d.ContextWindow = *window
	}
	if tokens != nil {
		d.ContextTokens = *tokens
	}
	return d, nil
}
