package fake

import (
	"net/http"
)

type chunkDelta struct {
	Role      string         `json:"role,omitempty"`
	Content   string         `json:"content,omitempty"`
	Refusal   string         `json:"refusal,omitempty"`
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chunkChoice struct {
	Index        int          `json:"index"`
	Delta        chunkDelta   `json:"delta"`
	Logprobs     *logprobList `json:"logprobs,omitempty"`
	FinishReason *string      `json:"finish_reason"`
}

// streamChat sends rp as chat.completion.chunk events: per choice a role
// chunk, then its text or refusal a word at a time (with that word's
// logprobs when asked for) or its tool calls (a chunk with id and name, then
// the arguments in fragments), and a finish chunk; then the usage chunk
// when stream_options.include_usage is set, and [DONE]. The script may slow
// the content chunks (ChunkDelayMS) or cut the connection after some of them
// (StreamCutAfter).
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, req chatRequest, rp reply) {
	c := completionOf(req.Model, s.now().Unix(), rp)
	sc := rp.sc
	out := startSSE(w, sc)
	chunk := func(choices []chunkChoice, u *usage) map[string]any {
		m := map[string]any{"id": c.ID, "object": "chat.completion.chunk", "created": c.Created, "model": c.Model,
			"choices": choices, "usage": u}
		if c.SystemFingerprint != "" {
			m["system_fingerprint"] = c.SystemFingerprint
		}
		return m
	}
	sent := 0
	// content sends one content chunk, after the scripted cut or delay.
	content := func(ch chunkChoice) bool {
		if sc.StreamCutAfter > 0 && sent == sc.StreamCutAfter {
			panic(http.ErrAbortHandler) // the connection dies mid-stream
		}
		if !s.waitChunk(r, sc) {
			return false
		}
		out.send("", chunk([]chunkChoice{ch}, nil))
		sent++
		return true
	}
	for i := range rp.n {
		out.send("", chunk([]chunkChoice{{Index: i, Delta: chunkDelta{Role: "assistant"}}}, nil))
		text, refusal := rp.content, rp.refusal
		if rp.calls != nil {
			text = ""
		}
		for j, wd := range words(text) {
			ch := chunkChoice{Index: i, Delta: chunkDelta{Content: wd}}
			if rp.logprobs {
				ch.Logprobs = &logprobList{Content: logprobsOf(text, rp.topLogprob)[j : j+1]}
			}
			if !content(ch) {
				return
			}
		}
		for j, wd := range words(refusal) {
			ch := chunkChoice{Index: i, Delta: chunkDelta{Refusal: wd}}
			if rp.logprobs {
				ch.Logprobs = &logprobList{Refusal: logprobsOf(refusal, rp.topLogprob)[j : j+1]}
			}
			if !content(ch) {
				return
			}
		}
		for k, tc := range rp.calls {
			idx := k
			var head chatToolCall
			head.Index, head.ID, head.Type, head.Function.Name = &idx, tc.ID, "function", tc.Name
			out.send("", chunk([]chunkChoice{{Index: i, Delta: chunkDelta{ToolCalls: []chatToolCall{head}}}}, nil))
			for _, frag := range fragments(tc.Arguments, argFragment) {
				var d chatToolCall
				d.Index, d.Function.Arguments = &idx, frag
				if !content(chunkChoice{Index: i, Delta: chunkDelta{ToolCalls: []chatToolCall{d}}}) {
					return
				}
			}
		}
		finish := rp.finish
		out.send("", chunk([]chunkChoice{{Index: i, Delta: chunkDelta{}, FinishReason: &finish}}, nil))
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		u := c.Usage
		out.send("", chunk([]chunkChoice{}, &u))
	}
	out.done()
}
