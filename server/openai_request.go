package server

import (
	"encoding/json"
	"maps"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// How an OpenAI chat completions request becomes a task request: every
// field OpenAI defines for the call decodes into provider.Chat under its
// own name; the fields Tollgate does not model (service_tier,
// prompt_cache_key, prediction, ...) are kept as they came and passed on
// to OpenAI-kind providers (Chat.Extra), refused by name for the others.
// Nothing a client sends is dropped.

// oaiStreamOptions are the endpoint's own stream options: Tollgate writes
// the stream, so they shape its answer, not the provider call.
type oaiStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
	// IncludeObfuscation asks OpenAI to pad its chunks against side
	// channels; Tollgate's chunks carry no padding, so it changes nothing.
	IncludeObfuscation *bool `json:"include_obfuscation,omitempty"`
}

// oaiRequest is the body of POST /v1/chat/completions.
type oaiRequest struct {
	provider.Chat
	// Passthrough shadows Chat's own "passthrough" (the native API's
	// name for Extra): it is no OpenAI field, so here it is passed on
	// like any other field Tollgate does not know.
	Passthrough   json.RawMessage   `json:"passthrough"`
	Stream        bool              `json:"stream"`
	StreamOptions *oaiStreamOptions `json:"stream_options"`
	// Metadata is OpenAI's: strings, kept as the task's metadata, and
	// sent on with store (see task).
	Metadata map[string]string `json:"metadata"`

	extra map[string]json.RawMessage // the unknown top-level fields
}

func (r *oaiRequest) setPassthrough(extra map[string]json.RawMessage) { r.extra = extra }

func (r oaiRequest) task() (tasks.Request, error) {
	out := tasks.Request{Chat: r.Chat}
	if r.Metadata != nil {
		out.Metadata = make(map[string]any, len(r.Metadata))
		for k, v := range r.Metadata {
			out.Metadata[k] = v
		}
	}
	out.Extra = nil
	if len(r.extra) > 0 || r.Passthrough != nil {
		out.Extra = maps.Clone(r.extra)
		if out.Extra == nil {
			out.Extra = map[string]json.RawMessage{}
		}
		if r.Passthrough != nil {
			out.Extra["passthrough"] = r.Passthrough
		}
		if _, stored := r.extra["store"]; stored && r.Metadata != nil {
			// With store, metadata tags the completion OpenAI keeps, so
			// it goes to the provider as well as on the task. Without
			// it OpenAI acts on no metadata (it refuses one): it is the
			// task's alone.
			raw, err := json.Marshal(r.Metadata)
			if err != nil {
				return out, err
			}
			out.Extra["metadata"] = raw
		}
	}
	if r.Stream && r.N > 1 {
		// A stream carries one choice: its chunks are relayed as the
		// provider sends them, and the task's record keeps one answer.
		return out, badRequest("A streamed completion carries one choice; send n above 1 without stream.",
			tasks.FieldError{Field: "n", Message: "must be 1 with stream: true"})
	}
	return out.Canonical(), nil
}
