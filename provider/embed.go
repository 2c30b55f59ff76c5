package provider

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
)

// Embedding is what an embeddings request asks of the model, under
// OpenAI's names. Input is always a list: OpenAI's single-string form is
// the list of that one string, and answers alike.
type Embedding struct {
	Input []string `json:"input"`
	// Dimensions asks for vectors of this length (models that can shorten
	// theirs); 0 is the model's own.
	Dimensions int `json:"dimensions,omitempty"`
	// EncodingFormat is how the vectors travel, float (the default) or
	// base64 (little-endian float32 bytes); either way they come back as
	// numbers here.
	EncodingFormat string `json:"encoding_format,omitempty"`
	User           string `json:"user,omitempty"`
}

// Encoding formats of an embeddings request.
const (
	EncodingFloat  = "float"
	EncodingBase64 = "base64"
)

// Limits of an embeddings request: OpenAI's on the number of inputs, and
// a bound on dimensions above any model's vectors.
const (
	MaxEmbeddingInputs     = 2048
	MaxEmbeddingDimensions = 16384
)

// maxEmbeddingResponseBytes bounds an embeddings answer: the largest
// OpenAI returns (2,048 inputs of 3,072 dimensions written as decimal
// text, about 130 MB) fits.
const maxEmbeddingResponseBytes = 256 << 20

// EmbeddingRequest is one embeddings call.
type EmbeddingRequest struct {
	Model string
	Embedding
	// IdempotencyKey is sent as the Idempotency-Key header, as for a chat.
	IdempotencyKey string
}

// EmbeddingResponse is a successful embeddings call: one vector per
// input, in the inputs' order, all of one length.
type EmbeddingResponse struct {
	Vectors [][]float32
	Model   string // as the provider reports it; "" if it reported none
	Usage   *Usage // InputTokens only; nil when the provider reported none
	Status  int    // HTTP status
}

// Response is r as the one answer type the task pipeline carries: no
// choices, the vectors in Embeddings.
func (r *EmbeddingResponse) Response() *Response {
	return &Response{Embeddings: r.Vectors, Model: r.Model, Usage: r.Usage, Status: r.Status}
}

// Embedder is a Client whose provider computes embeddings. Embed sends req
// once, without retrying. On failure it returns a nil response and a
// *Error classified as Complete's are; a 2xx answer that does not hold
// one finite vector per input, all of one length (the length asked for,
// when Dimensions is set), is ClassTransient "malformed_response".
type Embedder interface {
	Embed(ctx context.Context, req EmbeddingRequest) (*EmbeddingResponse, error)
}

// EmbeddingChecker is an Embedder that cannot carry every field of
// Embedding: CheckEmbedding returns an *Unsupported for the first it
// cannot, or nil, and makes no call.
type EmbeddingChecker interface {
	CheckEmbedding(e Embedding) error
}

var (
	_ Embedder         = (*OpenAI)(nil)
	_ Embedder         = (*Cloudflare)(nil)
	_ EmbeddingChecker = (*Cloudflare)(nil)
)

