package tasks

import (
	"encoding/json"
	"fmt"

	"github.com/tollgate/tollgate/catalog"
	"github.com/tollgate/tollgate/provider"
)

// A request carried natively (provider.Native) holds the client's body
// beside the task request decoded from it: the body is sent to a
// provider of its API, hashed without the client's spacing, key order
// and stream flag (how the answer is read, as for any request), and
// refused on a provider of another API when it holds what the task
// request cannot say.

// hashView is r as Hash encodes it: a native body as canonical JSON
// without its top-level "stream".
func (r Request) hashView() Request {
	n := r.Native
	if n == nil {
		return r
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(n.Body, &members); err != nil {
		return r // not an object: hashed as it is
	}
	delete(members, "stream")
	b, err := json.Marshal(members)
	if err != nil {
		return r
	}
	if c, err := provider.CanonicalJSON(b); err == nil {
		b = c
	}
	view := *n
	view.Body = b
	r.Native = &view
	return r
}

// refuseNativeOn is the refusal of req on m when req carries a body
// whose unmodeled fields m's provider cannot take: it speaks another
// API, and only the task request would reach it. nil when m can take it.
func (f *modelFit) refuseNativeOn(m catalog.Model, req Request) *RefusedError {
	n := req.Native
	if n == nil || len(n.Unmodeled) == 0 || provider.CarriedBy(f.clients[m.Provider], n.API) {
		return nil
	}
	kind := "another"
	if p, ok := f.catalog.Provider(m.Provider); ok && p.Kind != "" {
		kind = p.Kind
	}
	return &RefusedError{Field: n.Unmodeled[0], Code: CodeUnsupportedField,
		Message: fmt.Sprintf("model %s's provider (kind %s) cannot carry %s: only a provider of the %s API takes the request as sent",
			m.Name, kind, n.Unmodeled[0], n.API)}
}

// native is a native body's record as it may be stored: its API, and its
// unmodeled paths and API headers through the policy. The body itself
// is kept only sealed, with the raw request: the texts it shares with
// the task request are stored redacted there, and what it holds beyond
// them is named by the paths.
func (p *privacy) native(n *provider.Native) *provider.Native {
	if n == nil {
		return nil
	}
	out := &provider.Native{API: n.API}
	for _, u := range n.Unmodeled {
		out.Unmodeled = append(out.Unmodeled, p.text(u))
	}
	if n.Header != nil {
		out.Header = make(map[string][]string, len(n.Header))
		for k, vs := range n.Header {
			kept := make([]string, len(vs))
			for i, v := range vs {
				kept[i] = p.text(v)
			}
			out.Header[k] = kept
		}
	}
	return out
}

// nativeNames drops r's native answer when a name the provider chose in
// it (the model, the stop reason) is not a plain identifier: the client
// is then answered from the task's answer, whose names follow the
// owner's policy (identifiers), as every other answer's do.
func (p *privacy) nativeNames(r *Result) {
	n := r.Native
	if n == nil {
		return
	}
	var names []string
	var whole struct {
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Message    struct {
			Model string `json:"model"`
		} `json:"message"`
		Delta struct {
			StopReason string `json:"stop_reason"`
		} `json:"delta"`
	}
	read := func(b []byte) {
		whole.Model, whole.StopReason, whole.Message.Model, whole.Delta.StopReason = "", "", "", ""
		_ = json.Unmarshal(b, &whole) // a body that does not parse names nothing
		names = append(names, whole.Model, whole.StopReason, whole.Message.Model, whole.Delta.StopReason)
	}
	if len(n.Body) > 0 {
		read(n.Body)
	}
	for _, ev := range n.Events {
		read(ev.Data)
	}
	for _, name := range names {
		if p.identifier(name) != name {
			r.Native = nil
			return
		}
	}
}
