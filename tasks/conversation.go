package tasks

import (
	"context"
	"fmt"
)

// Conversation is what a request made through OpenAI's Responses API
// keeps beside its chat: a response may be continued by a later request
// (previous_response_id), which starts from this task's messages and
// answer, and is answered back with the parameters it was created with.
// None of it reaches a provider.
type Conversation struct {
	// Instructions: the first message holds the request's instructions,
	// which a continuation does not carry over (OpenAI's rule).
	Instructions bool `json:"instructions,omitempty"`
	// Previous is the task this request continues: its messages (and
	// that task's answer) open this request's messages.
	Previous string `json:"previous,omitempty"`
	// Unstored: the client sent store: false, so no later request may
	// continue this one.
	Unstored bool `json:"unstored,omitempty"`
	// Background: the client did not wait for the answer.
	Background bool `json:"background,omitempty"`
}

// Conversation returns the owner's task as Get does, with its request as
// the client sent it (opened from its seal, not redacted): what a request
// continuing the task starts from, and the parameters a response is
// answered back with. It returns ErrNotFound as Get does, and ErrErased
// for a task whose bodies were erased (deleted or past retention).
func (s *Service) Conversation(ctx context.Context, owner, id string) (Task, Request, error) {
	return s.reader.conversation(ctx, owner, id)
}

// conversation carries out Service.Conversation.
func (s *reader) conversation(ctx context.Context, owner, id string) (Task, Request, error) {
	t, err := s.get(ctx, owner, id)
	if err != nil {
		return Task{}, Request{}, err
	}
	if t.BodiesErasedAt != nil {
		return Task{}, Request{}, ErrErased
	}
	raw, err := s.guard.rawRequest(t)
	if err != nil {
		return Task{}, Request{}, fmt.Errorf("tasks: conversation: %w", err)
	}
	return t, raw, nil
}
