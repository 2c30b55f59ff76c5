package provider

import (
	"bytes"
	"encoding/json"
)

// Native carry: a request made in a provider API's own dialect (Anthropic
// Messages from an Anthropic client, OpenAI Responses from a Responses
// client) goes to a provider that speaks that API as the client sent it,
// so that fields Tollgate does not model (new betas, hosted tools,
// encrypted reasoning) reach it unchanged; only "model" (the provider's
// name for it) and "stream" (how the adapter reads the answer) are set by
// Tollgate. The neutral Chat decoded from the same bytes still drives the
// hash, the reservation, the plausibility bound and the replay record. A
// provider of another API gets the neutral Chat, and a request whose
// Native holds what the Chat cannot say is refused at admission naming
// the fields (Native.Unmodeled).

// API names a provider wire API a request can be carried in natively.
type API string

const (
	// APIAnthropicMessages is Anthropic's POST /v1/messages.
	APIAnthropicMessages API = "anthropic.messages"
	// APIOpenAIResponses is OpenAI's POST /v1/responses.
	APIOpenAIResponses API = "openai.responses"
)

// Native is a client's request body in API, carried as sent to a
// provider that speaks API.
type Native struct {
	API  API             `json:"api"`
	Body json.RawMessage `json:"body"`
	// Unmodeled lists, as JSON paths, what Body holds that the neutral
	// Chat does not carry: a provider of another API cannot be given the
	// request, and admission refuses it naming these.
	Unmodeled []string `json:"unmodeled,omitempty"`
	// Header holds the client's API headers the provider must see
	// (anthropic-beta, anthropic-version; OpenAI-Beta), by canonical name.
	Header map[string][]string `json:"header,omitempty"`
}

// NativeAnswer is a provider's answer in the API its request was carried
// in: the body of a whole answer, or the events of a stream, as the
// provider sent them, so that the client gets them unchanged.
type NativeAnswer struct {
	API  API             `json:"api"`
	Body json.RawMessage `json:"body,omitempty"`
	// Events are a stream's events, in order, when the answer was
	// streamed (Body is then empty).
	Events []NativeEvent `json:"events,omitempty"`
}

// NativeEvent is one Server-Sent Event of a natively carried stream, as
// the provider sent it.
type NativeEvent struct {
	Event string `json:"event,omitempty"`
	Data  []byte `json:"data"`
}

// Carrier is a Client that can send a request natively in some APIs:
// Carries reports whether it sends a Request whose Chat.Native is in api
// as the client wrote it.
type Carrier interface {
	Carries(api API) bool
}

// CarriedBy reports whether c sends requests natively in api.
func CarriedBy(c Client, api API) bool {
	carrier, ok := c.(Carrier)
	return ok && carrier.Carries(api)
}

// MarshalJSON writes Body as a JSON string, as Native's does, so that a
// stored answer replays as the bytes the provider sent.
func (a NativeAnswer) MarshalJSON() ([]byte, error) {
	type plain NativeAnswer
	return json.Marshal(struct {
		plain
		Body string `json:"body,omitempty"`
	}{plain(a), string(a.Body)})
}

// UnmarshalJSON reads Body as MarshalJSON writes it, or as a JSON value.
func (a *NativeAnswer) UnmarshalJSON(b []byte) error {
	type plain NativeAnswer
	var in struct {
		plain
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*a = NativeAnswer(in.plain)
	body, err := bodyOf(in.Body)
	a.Body = body
	return err
}

// bodyOf is a body as MarshalJSON wrote it (a string holding the JSON)
// or as a JSON value; nil for none.
func bodyOf(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '"' {
		return append(json.RawMessage(nil), raw...), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if s == "" {
		return nil, nil
	}
	return json.RawMessage(s), nil
}

// MarshalJSON writes Data as a JSON string rather than base64: an event's
// data is text, and is stored as such.
func (e NativeEvent) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Event string `json:"event,omitempty"`
		Data  string `json:"data"`
	}{e.Event, string(e.Data)})
}

// UnmarshalJSON reads an event as MarshalJSON writes it.
func (e *NativeEvent) UnmarshalJSON(b []byte) error {
	var in struct {
		Event string `json:"event"`
		Data  string `json:"data"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*e = NativeEvent{Event: in.Event, Data: []byte(in.Data)}
	return nil
}
