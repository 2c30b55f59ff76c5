package provider

import "encoding/json"

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
}

// NativeEvent is one Server-Sent Event of a natively carried stream, as
// the provider sent it.
type NativeEvent struct {
	Event string `json:"event,omitempty"`
	Data  []byte `json:"data"`
}