// Embed POSTs req to baseURL + "/embeddings" as OpenAI's embeddings body;
// encoding_format goes as the client asked, and an answer in either form
// is read. See Embedder for its errors.
func (c *OpenAI) Embed(ctx context.Context, req EmbeddingRequest) (*EmbeddingResponse, error) {
	body := struct {
		Model string `json:"model"`
		Embedding
	}{req.Model, req.Embedding}
	var out *EmbeddingResponse
	_, err := call{
		hc:       c.hc,
		url:      c.embeddings,
		header:   c.headers(),
		payload:  body,
		key:      req.IdempotencyKey,
		classify: ClassifyOpenAI,
		limit:    maxEmbeddingResponseBytes,
		parse: func(status int, header http.Header, b []byte) (*Response, error) {
			var err error
			out, err = parseOpenAIEmbeddings(status, header, b, req.Embedding)
			return nil, err
		},
	}.do(ctx)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// openAIEmbeddings is OpenAI's embeddings answer; error is how some
// compatible servers report a failure with a 200.
type openAIEmbeddings struct {
	Data []struct {
		Index     *int            `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string          `json:"model"`
	Usage *openAIUsage    `json:"usage"`
	Error json.RawMessage `json:"error"`
}

func parseOpenAIEmbeddings(status int, header http.Header, body []byte, asked Embedding) (*EmbeddingResponse, error) {
	var list openAIEmbeddings
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, malformed(status, err)
	}
	if len(list.Data) == 0 && hasJSON(list.Error) {
		return nil, ClassifyOpenAI(status, header, body)
	}
	if len(list.Data) != len(asked.Input) {
		return nil, malformed(status, errors.New("provider: one vector per input expected"))
	}
	vectors := make([][]float32, len(list.Data))
	for i, d := range list.Data {
		at := i
		if d.Index != nil {
			at = *d.Index
		}
		if at < 0 || at >= len(vectors) || vectors[at] != nil {
			return nil, malformed(status, errors.New("provider: embedding indices are not one per input"))
		}
		v, err := vectorOf(d.Embedding)
		if err != nil {
			return nil, malformed(status, err)
		}
		vectors[at] = v
	}
	if err := checkVectors(vectors, asked.Dimensions); err != nil {
		return nil, malformed(status, err)
	}
	return &EmbeddingResponse{Vectors: vectors, Model: list.Model, Usage: list.Usage.usage(), Status: status}, nil
}

// vectorOf reads one embedding: an array of numbers, or (encoding_format
// base64) a base64 string of little-endian float32 values.
func vectorOf(raw json.RawMessage) ([]float32, error) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil || len(b)%4 != 0 {
			return nil, errors.New("provider: a base64 embedding must hold whole float32 values")
		}
		return DecodeVector(b), nil
	}
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// checkVectors reports a set of vectors that are not all of one non-zero
// length (dims, when not 0), or hold a value that is not finite.
func checkVectors(vectors [][]float32, dims int) error {
	for _, v := range vectors {
		if len(v) == 0 || len(v) != len(vectors[0]) || dims > 0 && len(v) != dims {
			return errors.New("provider: embeddings of differing or unasked lengths")
		}
		for _, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return errors.New("provider: an embedding holds a value that is not finite")
			}
		}
	}
	return nil
}

// EncodeVector is v as OpenAI's base64 embeddings carry it before their
// base64 step: little-endian float32 bytes.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DecodeVector reverses EncodeVector; a trailing partial value is ignored.
func DecodeVector(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// CheckEmbedding names what Workers AI's embedding models cannot carry:
// dimensions (their vectors have one length) and user.
func (c *Cloudflare) CheckEmbedding(e Embedding) error {
	switch {
	case e.Dimensions != 0:
		return unsupported("dimensions", "Workers AI's embedding models answer vectors of one fixed length")
	case e.User != "":
		return unsupported("user", "Workers AI has no user")
	}
	return nil
}

// Embed POSTs {"text": [...]} to the model's run path, as Workers AI's
// embedding models (@cf/baai/bge-base-en-v1.5 ...) take it, and reads
// result.data. The encoding format shapes only Tollgate's answer: Workers
// AI answers numbers. A request CheckEmbedding refuses, or a model name
// that leaves the run path, is ClassRejected "invalid_request", sent
// nowhere. See Embedder for the other errors.
func (c *Cloudflare) Embed(ctx context.Context, req EmbeddingRequest) (*EmbeddingResponse, error) {
	path, err := modelPath(req.Model)
	if err != nil {
		return nil, rejectedLocally(err)
	}
	if err := c.CheckEmbedding(req.Embedding); err != nil {
		return nil, rejectedLocally(err)
	}
	var out *EmbeddingResponse
	_, err = call{
		hc:       c.hc,
		url:      c.prefix + path,
		header:   c.headers(),
		payload:  map[string][]string{"text": req.Input},
		key:      req.IdempotencyKey,
		classify: ClassifyCloudflare,
		limit:    maxEmbeddingResponseBytes,
		parse: func(status int, header http.Header, b []byte) (*Response, error) {
			var err error
			out, err = parseWorkersAIEmbeddings(status, header, b, len(req.Input))
			return nil, err
		},
	}.do(ctx)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// workersAIEmbeddings is the result of a Workers AI embedding model:
// shape [n, d] and data, n vectors of d numbers.
type workersAIEmbeddings struct {
	Shape []int        `json:"shape"`
	Data  [][]float32  `json:"data"`
	Usage *openAIUsage `json:"usage"`
}

func parseWorkersAIEmbeddings(status int, header http.Header, body []byte, inputs int) (*EmbeddingResponse, error) {
	var env workersAIResponse
	if err := json.Unmarshal(body, &env); err != nil {
		return nil, malformed(status, err)
	}
	if (env.Success != nil && !*env.Success) || len(env.Errors) > 0 {
		return nil, ClassifyCloudflare(status, header, body)
	}
	if !isJSONObject(env.Result) {
		return nil, malformed(status, nil)
	}
	var res workersAIEmbeddings
	if err := json.Unmarshal(env.Result, &res); err != nil {
		return nil, malformed(status, err)
	}
	if len(res.Data) != inputs {
		return nil, malformed(status, errors.New("provider: one vector per input expected"))
	}
	if err := checkVectors(res.Data, 0); err != nil {
		return nil, malformed(status, err)
	}
	if len(res.Shape) == 2 && (res.Shape[0] != len(res.Data) || res.Shape[1] != len(res.Data[0])) {
		return nil, malformed(status, errors.New("provider: the shape does not describe the data"))
	}
	return &EmbeddingResponse{Vectors: res.Data, Usage: res.Usage.usage(), Status: status}, nil
}
