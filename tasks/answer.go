package tasks

import (
	"encoding/json"
	"log/slog"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/seal"
)

// How a provider's answer becomes a task's result. The result row holds no
// text a client or the model produced: the first choice's text is sealed
// in output_sealed, as it always was, and the rest of the answer (tool
// calls, refusal, further choices, logprobs) in answer_sealed, only when
// there is any, so a text answer costs what it did. The owner's reads open
// both (reveal).

// sealedAnswer is the part of an answer answer_sealed holds.
type sealedAnswer struct {
	Choices []Choice `json:"choices"`
	// Embedding is an embeddings answer's vectors (sealedVectors).
	Embedding []byte `json:"embedding,omitempty"`
	// Native is a natively carried request's answer (Result.Native).
	Native *provider.NativeAnswer `json:"native,omitempty"`
}

// choicesOf is every choice of resp as a task keeps it, the assistant role
// filled in where the provider left it out.
func choicesOf(resp *provider.Response) []Choice {
	out := make([]Choice, len(resp.Choices))
	for i, c := range resp.Choices {
		m := c.Message
		if m.Role == "" {
			m.Role = "assistant"
		}
		out[i] = Choice{Index: c.Index, Message: m, FinishReason: c.FinishReason, Logprobs: c.Logprobs,
			StopReason: c.StopReason, StopSequence: c.StopSequence}
	}
	return out
}

// richAnswer reports whether choices hold anything beyond the first
// choice's text and finish reason (tool calls, a refusal, parts such as
// thinking, logprobs, a provider's own stop reason or stop sequence,
// further choices): only then is answer_sealed written.
func richAnswer(choices []Choice) bool {
	if len(choices) > 1 {
		return true
	}
	for _, c := range choices {
		m := c.Message
		if len(m.ToolCalls) > 0 || m.Refusal != "" || len(c.Logprobs) > 0 || m.Content.Parts != nil || m.Name != "" ||
			c.StopReason != "" || c.StopSequence != "" {
			return true
		}
	}
	return false
}

// resultOf is the result of a succeeded call, its texts set as the owner
// reads them; stored() strips them for the row.
func resultOf(resp *provider.Response, model string, u Usage, cost int64) Result {
	res := Result{Output: resp.Text(), Model: model, SystemFingerprint: resp.SystemFingerprint,
		FinishReason: resp.FinishReason(), Usage: u, CostMicros: cost}
	if resp.Embeddings != nil {
		res.Embedding = embeddingResultOf(resp.Embeddings)
		return res
	}
	res.setAnswer(choicesOf(resp))
	res.Native = resp.Native
	return res
}

// setAnswer fills Message, Logprobs and Choices from the answer's choices.
func (r *Result) setAnswer(choices []Choice) {
	if len(choices) == 0 {
		r.Message = &provider.Message{Role: "assistant", Content: provider.Text(r.Output)}
		return
	}
	first := choices[0].Message
	r.Message, r.Logprobs = &first, choices[0].Logprobs
	r.StopReason, r.StopSequence = choices[0].StopReason, choices[0].StopSequence
	r.Choices = nil
	if len(choices) > 1 {
		r.Choices = choices
	}
}

// answerChoices is every choice of the result, the first from Message.
func (r *Result) answerChoices() []Choice {
	if len(r.Choices) > 0 {
		return r.Choices
	}
	if r.Message == nil {
		return nil
	}
	return []Choice{{Message: *r.Message, FinishReason: r.FinishReason, Logprobs: r.Logprobs,
		StopReason: r.StopReason, StopSequence: r.StopSequence}}
}

// seal seals the result's texts for task id: the output always, the rest
// of the answer when there is any.
func (r *Result) seal(s *seal.Sealer, id string) {
	r.sealedOutput = s.Seal([]byte(r.Output), []byte(id))
	r.sealedAnswer = nil
	if r.Embedding != nil {
		plain, err := json.Marshal(sealedAnswer{Embedding: sealedVectors(r.Embedding.Vectors)})
		if err != nil {
			panic("tasks: encode vectors: " + err.Error()) // bytes always encode
		}
		r.sealedAnswer = s.Seal(plain, []byte(id))
		return
	}
	if choices := r.answerChoices(); richAnswer(choices) || r.Native != nil {
		plain, err := json.Marshal(sealedAnswer{Choices: choices, Native: r.Native})
		if err != nil {
			// Choices hold strings and canonical JSON only.
			panic("tasks: encode answer: " + err.Error())
		}
		r.sealedAnswer = s.Seal(plain, []byte(id))
	}
}

// stored is the result as its row holds it: no text, only the shape the
// sealed columns are opened into.
func (r Result) stored() Result {
	out := r
	out.Output, out.Message, out.Choices, out.Logprobs = "", nil, nil, nil
	out.StopReason, out.StopSequence, out.Native = "", "", nil
	if r.Embedding != nil {
		e := *r.Embedding
		e.Vectors = nil
		out.Embedding = &e
	}
	return out
}

// reveal opens the sealed output and answer into the result the owner
// polls for. A body erased (retention or deletion) leaves the result
// without them.
func (s *guard) reveal(t *Task) {
	if t.Result == nil || len(t.outputSealed) == 0 {
		return
	}
	plain, err := s.cfg.Sealer.Open(t.outputSealed, []byte(t.ID))
	if err != nil {
		s.cfg.Logger.Error("sealed output cannot be opened (wrong TOLLGATE_DATA_KEY?)", slog.String("task_id", t.ID))
		return
	}
	t.Result.Output = string(plain)
	var a sealedAnswer
	if len(t.answerSealed) > 0 {
		plain, err := s.cfg.Sealer.Open(t.answerSealed, []byte(t.ID))
		if err == nil {
			err = json.Unmarshal(plain, &a)
		}
		if err != nil {
			s.cfg.Logger.Error("sealed answer cannot be opened (wrong TOLLGATE_DATA_KEY?)", slog.String("task_id", t.ID))
		}
	}
	if e := t.Result.Embedding; e != nil {
		if e.Vectors = openVectors(a.Embedding, e.Dimensions); len(e.Vectors) != e.Count {
			e.Vectors = nil // erased, or not this answer's
		}
		return
	}
	t.Result.setAnswer(a.Choices)
	t.Result.Native = a.Native
}
