package server_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/tollgate/tollgate/accounts"
)

// TestResponsesBackgroundIsQueuedUntilItRuns follows a background
// response through OpenAI's SDK as OpenAI's own goes: answered queued, in
// progress while its call runs, then completed; its stream's
// response.created says queued too.
func TestResponsesBackgroundIsQueuedUntilItRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	client, _ := sdk(e, key)
	ctx := t.Context()
	e.fake.Script(fakeDelay(500))
	params := respParams("background please")
	params.Background = openai.Bool(true)
	started, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	statuses := []responses.ResponseStatus{started.Status}
	e.waitFor("the call reached the provider", func() bool { return e.fake.CallCount() == 1 })
	running, err := client.Responses.Get(ctx, started.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	statuses = append(statuses, running.Status, pollResponse(t, client, started.ID).Status)
	want := []responses.ResponseStatus{responses.ResponseStatusQueued, responses.ResponseStatusInProgress, responses.ResponseStatusCompleted}
	if diff := cmp.Diff(want, statuses); diff != "" {
		t.Errorf("background statuses mismatch (-want +got):\n%s", diff)
	}

	params.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("background stream")}
	s := client.Responses.NewStreaming(ctx, params)
	events := streamEvents(t, s.Next, s.Current, s.Err)
	if len(events) == 0 || events[0].Type != "response.created" || events[0].Response.Status != responses.ResponseStatusQueued {
		t.Errorf("background stream opens with %+v, want response.created queued", events[:min(1, len(events))])
	}
}
