package fake

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"
)

// maxRequestBytes bounds what the fake reads from one request.
const maxRequestBytes = 8 << 20

// Scripted is one canned answer to a model call. With a Body, or with an
// error Status (not 2xx) and none of the shaping fields below set, it is
// served as is on whichever endpoint takes it from the queue. Otherwise
// the endpoint answers in its own format with its deterministic answer,
// which the shaping fields (and, for a streaming call, StreamCutAfter and
// ChunkDelayMS) adjust; Status, Headers, DelayMS and Hang still apply. So
// {"delay_ms": 3000} alone is a valid answer that comes 3 s late.
type Scripted struct {
	Status  int               `json:"status"` // 0 means 200
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`     // sent as is; Content-Type defaults to application/json
	DelayMS int               `json:"delay_ms"` // wait before answering; the call is dropped if the client leaves first
	// Hang, after the request body has been read, blocks until the client
	// goes away or Close is called (then the connection is cut without an
	// answer): a call the provider received but never answered.
	Hang bool `json:"hang"`
	// StreamCutAfter, for a streaming call, streams the answer and cuts
	// the connection after this many content chunks (text, refusal or
	// tool-argument fragments): an upstream stream that dies mid-way.
	// Ignored for non-streaming calls.
	StreamCutAfter int `json:"stream_cut_after,omitempty"`
	// ChunkDelayMS, for a streaming call, waits this long before each
	// content chunk: a slow stream.
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`

	// Tool makes the answer a call of this tool, even after a tool result
	// or when the request has no such tool (its arguments are then {}).
	Tool string `json:"tool,omitempty"`
	// ToolCalls makes the answer this many parallel tool calls: to Tool
	// when set, else call i goes to the request's tool i modulo their
	// number. A request that disables parallel tool calls gets one.
	ToolCalls int `json:"tool_calls,omitempty"`
	// Text makes the answer text even when the request has tools.
	Text bool `json:"text,omitempty"`
	// Content replaces the answer's text (or structured output).
	Content string `json:"content,omitempty"`
	// Refusal makes the answer a refusal with this text.
	Refusal string `json:"refusal,omitempty"`
	// FinishReason replaces the finish reason, in OpenAI's terms (stop,
	// length, tool_calls, content_filter); Anthropic's stop_reason is
	// translated from it.
	FinishReason string `json:"finish_reason,omitempty"`
	// CachedTokens, CacheWriteTokens and ReasoningTokens add usage of
	// these classes on top of the computed counts, as the package
	// documentation describes per format.
	CachedTokens     int `json:"cached_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
	// Logprobs adds logprobs to every choice even when the request did
	// not ask for them (OpenAI format only).
	Logprobs bool `json:"logprobs,omitempty"`
	// Model replaces the model the answer names (the request's model
	// otherwise), on the OpenAI and Anthropic endpoints: an upstream that
	// answers as another model, or puts text where a name belongs.
	Model string `json:"model,omitempty"`
	// SystemFingerprint is reported as system_fingerprint (OpenAI format).
	SystemFingerprint string `json:"system_fingerprint,omitempty"`
	// Thinking starts the answer with a thinking block of this text, with
	// or without thinking asked for, signed as the fake signs its own
	// unless Signature is set (Anthropic format only).
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// RedactedThinking adds a redacted_thinking block of this data after
	// the thinking (Anthropic format only).
	RedactedThinking string `json:"redacted_thinking,omitempty"`
	// StopSequence ends the answer on this stop sequence: stop_reason
	// stop_sequence (Anthropic format; finish_reason stop elsewhere).
	StopSequence string `json:"stop_sequence,omitempty"`
}

// shapes reports whether sc asks for the endpoint's own answer rather
// than its Body: it has no Body, and a success status or a shaping field.
func (sc Scripted) shapes(stream bool) bool {
	if sc.Body != "" || sc.Status != 0 && (sc.Status < 200 || sc.Status > 599) {
		return false // served as is, or refused with a 500 that says why
	}
	if sc.Status < 300 {
		return true // a success without a body is the endpoint's own answer
	}
	return slices.Contains([]bool{ // a field that shapes the answer
		sc.Tool != "", sc.ToolCalls > 0, sc.Text, sc.Content != "", sc.Refusal != "",
		sc.FinishReason != "", sc.Model != "", sc.CachedTokens > 0, sc.CacheWriteTokens > 0, sc.ReasoningTokens > 0,
		sc.Logprobs, sc.SystemFingerprint != "", sc.Thinking != "", sc.Signature != "",
		sc.RedactedThinking != "", sc.StopSequence != "",
		stream && sc.StreamCutAfter > 0, stream && sc.ChunkDelayMS > 0,
	}, true)
}

// Call is one model call the fake received, on any endpoint.
type Call struct {
	ReceivedAt     time.Time `json:"received_at"`
	Model          string    `json:"model"` // from the body, or the path for Workers AI; "" when the body did not parse
	IdempotencyKey string    `json:"idempotency_key"`
	// Body is the request body as received, so that tests can check what
	// the provider was sent field by field; nil when it is not valid JSON
	// or WithoutCallBodies is set.
	Body json.RawMessage `json:"body"`
	// Headers are the format headers received (anthropic-version,
	// anthropic-beta), by lower-case name; nil when none came. Credentials
	// are never recorded.
	Headers map[string]string `json:"headers,omitempty"`
}

// recordedHeaders are the headers a Call keeps.
var recordedHeaders = []string{"anthropic-version", "anthropic-beta"}

// Server is the fake provider, an http.Handler safe for concurrent use.
type Server struct {
	now       func() time.Time
	mux       *http.ServeMux
	closed    chan struct{}
	closeOnce sync.Once

	reasoning map[string]bool // models that refuse max_tokens
	noBodies  bool

	mu    sync.Mutex
	queue []Scripted
	calls []Call
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock used for Call.ReceivedAt and the completion's
// "created"; the default is time.Now.
func WithClock(now func() time.Time) Option {
	return func(s *Server) { s.now = now }
}

// WithReasoningModels marks models as reasoning models: the OpenAI endpoint
// refuses a request to one of them that carries max_tokens, with OpenAI's
// own 400, and every endpoint reports reasoning tokens for them.
func WithReasoningModels(names ...string) Option {
	return func(s *Server) {
		for _, n := range names {
			s.reasoning[n] = true
		}
	}
}

// WithoutCallBodies keeps request bodies out of the call log, for long runs
// (benchmarks) where holding every body would grow the fake without bound.
func WithoutCallBodies() Option {
	return func(s *Server) { s.noBodies = true }
}

// New returns a Server with an empty script and call log.
func New(opts ...Option) *Server {
	s := &Server{now: time.Now, closed: make(chan struct{}), reasoning: map[string]bool{}}
	for _, o := range opts {
		o(s)
	}
	s.mux = s.routes()
	return s
}

// routes lists the whole HTTP surface of the fake.
func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("POST /v1/responses", s.handleResponses)
	mux.HandleFunc("POST /v1/messages", s.handleMessages)
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("POST /client/v4/accounts/{account}/ai/run/{model...}", s.handleWorkersAI)
	mux.HandleFunc("POST /_fake/script", s.handleScript)
	mux.HandleFunc("GET /_fake/calls", s.handleCalls)
	mux.HandleFunc("POST /_fake/reset", s.handleReset)
	return mux
}

// ServeHTTP serves the endpoints listed in the package documentation.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// Script appends responses to the queue, which all endpoints share; each
// model call takes the first one. A status outside 200-599 is answered with a
// 500 that says so.
func (s *Server) Script(rs ...Scripted) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// Calls returns a copy of the call log, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call{}, s.calls...)
}

// CallCount returns the number of model calls received, on all endpoints.
func (s *Server) CallCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

// Reset empties the script queue and the call log. It does not release
// handlers that are hanging or waiting; Close does.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = nil
	s.calls = nil
}

// Close releases every hanging or delayed handler, now and later, by cutting
// its connection, so that httptest.Server.Close does not block. Call it before
// closing the HTTP server. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.closed) })
}

// record logs c and pops the next scripted response, in one step so that the
// log order is the order in which responses were handed out.
func (s *Server) record(c Call) (Scripted, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
	if len(s.queue) == 0 {
		return Scripted{}, false
	}
	next := s.queue[0]
	s.queue[0] = Scripted{}
	s.queue = s.queue[1:]
	return next, true
}

func (s *Server) handleScript(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Responses []Scripted `json:"responses"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&in); err != nil {
		writeError(w, http.StatusBadRequest, "fake: script body is not valid JSON: "+err.Error())
		return
	}
	for _, sc := range in.Responses {
		if sc.Status != 0 && (sc.Status < 200 || sc.Status > 599) {
			writeError(w, http.StatusBadRequest, "fake: status must be 0 or 200-599")
			return
		}
		if sc.DelayMS < 0 || sc.StreamCutAfter < 0 || sc.ChunkDelayMS < 0 || sc.ToolCalls < 0 ||
			sc.CachedTokens < 0 || sc.CacheWriteTokens < 0 || sc.ReasoningTokens < 0 {
			writeError(w, http.StatusBadRequest, "fake: counts and delays must not be negative")
			return
		}
	}
	s.Script(in.Responses...)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleCalls(w http.ResponseWriter, r *http.Request) {
	calls := s.Calls()
	writeJSON(w, http.StatusOK, struct {
		Count int    `json:"count"`
		Calls []Call `json:"calls"`
	}{len(calls), calls})
}

func (s *Server) handleReset(w http.ResponseWriter, r *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in the OpenAI error shape; the control API uses it too.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeOpenAIError(w, status, requestError{msg: msg})
}

// requestError is a request the fake refuses, as OpenAI would: its
// message, and the param and code when OpenAI gives them.
type requestError struct {
	msg, param, code string
}

func (e *requestError) Error() string { return e.msg }

func writeOpenAIError(w http.ResponseWriter, status int, e requestError) {
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: e.msg, Type: "invalid_request_error"}
	if e.param != "" {
		d.Param = &e.param
	}
	if e.code != "" {
		d.Code = &e.code
	}
	writeJSON(w, status, struct {
		Error detail `json:"error"`
	}{d})
}
