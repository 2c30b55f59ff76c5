package server

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/tollgate/tollgate/tasks"
)

// updateGolden rewrites the dialects' golden files from what the code
// does: go test ./server -run TestDialects -update-dialects. Read the diff
// before committing it.
var updateGolden = flag.Bool("update-dialects", false, "rewrite testdata/dialects/*/*.admitted.json and *.answer.*")

// TestDialects runs each dialect's translation on golden pairs, with
// neither HTTP nor PostgreSQL: testdata/dialects/<dialect>/<case>.request.json
// decodes to <case>.admitted.json (the provider-neutral task request and
// what the call asks of admission), and <case>.finished.json, a task as
// stored, is answered as <case>.answer.json, or as <case>.answer.txt, the
// stream of a stored answer, when the request asked for a stream.
func TestDialects(t *testing.T) {
	t.Run("chat", func(t *testing.T) { goldenDialect(t, "chat", oaiChat{}, decodeChatCompletion) })
	t.Run("messages", func(t *testing.T) {
		goldenDialect(t, "messages", anthropicMessages{}, func(raw []byte) (antCall, admission, error) {
			return decodeMessages(raw, antHeader{version: "2023-06-01"})
		})
	})
	t.Run("responses", func(t *testing.T) {
		goldenDialect(t, "responses", newOAIResponses(), func(raw []byte) (respCall, admission, error) {
			call, err := decodeResponsesRequest(raw)
			if err != nil {
				return respCall{}, admission{}, err
			}
			return admitResponse(call)
		})
	})
	t.Run("embeddings", func(t *testing.T) { goldenDialect(t, "embeddings", newOAIEmbeddings(), decodeEmbeddings) })
}

// admitted is what a golden request decodes to.
type admitted struct {
	Request         tasks.Request `json:"request"`
	Stream          bool          `json:"stream,omitempty"`
	Background      bool          `json:"background,omitempty"`
	Follows         bool          `json:"follows,omitempty"`
	CanceledAnswers bool          `json:"canceled_answers,omitempty"`
	KeyPrefix       string        `json:"key_prefix"`
}

func goldenDialect[C any](t *testing.T, dir string, dl dialect[C], decode func([]byte) (C, admission, error)) {
	requests, err := filepath.Glob(filepath.Join("testdata", "dialects", dir, "*.request.json"))
	if err != nil || len(requests) == 0 {
		t.Fatalf("no golden requests for %s (%v)", dir, err)
	}
	for _, path := range requests {
		name := strings.TrimSuffix(path, ".request.json")
		t.Run(filepath.Base(name), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			call, a, err := decode(raw)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			got, _ := json.MarshalIndent(admitted{Request: a.req, Stream: a.stream, Background: a.background, Follows: a.follows,
				CanceledAnswers: a.canceledAnswers, KeyPrefix: a.keyPrefix}, "", "  ")
			golden(t, name+".admitted.json", got)
			finished, err := os.ReadFile(name + ".finished.json")
			if os.IsNotExist(err) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var task tasks.Task
			if err := json.Unmarshal(finished, &task); err != nil {
				t.Fatalf("%s.finished.json: %v", name, err)
			}
			rec := httptest.NewRecorder()
			c := echo.New().NewContext(httptest.NewRequest(http.MethodPost, "/", nil), rec)
			if a.stream {
				err = dl.streamStored(c, &Deps{}, call, task)
			} else {
				err = dl.answer(c, &Deps{}, call, task)
			}
			if err != nil {
				t.Fatalf("answer: %v", err)
			}
			if a.stream {
				golden(t, name+".answer.txt", rec.Body.Bytes())
				return
			}
			var out bytes.Buffer
			if err := json.Indent(&out, rec.Body.Bytes(), "", "  "); err != nil {
				t.Fatalf("answer %q: %v", rec.Body.String(), err)
			}
			golden(t, name+".answer.json", out.Bytes())
		})
	}
}

// golden compares got with the file at path, or writes it with
// -update-dialects.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	got = append(bytes.TrimRight(got, "\n"), '\n')
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update-dialects to write it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", path, diff)
	}
}
