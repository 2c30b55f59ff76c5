package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// POST /v1/embeddings, OpenAI's embeddings API: each call is a task (its
// reservation, queue, classified failures, settlement and replay record),
// answered in OpenAI's shape when it ends.

// oaiEmbeddingRequest is the body of POST /v1/embeddings: OpenAI's fields,
// and no other (an unknown field is refused by name).
type oaiEmbeddingRequest struct {
	Model string `json:"model"`
	// Input is a string or an array of strings; token arrays are refused
	// (embeddingInput).
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
	User           string          `json:"user"`
}

// task is the request as a task's: a string input as the list of it.
func (r oaiEmbeddingRequest) task() (tasks.Request, error) {
	input, err := embeddingInput(r.Input)
	if err != nil {
		return tasks.Request{}, err
	}
	e := &provider.Embedding{Input: input, EncodingFormat: r.EncodingFormat, User: r.User}
	if r.Dimensions != nil {
		if *r.Dimensions < 1 || *r.Dimensions > provider.MaxEmbeddingDimensions {
			return tasks.Request{}, fieldErr("dimensions", fmt.Sprintf("must be between 1 and %d", provider.MaxEmbeddingDimensions))
		}
		e.Dimensions = *r.Dimensions
	}
	return tasks.Request{Chat: provider.Chat{Model: r.Model}, Embedding: e}.Canonical(), nil
}

// embeddingInput reads input: a string, or an array of strings. Token
// arrays (an array of integers, or of arrays of them) are refused by
// name: Tollgate counts, redacts and records text.
func embeddingInput(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, fieldErr("input", "is required: a string or an array of strings")
	}
	var one string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, fieldErr("input", "must be a string or an array of strings")
		}
		return []string{one}, nil
	}
	var items []json.RawMessage
	if raw[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, fieldErr("input", "must be a string or an array of strings")
	}
	out := make([]string, len(items))
	for i, it := range items {
		it = bytes.TrimSpace(it)
		switch {
		case len(it) > 0 && (it[0] == '[' || it[0] == '-' || it[0] >= '0' && it[0] <= '9'):
			return nil, fieldErr("input", "must be text: token arrays are not supported, send the strings they encode")
		case len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &out[i]) != nil:
			return nil, fieldErr(fmt.Sprintf("input[%d]", i), "must be a string")
		}
	}
	return out, nil
}

// oaiEmbeddings is OpenAI's embeddings dialect: POST /v1/embeddings,
// answered whole, never streamed. A context a provider refuses is the
// call's input.
type oaiEmbeddings struct{ oaiErrors }

func newOAIEmbeddings() oaiEmbeddings {
	return oaiEmbeddings{oaiErrors{param: func(p string) string {
		if p == "messages" {
			return "input"
		}
		return p
	}}}
}

// embeddingsCall is what answering an embeddings call needs of its
// request: how its vectors travel.
type embeddingsCall struct{ format string }

func (oaiEmbeddings) decode(c echo.Context, d *Deps) (embeddingsCall, admission, error) {
	raw, err := readBody(c, d.MaxBodyBytes)
	if err != nil {
		return embeddingsCall{}, admission{}, err
	}
	return decodeEmbeddings(raw)
}

// decodeEmbeddings is an embeddings body as a call and its admission.
func decodeEmbeddings(raw []byte) (embeddingsCall, admission, error) {
	var in oaiEmbeddingRequest
	if err := decodeBytes(raw, &in, scanStrict, ""); err != nil {
		return embeddingsCall{}, admission{}, err
	}
	req, err := in.task()
	if err != nil {
		return embeddingsCall{}, admission{}, err
	}
	return embeddingsCall{format: req.Embedding.EncodingFormat}, admission{req: req, keyPrefix: "embeddings/"}, nil
}

func (oaiEmbeddings) refused(_ embeddingsCall, err error) error { return err }

func (oaiEmbeddings) answer(c echo.Context, _ *Deps, call embeddingsCall, t tasks.Task) error {
	list, err := embeddingList(t, call.format)
	if err != nil {
		return err
	}
	return writeJSON(c, list)
}

// streamLive and streamStored are never called: an embeddings call asks
// for no stream.
func (oaiEmbeddings) streamLive(echo.Context, *Deps, embeddingsCall, tasks.Created) error {
	return errNoStream
}

func (oaiEmbeddings) streamStored(echo.Context, *Deps, embeddingsCall, tasks.Task) error {
	return errNoStream
}

// oaiEmbeddingList is OpenAI's embeddings answer.
type oaiEmbeddingList struct {
	Object string         `json:"object"`
	Data   []oaiEmbedding `json:"data"`
	Model  string         `json:"model"`
	Usage  struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// oaiEmbedding is one vector: numbers, or with encoding_format base64
// the base64 of its little-endian float32 bytes, as OpenAI sends them.
type oaiEmbedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"`
}

// embeddingList is t's answer in OpenAI's shape. A task whose vectors are
// no longer held (erased) is 410.
func embeddingList(t tasks.Task, format string) (oaiEmbeddingList, error) {
	var e *tasks.EmbeddingResult
	if t.Result != nil {
		e = t.Result.Embedding
	}
	if e == nil || e.Vectors == nil {
		return oaiEmbeddingList{}, &apiError{status: http.StatusGone, code: "gone",
			detail: "The task " + t.ID + " no longer holds its vectors (its bodies were erased); send the request again with a new Idempotency-Key."}
	}
	out := oaiEmbeddingList{Object: "list", Data: make([]oaiEmbedding, len(e.Vectors)), Model: t.Result.Model}
	for i, v := range e.Vectors {
		var vec any = v
		if format == provider.EncodingBase64 {
			vec = base64.StdEncoding.EncodeToString(provider.EncodeVector(v))
		}
		out.Data[i] = oaiEmbedding{Object: "embedding", Index: i, Embedding: vec}
	}
	out.Usage.PromptTokens, out.Usage.TotalTokens = t.Result.Usage.InputTokens, t.Result.Usage.InputTokens
	return out, nil
}
