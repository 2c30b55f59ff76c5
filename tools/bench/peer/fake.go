package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// upstream drives the fake provider's control API, so that each run can
// check how many calls actually reached the model.
type upstream struct {
	base   string // the fake's root URL, without /v1
	client *http.Client
}

// reset empties the fake's call log. It fails when the fake does not
// answer 204.
func (u upstream) reset(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.base+"/_fake/reset", strings.NewReader(""))
	if err != nil {
		return err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return fmt.Errorf("reset the fake: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("reset the fake: status %d", resp.StatusCode)
	}
	return nil
}

// calls returns how many model calls the fake received since its last
// reset.
func (u upstream) calls(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.base+"/_fake/calls", nil)
	if err != nil {
		return 0, err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("count the fake's calls: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Count int `json:"count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("count the fake's calls: %w", err)
	}
	return out.Count, nil
}
