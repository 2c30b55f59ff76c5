package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"

	"github.com/tollgate/tollgate/provider"
	"github.com/tollgate/tollgate/tasks"
)

// Native carry of a Messages request (provider/native.go): the body goes
// to an Anthropic provider as the client wrote it, so a field Tollgate
// does not model (a beta at the top level, in a tool, in a block; a
// block or a server tool of a type it does not carry) is noted by path
// rather than refused. The fields Tollgate models are decoded and checked
// as ever, and make the task request that drives the hash, the
// reservation and the record. Admission refuses a request holding such a
// field on a provider of another API (tasks, modelFit), naming it.

// decodeCarried decodes a Messages body to be carried natively into in:
// every value checked as decodeBytes checks it, the unknown members
// listed in in.unmodeled instead of refused.
func decodeCarried(raw []byte, in *antRequest) error {
	s, err := scan(raw, reflect.TypeOf(in), scanNative, "")
	if err != nil {
		return decodeError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(s.edited()))
	dec.UseNumber()
	if err := decodeError(dec.Decode(in)); err != nil {
		return err
	}
	in.extra = s.extra
	in.unmodeled = append([]string{}, s.unmodeled...) // not nil: carried
	return nil
}

// carried is req with the client's body and API headers as its Native.
func carried(req tasks.Request, raw []byte, hdr antHeader, paths antPaths) tasks.Request {
	n := &provider.Native{API: provider.APIAnthropicMessages, Body: raw}
	if paths.carry != nil && len(paths.carry.unmodeled) > 0 {
		n.Unmodeled = paths.carry.unmodeled
	}
	if hdr.version != "" || len(hdr.betas) > 0 {
		n.Header = map[string][]string{}
		if hdr.version != "" {
			n.Header["Anthropic-Version"] = []string{hdr.version}
		}
		if len(hdr.betas) > 0 {
			n.Header["Anthropic-Beta"] = slices.Clone(hdr.betas)
		}
	}
	req.Native = n
	return req
}

// unmodeled reports whether field is one of the paths the body holds
// beyond the task request: already the client's own path.
func (p antPaths) unmodeled(field string) bool {
	return p.carry != nil && slices.Contains(p.carry.unmodeled, field)
}

// antNativeAnswer is the provider's Messages body a task's answer keeps,
// to be answered as it is; nil when it keeps none.
func antNativeAnswer(t tasks.Task) []byte {
	if t.Result == nil || t.Result.Native == nil || t.Result.Native.API != provider.APIAnthropicMessages {
		return nil
	}
	return t.Result.Native.Body
}

// relay writes a provider's event as it sent it (ev nil: a piece of an
// event already relayed); false once the client is gone.
func (s *antStream) relay(ev *provider.NativeEvent) bool {
	s.native = true
	if ev == nil {
		return !s.gone
	}
	name := ev.Event
	if name == "" {
		return s.raw("data: " + string(ev.Data) + "\n\n")
	}
	return s.raw("event: " + name + "\ndata: " + string(ev.Data) + "\n\n")
}

// antNativeEvents are the provider's stream events a task's answer
// keeps, to be streamed again as they are; nil when it keeps none.
func antNativeEvents(t tasks.Task) []provider.NativeEvent {
	if t.Result == nil || t.Result.Native == nil || t.Result.Native.API != provider.APIAnthropicMessages {
		return nil
	}
	return t.Result.Native.Events
}
