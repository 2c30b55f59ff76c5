package fake

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
)

// defaultDimensions is the length of the fake's vectors when the request
// names none.
const defaultDimensions = 8

// embeddingsRequest is an OpenAI embeddings request.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
	User           string          `json:"user"`
}

// handleEmbeddings serves POST /v1/embeddings in the OpenAI format.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	body := readBody(w, r)
	var req embeddingsRequest
	err := decodeObject(body, &req)
	next, scripted := s.log(r, req.Model, body)
	if scripted && !next.shapes(false) {
		s.serveScripted(w, r, next)
		return
	}
	if scripted && !s.pause(r, next) {
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request. (fake: "+err.Error()+")")
		return
	}
	texts, rerr := embeddingInputs(req)
	if rerr != nil {
		writeOpenAIError(w, http.StatusBadRequest, *rerr)
		return
	}
	dims := defaultDimensions
	if req.Dimensions != nil {
		dims = *req.Dimensions
	}
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	out := struct {
		Object string `json:"object"`
		Data   []item `json:"data"`
		Model  string `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: []item{}, Model: req.Model}
	for i, text := range texts {
		var v any = Vector(text, dims)
		if req.EncodingFormat == "base64" {
			v = base64.StdEncoding.EncodeToString(littleEndian(Vector(text, dims)))
		}
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: v})
	}
	out.Usage.PromptTokens = EmbeddingTokens(texts)
	out.Usage.TotalTokens = out.Usage.PromptTokens
	scriptedHeaders(w, next)
	writeJSON(w, next.status(), out)
}

// embeddingInputs reads req's input, refusing what OpenAI refuses among
// the mistakes a gateway can make.
func embeddingInputs(req embeddingsRequest) ([]string, *requestError) {
	texts, err := textList(req.Input)
	switch {
	case err != nil:
		return nil, &requestError{msg: "'input' : " + err.Error(), param: "input", code: "invalid_type"}
	case len(texts) == 0 || len(texts) > 2048:
		return nil, &requestError{msg: "'input' : input must hold 1 to 2048 items", param: "input", code: "invalid_value"}
	case req.Dimensions != nil && (*req.Dimensions < 1 || *req.Dimensions > 16384):
		return nil, &requestError{msg: fmt.Sprintf("Invalid 'dimensions': integer below minimum value. Expected a value >= 1, but got %d instead.", *req.Dimensions),
			param: "dimensions", code: "integer_below_min_value"}
	case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
		return nil, &requestError{msg: "Invalid value for 'encoding_format': expected float or base64.", param: "encoding_format", code: "invalid_value"}
	}
	for _, t := range texts {
		if t == "" {
			return nil, &requestError{msg: "'input' : input cannot be an empty string.", param: "input", code: "invalid_value"}
		}
	}
	return texts, nil
}

// textList reads a string or an array of strings; token arrays, which
// the fake does not embed, are refused like any other type.
func textList(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	var one string
	if len(raw) > 0 && raw[0] == '"' {
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, err
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, errors.New("input must be a string or an array of strings")
	}
	return many, nil
}

// Vector is the fake's embedding of text in dims dimensions: value j is
// the j-th 32-bit word of SHA-256(n ":" text) (n = j/8, the digest's eight
// words), read as a signed integer and scaled into [-1, 1).
func Vector(text string, dims int) []float32 {
	v := make([]float32, dims)
	var sum [sha256.Size]byte
	for j := range v {
		if j%8 == 0 {
			sum = sha256.Sum256(fmt.Appendf(nil, "%d:%s", j/8, text))
		}
		word := int32(binary.BigEndian.Uint32(sum[(j%8)*4:]))
		v[j] = float32(word) / (1 << 31)
	}
	return v
}

// EmbeddingTokens is the fake's usage for texts: the sum of ceil(bytes/4)
// over them.
func EmbeddingTokens(texts []string) int {
	n := 0
	for _, t := range texts {
		n += (len(t) + 3) / 4
	}
	return n
}

// littleEndian is v as OpenAI's base64 embeddings carry it.
func littleEndian(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// isWorkersAIEmbedding reports whether a Workers AI body is an embedding
// model's input: it has "text" and no "messages".
func isWorkersAIEmbedding(body []byte) bool {
	var probe struct {
		Text     json.RawMessage `json:"text"`
		Messages json.RawMessage `json:"messages"`
	}
	return json.Unmarshal(body, &probe) == nil && probe.Text != nil && probe.Messages == nil
}

// workersAIEmbedding answers a Workers AI embedding model: {"text": a
// string or strings} gives {"result": {"shape": [n, 8], "data": [...],
// "pooling": "cls"}}, no usage reported.
func (s *Server) workersAIEmbedding(w http.ResponseWriter, r *http.Request, model string, body []byte) {
	next, scripted := s.log(r, model, body)
	if scripted && !next.shapes(false) {
		s.serveScripted(w, r, next)
		return
	}
	if scripted && !s.pause(r, next) {
		return
	}
	var req struct {
		Text json.RawMessage `json:"text"`
	}
	texts, err := []string(nil), decodeObject(body, &req)
	if err == nil {
		texts, err = textList(req.Text)
	}
	if err == nil && (len(texts) == 0 || len(texts) > 2048) {
		err = errors.New("text must hold 1 to 2048 items")
	}
	if err != nil {
		writeWorkersAIError(w, http.StatusBadRequest, 5006, "AiError: Bad input: fake: "+err.Error())
		return
	}
	data := make([][]float32, len(texts))
	for i, t := range texts {
		data[i] = Vector(t, defaultDimensions)
	}
	result := map[string]any{"shape": []int{len(texts), defaultDimensions}, "data": data, "pooling": "cls"}
	scriptedHeaders(w, next)
	writeJSON(w, next.status(), map[string]any{"result": result, "success": true, "errors": []workersAIError{}, "messages": []string{}})
}
