package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/tollgate/tollgate/accounts"
	"github.com/tollgate/tollgate/internal/eventually"
	"github.com/tollgate/tollgate/provider/fake"
	"github.com/tollgate/tollgate/tasks"
)

// The console's end-to-end tests drive the real console, served by the
// real server on its own database, in a real headless Chromium: each role
// signs in through the form and uses its pages as a person would. Every
// wait is on a condition in the page, bounded by a context.
//
// Chromium is Debian's `chromium`; .ci/run installs it. Without it the
// test skips on a developer machine and fails when CI is set.
//
// TOLLGATE_SCREENSHOTS=1 also saves the main pages as docs/img/console-*.png
// for docs/operations.md, "The console".

const (
	// browserBudget bounds the whole browser session, start to finish; it
	// is a backstop, each step has its own bound.
	browserBudget = 4 * time.Minute
	// stepTimeout bounds one step: a page load, a click and what follows.
	stepTimeout = 20 * time.Second
	// pollEvery is how often a wait re-checks its condition in the page.
	pollEvery = 25 * time.Millisecond
)

// plantedEmail is in the prompt and the answer of the task support opens;
// the record must show [EMAIL_1] in its place, never the address.
const plantedEmail = "jane.doe@example.com"

// consoleWorld is what the test puts in the database before any browser
// starts: keys of every role and a few finished tasks.
type consoleWorld struct {
	client, support, finance, admin string
	kettle                          tasks.Task // acme's task that support finds and opens
	teapot                          tasks.Task // acme's task the client erases and opens
	acmeTasks                       int        // acme's own tasks, all the client may see
	settled                         int64      // tasks settled in all, in today's usage
}

func TestConsoleInChromium(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	e := newEnv(t, envOptions{})
	w := seedConsole(t, e)
	browser := startChromium(t, chromium)

	// The subtests run one after another in the test's own slot: parallel
	// subtests would wait for a free slot among the package's other
	// parallel tests, while the browser's budget runs.
	t.Run("support finds a task and reads its replay record with a reason", func(t *testing.T) {
		b := newTab(t, browser)
		b.open(e.url + "/console/")
		b.screenshot("signin")
		b.signIn(w.support, "helpdesk · support")

		b.waitVisible("support page", "view-support")
		// The landing lists the recent tasks before any search, each with
		// its cost and an id on one line that keeps the whole id.
		b.waitFor("recent tasks", `document.getElementById('search-summary').textContent.includes('most recent')`)
		recent := tabEval[[][]string](b, "read the recent tasks",
			`[...document.querySelectorAll('#search-results tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()))`)
		if len(recent) != int(w.settled) {
			t.Errorf("support's landing shows %d tasks, want the %d recent ones", len(recent), w.settled)
		}
		for _, r := range recent {
			if len(r) < 7 || r[6] == "—" || parseShown(t, r[6]) <= 0 {
				t.Errorf("recent task row %q: want a cost in the Cost column", r)
			}
		}
		ids := tabEval[[]bool](b, "measure the ids",
			`[...document.querySelectorAll('#search-results tbody a.id-short')].map(a => a.title === a.textContent && a.getClientRects().length === 1 && a.getBoundingClientRect().height < 2 * parseFloat(getComputedStyle(a).lineHeight || '20'))`)
		if len(ids) != len(recent) || slices.Contains(ids, false) {
			t.Errorf("task ids on one line with the full id in the title: %v", ids)
		}
		b.do("search for a word of the prompt",
			chromedp.SendKeys(chromedp.ID("s-q"), "kettle"),
			chromedp.Click(chromedp.CSS(`#search-form button[type=submit]`)))
		b.waitFor("search results", `document.getElementById('search-summary').textContent.includes('matching')`)
		rows := tabEval[[][]string](b, "read the results",
			`[...document.querySelectorAll('#search-results tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()))`)
		if len(rows) != 1 || len(rows[0]) < 3 || rows[0][1] != w.kettle.ID || rows[0][2] != "acme" {
			t.Fatalf("search for kettle shows %q; want the one row of acme's task %s", rows, w.kettle.ID)
		}
		b.screenshot("support-search")

		b.do("open the task", chromedp.Click(chromedp.CSS(`#search-results tbody a[href="#task/`+w.kettle.ID+`"]`)))
		b.waitVisible("reason dialog before another owner's record", "reason-dialog")
		if got := tabEval[string](b, "read the dialog", `document.getElementById('reason-owner').textContent`); !strings.Contains(got, "“acme”") {
			t.Errorf("reason dialog says %q; want it to name the owner acme", got)
		}
		const reason = "ticket T-4711: customer asks about the refund"
		b.do("give a reason",
			chromedp.SendKeys(chromedp.ID("reason-text"), reason),
			chromedp.Click(chromedp.CSS(`#reason-form button[type=submit]`)))
		b.waitVisible("replay record", "side-by-side")
		b.waitVisible("task summary", "task-summary")
		facts := tabEval[string](b, "read the summary", `document.getElementById('task-facts').innerText`)
		if !strings.Contains(facts, "succeeded") || !strings.Contains(facts, "Cost") || strings.Contains(facts, "Cost\n—") {
			t.Errorf("task summary %q: want the status and a cost", facts)
		}
		if got := tabEval[string](b, "read the result", `document.getElementById('task-result').textContent`); !strings.Contains(got, "Refund approved for the blue kettle") {
			t.Errorf("task summary's result = %q; want the answer", got)
		}

		request := tabEval[string](b, "read the request", `document.getElementById('request-view').innerText`)
		record := tabEval[string](b, "read the record", `document.getElementById('record-view').innerText`)
		if !strings.Contains(request, "refund the blue kettle") || !strings.Contains(record, "Refund approved for the blue kettle") {
			t.Errorf("task page shows request %q and record %q; want the stored prompt and answer", request, record)
		}
		marks := tabEval[[]string](b, "read the highlighted placeholders",
			`['request-view', 'record-view'].map(id => [...document.querySelectorAll('#' + id + ' mark.redacted')].map(m => m.textContent).join(' '))`)
		for i, side := range []string{"request", "record"} {
			if !strings.Contains(marks[i], "[EMAIL_1]") {
				t.Errorf("%s side highlights %q; want [EMAIL_1] in place of the planted address", side, marks[i])
			}
		}
		if tabEval[bool](b, "look for the address", `document.documentElement.outerHTML.includes('`+plantedEmail+`')`) {
			t.Errorf("the page shows %s; the record holds only its placeholder", plantedEmail)
		}
		curl := tabEval[string](b, "read the curl", `document.getElementById('curl-text').textContent`)
		if !strings.Contains(curl, "X-Reason: "+reason) || !strings.Contains(curl, "/v1/tasks/"+w.kettle.ID+"/replay") {
			t.Errorf("curl = %q; want the replay endpoint with the reason", curl)
		}
		b.screenshot("task")

		// The reason reached the API, which audited the read with it.
		r := e.do(http.MethodGet, "/v1/audit?task_id="+w.kettle.ID, w.admin, nil, nil)
		var audit struct {
			Data []struct {
				ActorRole string `json:"actor_role"`
				Reason    string `json:"reason"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.body, &audit); err != nil || r.status != http.StatusOK {
			t.Fatalf("GET /v1/audit: %d %s (%v)", r.status, r.body, err)
		}
		if len(audit.Data) != 1 || audit.Data[0].ActorRole != "support" || audit.Data[0].Reason != reason {
			t.Errorf("audit = %+v; want one read by support with reason %q", audit.Data, reason)
		}

		b.do("sign out", chromedp.Click(chromedp.ID("sign-out")))
		b.waitVisible("sign-in page after signing out", "view-signin")
	})

	t.Run("finance sees the API's totals and downloads the CSV", func(t *testing.T) {
		b := newTab(t, browser)
		b.open(e.url + "/console/")
		b.signIn(w.finance, "ledger · finance")
		b.waitVisible("finance figures", "finance-body")
		b.waitFor("budgets table", `document.querySelector('#budgets caption') !== null`)
		from := tabEval[string](b, "read the window", `document.getElementById('f-from').value`)
		to := tabEval[string](b, "read the window", `document.getElementById('f-to').value`)

		window := url.Values{"from": {from}, "to": {to}}.Encode()
		r := e.do(http.MethodGet, "/v1/usage?"+window, w.finance, nil, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET /v1/usage?%s: %d %s", window, r.status, r.body)
		}
		var report struct {
			Totals map[string]int64 `json:"totals"`
		}
		if err := json.Unmarshal(r.body, &report); err != nil {
			t.Fatal(err)
		}
		api := report.Totals
		if api["tasks"] != w.settled || api["cost_micros"] <= 0 {
			t.Fatalf("API totals %v: want the %d seeded tasks, else comparing would prove little", api, w.settled)
		}

		shown := shownNumbers(t, tabEval[map[string]string](b, "read the totals",
			`Object.fromEntries([...document.querySelectorAll('#fin-totals [data-total]')].map(d => [d.dataset.total, d.querySelector('dd').textContent]))`))
		if diff := cmp.Diff(api, shown); diff != "" {
			t.Errorf("totals on the page differ from GET /v1/usage (-api +page):\n%s", diff)
		}

		// The chart's own figures: one tooltip per day, summed here.
		days := tabEval[[]string](b, "read the chart",
			`[...document.querySelectorAll('#chart svg g > title')].map(t => t.textContent)`)
		chart := chartTotals(t, days)
		wantChart := map[string]int64{}
		for k := range chart {
			wantChart[k] = api[k]
		}
		if diff := cmp.Diff(wantChart, chart); diff != "" {
			t.Errorf("the chart's days do not add up to GET /v1/usage (-api +chart):\n%s", diff)
		}
		desc := tabEval[string](b, "read the chart", `document.getElementById('chart-svg-desc').textContent`)
		if want := "Total cost " + formatMicros(api["cost_micros"]) + "."; !strings.Contains(desc, want) {
			t.Errorf("chart description %q lacks %q", desc, want)
		}
		b.screenshot("finance")

		href := tabEval[string](b, "read the CSV link", `document.getElementById('csv-link').getAttribute('href')`)
		if want := "/console/api/v1/usage.csv?" + window; href != want {
			t.Errorf("CSV link = %q, want %q", href, want)
		}
		cookie := b.sessionCookie(e.url)
		if !cookie.HTTPOnly || cookie.SameSite != network.CookieSameSiteStrict {
			t.Errorf("session cookie: HttpOnly %v, SameSite %q; want HttpOnly and Strict", cookie.HTTPOnly, cookie.SameSite)
		}
		lines := fetchCSV(t, e.url+href, cookie)
		if want := "settled_at,task_id,owner_id,workload,model,source,input_tokens,output_tokens,cost_micros,charged_micros,shortfall_micros,cost,charged,cached_input_tokens,cache_write_tokens,reasoning_tokens"; lines[0] != want {
			t.Errorf("CSV header = %q, want %q", lines[0], want)
		}
		if got := int64(len(lines) - 1); got != api["tasks"] {
			t.Errorf("CSV has %d rows; the totals count %d tasks", got, api["tasks"])
		}

		b.gotoHash("support")
		b.waitRefusal("finance", "support")
	})

	t.Run("admin sees every page and the operations status", func(t *testing.T) {
		b := newTab(t, browser)
		b.open(e.url + "/console/")
		b.signIn(w.admin, "ops · admin")
		b.waitVisible("support page", "view-support")
		if got, want := b.navLinks(), []string{"Support", "Finance", "Operations", "Audit log", "Keys and limits"}; !slices.Equal(got, want) {
			t.Errorf("admin's pages = %q, want %q", got, want)
		}
		b.do("open operations", chromedp.Click(chromedp.CSS(`#nav a[data-view="ops"]`)))
		b.waitVisible("operations page", "view-ops")
		b.waitFor("operations status", `document.getElementById('ops-updated').textContent !== ''`)
		if tabEval[bool](b, "read the note", `!document.getElementById('ops-note').hidden`) {
			t.Errorf("operations note shown: %q", tabEval[string](b, "read the note", `document.getElementById('ops-note').textContent`))
		}
		sections := tabEval[[]string](b, "read the sections", `[...document.querySelectorAll('#ops-body h2')].map(h => h.textContent)`)
		if want := []string{"Queues", "Gates", "Budgets", "Oldest"}; !slices.Equal(sections, want) {
			t.Errorf("operations sections = %q, want %q (GET /v1/admin/status)", sections, want)
		}
		ops := tabEval[string](b, "read the operations page", `document.getElementById('ops-body').innerText`)
		if regexp.MustCompile(`(^|\s)0 s(\s|$)`).MatchString(ops) {
			t.Errorf("operations page shows \"0 s\" for an empty queue:\n%s", ops)
		}
		if strings.Contains(ops, "stale-key") {
			t.Errorf("operations page shows a provider key the catalog no longer has:\n%s", ops)
		}
		probe := tabEval[string](b, "read the idle key's gate",
			`[...document.querySelectorAll('#ops-body tr')].filter(r => r.cells[0] && r.cells[0].textContent.trim() === 'backup' && r.textContent.includes('breaker')).map(r => r.innerText).join('\n')`)
		if !strings.Contains(probe, "idle") || strings.Contains(probe, " ago") {
			t.Errorf("the open gate whose probe time has passed, nothing waiting, shows %q; want it idle, with no probe time; the page:\n%s", probe, ops)
		}
		b.screenshot("ops")

		// Keys and limits: every key the API lists, and never a secret.
		b.do("open keys", chromedp.Click(chromedp.CSS(`#nav a[data-view="keys"]`)))
		b.waitVisible("keys page", "view-keys")
		b.waitFor("keys", `document.querySelectorAll('#keys-table tbody tr[data-key-id]').length > 0`)
		r := e.do(http.MethodGet, "/v1/keys", w.admin, nil, nil)
		var keys struct {
			Data []struct {
				ID    string `json:"id"`
				Owner string `json:"owner"`
				Role  string `json:"role"`
			} `json:"data"`
		}
		if err := json.Unmarshal(r.body, &keys); err != nil || r.status != http.StatusOK || len(keys.Data) == 0 {
			t.Fatalf("GET /v1/keys: %d %s (%v)", r.status, r.body, err)
		}
		var want [][]string
		for _, k := range keys.Data {
			want = append(want, []string{k.ID, k.Owner, k.Role})
		}
		shown := tabEval[[][]string](b, "read the keys",
			`[...document.querySelectorAll('#keys-table tbody tr[data-key-id]')].map(r => [r.dataset.keyId, r.cells[1].textContent, r.cells[2].textContent])`)
		if diff := cmp.Diff(want, shown); diff != "" {
			t.Errorf("keys on the page differ from GET /v1/keys (-api +page):\n%s", diff)
		}
		for _, key := range []string{w.client, w.support, w.finance, w.admin} {
			if tabEval[bool](b, "look for a secret", `document.documentElement.outerHTML.includes('`+key+`')`) {
				t.Error("the keys page shows a key's secret")
			}
		}
		// Rate limits: every owner's, as GET /v1/limits lists them.
		b.waitFor("rate limits", `document.querySelectorAll('#limits-table tbody tr').length > 0`)
		if got := tabEval[string](b, "read the empty limits", `document.querySelector('#limits-table tbody').textContent`); got != "No owner has a rate limit." {
			t.Errorf("limits table with no limits shows %q", got)
		}
		if r := e.do(http.MethodPut, "/v1/limits/acme", w.admin,
			[]byte(`{"requests_per_minute": 6000, "workloads": {"batch": {"requests_per_minute": 60, "tokens_per_minute": 50000}}}`), nil); r.status != http.StatusOK {
			t.Fatalf("PUT /v1/limits/acme: %d %s", r.status, r.body)
		}
		b.do("reload keys and limits", chromedp.Click(chromedp.ID("keys-reload")))
		b.waitFor("the limits set", `document.querySelectorAll('#limits-table tbody tr').length === 2`)
		limitRows := tabEval[[][]string](b, "read the limits",
			`[...document.querySelectorAll('#limits-table tbody tr')].map(r => [...r.cells].map(c => c.textContent.trim()))`)
		if len(limitRows) != 2 || limitRows[0][0] != "acme" || limitRows[1][1] != "batch" ||
			!strings.Contains(limitRows[0][2], "6") || !strings.Contains(limitRows[1][3], "50") {
			t.Errorf("limits table = %q; want acme's owner row (6,000 requests) and its batch workload (50,000 tokens)", limitRows)
		}
		b.screenshot("keys")
	})

	t.Run("a client sees its own tasks and cannot open support or finance", func(t *testing.T) {
		b := newTab(t, browser)
		b.open(e.url + "/console/")
		b.signIn(w.client, "acme · client")
		b.waitVisible("own tasks", "view-tasks")
		b.waitFor("own tasks", `document.querySelectorAll('#tasks-table tbody a').length > 0`)
		if got := tabEval[int](b, "count tasks", `document.querySelectorAll('#tasks-table tbody a').length`); got != w.acmeTasks {
			t.Errorf("client sees %d tasks, want its own %d", got, w.acmeTasks)
		}
		if got, want := b.navLinks(), []string{"My tasks", "My spend"}; !slices.Equal(got, want) {
			t.Errorf("client's pages = %q, want %q", got, want)
		}
		costs := tabEval[[]string](b, "read the costs", `[...document.querySelectorAll('#tasks-table tbody tr')].map(r => r.cells[4].textContent)`)
		for _, c := range costs {
			if c == "—" || parseShown(t, c) <= 0 {
				t.Errorf("client's task costs %q: want each task's cost", costs)
			}
		}

		// Filters: by status and by day, as GET /v1/tasks takes them.
		b.do("filter on failed", chromedp.SetValue(chromedp.ID("t-status"), "failed"),
			chromedp.Click(chromedp.CSS(`#tasks-form button[type=submit]`)))
		b.waitFor("no failed task", `document.querySelector('#tasks-table tbody').textContent === 'No task matches.'`)
		today := time.Now().UTC().Format("2006-01-02")
		b.do("filter on succeeded today", chromedp.SetValue(chromedp.ID("t-status"), "succeeded"),
			chromedp.SetValue(chromedp.ID("t-from"), today), chromedp.SetValue(chromedp.ID("t-to"), today),
			chromedp.Click(chromedp.CSS(`#tasks-form button[type=submit]`)))
		b.waitFor("today's tasks", fmt.Sprintf(`document.querySelectorAll('#tasks-table tbody a').length === %d`, w.acmeTasks))

		// Its own spend: the finance page, for its owner only.
		b.do("open my spend", chromedp.Click(chromedp.CSS(`#nav a[data-view="finance"]`)))
		b.waitVisible("own spend", "finance-body")
		if tabEval[bool](b, "look for the owner field", `!document.getElementById('f-owner').parentElement.hidden`) {
			t.Error("a client's spend page offers to pick another owner")
		}
		b.waitFor("own totals", `document.querySelector('#fin-totals [data-total="tasks"] dd') !== null`)
		if got := parseShown(t, tabEval[string](b, "read the tasks total", `document.querySelector('#fin-totals [data-total="tasks"] dd').textContent`)); got != int64(w.acmeTasks) {
			t.Errorf("client's spend counts %d tasks, want its own %d", got, w.acmeTasks)
		}

		// An erased task still shows what it keeps beside its tombstone.
		if r := e.do(http.MethodDelete, "/v1/tasks/"+w.teapot.ID+"/replay", w.client, nil, nil); r.status != http.StatusOK {
			t.Fatalf("erase %s: %d %s", w.teapot.ID, r.status, r.body)
		}
		b.gotoHash("task/" + w.teapot.ID)
		b.waitVisible("tombstone", "task-gone")
		b.waitVisible("kept metadata", "task-summary")
		kept := tabEval[string](b, "read the kept metadata", `document.getElementById('task-facts').innerText`)
		if !strings.Contains(kept, "acme") || !strings.Contains(kept, w.teapot.Model) || !strings.Contains(kept, "succeeded") {
			t.Errorf("erased task shows %q; want its kept owner, model and status", kept)
		}
		b.gotoHash("tasks")
		b.waitVisible("own tasks", "view-tasks")

		for _, page := range []string{"support", "ops"} {
			b.gotoHash(page)
			b.waitRefusal("client", page)
			b.gotoHash("tasks")
			b.waitVisible("own tasks", "view-tasks")
		}
		// Not only hidden: the API refuses the reads behind those pages.
		for _, path := range []string{"/v1/replays?owner=globex", "/v1/usage?owner=globex", "/v1/audit"} {
			status := tabEval[int](b, "read "+path, `fetch('/console/api`+path+`').then(r => r.status)`)
			if status != http.StatusForbidden {
				t.Errorf("client's console reading %s: %d, want 403", path, status)
			}
		}

		// A task queued behind its provider key's open breaker says so at
		// the top of its page, as GET /v1/tasks/{id} tells.
		if _, err := e.pool.Exec(t.Context(), `INSERT INTO provider_keys (key, state, next_probe_at, opened_at, reason_class, reason_code)
			VALUES ('workers', 'open', now() + interval '1 hour', now(), 'exhausted', 'insufficient_quota')`); err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(map[string]any{"model": "cf-model", "max_tokens": 10,
			"messages": []map[string]string{{"role": "user", "content": "wait for the gate"}}})
		queued := e.post(w.client, "order-44", body, nil).task(t)
		eventually.Wait(t, "the task to wait behind the gate", func() bool {
			var got tasks.Task
			r := e.do(http.MethodGet, "/v1/tasks/"+queued.ID, w.client, nil, nil)
			return json.Unmarshal(r.body, &got) == nil && got.Error != nil && strings.HasPrefix(got.Error.Message, "Waiting:")
		})
		b.gotoHash("task/" + queued.ID)
		b.waitVisible("why the task waits", "task-waiting")
		if got := tabEval[string](b, "read why it waits", `document.getElementById('task-waiting').textContent`); !strings.Contains(got, "gate of its provider key is open") {
			t.Errorf("a task behind an open breaker shows %q; want that its key's gate is open", got)
		}
	})
}

// seedConsole makes the keys and the finished tasks the pages show.
func seedConsole(t *testing.T, e *env) consoleWorld {
	t.Helper()
	// Staff owners spend nothing, so they get keys and no budget.
	staff := func(owner string, role accounts.Role) string {
		t.Helper()
		key, err := e.accounts.CreateKey(t.Context(), owner, role, "")
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	w := consoleWorld{
		client:  e.owner("acme", accounts.RoleClient, 1_000_000),
		support: staff("helpdesk", accounts.RoleSupport),
		finance: staff("ledger", accounts.RoleFinance),
		admin:   staff("ops", accounts.RoleAdmin),
	}
	globex := e.owner("globex", accounts.RoleClient, 1_000_000)
	// initech's one task spends 30 of its 40: past the 70 % alert, so the
	// finance and operations pages have a budget near its limit to show.
	initech := e.owner("initech", accounts.RoleClient, 40)

	answer := "Refund approved for the blue kettle; we will confirm to " + plantedEmail + "."
	e.fake.Script(fake.Scripted{Status: 200, Body: `{"id":"x","object":"chat.completion","created":1,"model":"test-model",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":` + mustQuote(answer) + `},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`})
	w.kettle = finishedTask(t, e, w.client, "order-42", "Please refund the blue kettle. Write to "+plantedEmail+" when done.")
	if w.kettle.Status != tasks.StatusSucceeded {
		t.Fatalf("seed task %s: %+v", w.kettle.Status, w.kettle.Error)
	}
	w.teapot = finishedTask(t, e, w.client, "order-43", "track the red teapot")
	w.acmeTasks = 2
	finishedTask(t, e, globex, "inv-7", "summarise invoice 7 for the green lamp")
	body, _ := json.Marshal(map[string]any{"model": "backup-model", "max_tokens": 10,
		"messages": []map[string]string{{"role": "user", "content": "translate invoice 8 into French"}}})
	r := e.post(globex, "inv-8", body, map[string]string{"Prefer": "wait=30"})
	e.waitFinished(globex, r.task(t).ID)
	finishedTask(t, e, initech, "t-1", "draft a status update")
	w.settled = 5
	// A provider key whose breaker is open, whose probe time has passed and
	// on which nothing waits: operations shows it idle, never a probe time
	// in the past. And a key the catalog no longer has: operations omits it.
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO provider_keys (key, state, next_probe_at, opened_at, reason_class, reason_code)
		VALUES ('backup', 'open', now() - interval '1 hour', now() - interval '2 hours', 'exhausted', 'quota'),
		       ('stale-key', 'open', now() - interval '1 hour', now() - interval '2 hours', 'exhausted', 'quota')`); err != nil {
		t.Fatal(err)
	}
	return w
}

// chromiumPath returns the browser to drive. Without one, a developer's
// run skips; CI must have it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatal("CI is set but chromium is not installed: .ci/run installs it (apt-get install chromium); the console's browser tests cannot run")
	}
	t.Skip("chromium not found: install it (apt-get install chromium) to run the console's browser tests")
	return ""
}

// startChromium starts one headless browser for the whole test; each
// subtest opens its own tab in its own browser context, so their cookies
// (sessions) are apart.
func startChromium(t *testing.T, path string) context.Context {
	t.Helper()
	bounded, cancelAll := context.WithTimeout(context.Background(), browserBudget)
	alloc, cancelAlloc := chromedp.NewExecAllocator(bounded,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox, // as root, as in CI
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.WindowSize(1280, 900),
	) // no UserDataDir: chromedp makes a fresh one and removes it
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancelAll() })
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return browser
}

// tab is one browser tab in a browser context of its own.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string // uncaught exceptions and console.error calls
}

func newTab(t *testing.T, browser context.Context) *tab {
	t.Helper()
	b := &tab{t: t}
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext(), chromedp.WithListener(b.listen))
	b.ctx = ctx
	t.Cleanup(func() {
		cancel()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("browser: %s", e)
		}
	})
	// The first action opens the tab and binds it to the context it runs
	// with, so it runs with the tab's own, which browserBudget bounds: a
	// step's timeout would close the tab when the step ends.
	err := chromedp.Do(ctx,
		chromedp.EmulateViewport(1280, 900),
		// Each tab counts as focused, so the page never sees itself hidden.
		chromedp.Func(func(ctx context.Context, tt *chromedp.Target) error {
			_, err := cdp.Call(ctx, tt, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
			return err
		}))
	if err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return b
}

// listen runs in the tab's event loop: it only records.
func (b *tab) listen(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = "uncaught: " + ev.ExceptionDetails.Text
		if ev.ExceptionDetails.Exception != nil {
			msg += " " + ev.ExceptionDetails.Exception.Description
		}
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		msg = "console.error:"
		for _, a := range ev.Args {
			msg += " " + string(a.Value) + a.Description
		}
	default:
		return
	}
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// do runs steps within one stepTimeout, failing the test with what it was
// doing.
func (b *tab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// tabEval evaluates js in the page (awaiting a promise) and decodes its
// value as T.
func tabEval[T any](b *tab, what, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("%s: %s: %v", what, js, err)
	}
	return v
}

// waitFor waits until the JavaScript condition holds in the page.
func (b *tab) waitFor(what, cond string) {
	b.t.Helper()
	// No timeout of the poll's own: the step's bounds it.
	b.do("wait for "+what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(pollEvery), chromedp.WithPollingTimeout(0)))
}

func (b *tab) waitVisible(what, id string) {
	b.t.Helper()
	b.do("wait for "+what, chromedp.WaitVisible(chromedp.ID(id)))
}

func (b *tab) open(u string) {
	b.t.Helper()
	b.do("load "+u, chromedp.Navigate(u))
	b.waitVisible("sign-in page", "view-signin")
}

// gotoHash goes to a page as a typed address would: the hash changes,
// the document stays.
func (b *tab) gotoHash(page string) {
	b.t.Helper()
	b.do("go to #"+page, chromedp.Evaluate[chromedp.Void](`location.hash = '#`+page+`'; undefined`))
}

// signIn types the key into the form and waits for the role's chrome.
func (b *tab) signIn(key, who string) {
	b.t.Helper()
	b.do("sign in",
		chromedp.SendKeys(chromedp.ID("signin-key"), key),
		chromedp.Click(chromedp.CSS(`#signin-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("who")))
	if got := tabEval[string](b, "read who is signed in", `document.getElementById('who-text').textContent`); got != who {
		b.t.Errorf("signed in as %q, want %q", got, who)
	}
	if tabEval[bool](b, "look for the key", `document.documentElement.outerHTML.includes('`+key+`') || document.cookie.includes('`+key+`')`) {
		b.t.Error("the page holds the API key after sign-in")
	}
}

// waitRefusal waits for the page that tells a role it cannot open page.
func (b *tab) waitRefusal(role, page string) {
	b.t.Helper()
	b.waitVisible("refusal of #"+page, "view-none")
	want := "A " + role + " key cannot open this page."
	if got := tabEval[string](b, "read the refusal", `document.getElementById('none-text').textContent`); got != want {
		b.t.Errorf("#%s as %s shows %q, want %q", page, role, got, want)
	}
	if tabEval[bool](b, "look for the page", `!document.getElementById('view-`+page+`').hidden`) {
		b.t.Errorf("#%s as %s: the page is shown beside the refusal", page, role)
	}
}

// navLinks returns the console pages the navigation offers.
func (b *tab) navLinks() []string {
	b.t.Helper()
	return tabEval[[]string](b, "read the navigation",
		`[...document.querySelectorAll('#nav li')].filter(l => !l.hidden).map(l => l.textContent.trim())`)
}

// sessionCookie returns the console's session cookie from the browser's
// jar; the page itself cannot read it (HttpOnly).
func (b *tab) sessionCookie(base string) *network.Cookie {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/console/"}})
	if err != nil {
		b.t.Fatalf("read cookies: %v", err)
	}
	for _, c := range res.Cookies {
		if c.Name == "tollgate_console" {
			return c
		}
	}
	b.t.Fatalf("no tollgate_console cookie in the browser (%d cookies)", len(res.Cookies))
	return nil
}

// screenshot saves the whole page as docs/img/console-<name>.png when
// TOLLGATE_SCREENSHOTS=1.
func (b *tab) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("TOLLGATE_SCREENSHOTS") != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "docs", "img")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// fetchCSV downloads the CSV as the browser would, with the session
// cookie, and returns its lines.
func fetchCSV(t *testing.T, u string, cookie *network.Cookie) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stepTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: cookie.Name, Value: cookie.Value})
	res, err := (&http.Client{}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); res.StatusCode != http.StatusOK || !strings.HasPrefix(ct, "text/csv") {
		t.Fatalf("GET %s: %d %s, want 200 text/csv", u, res.StatusCode, ct)
	}
	var lines []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil || len(lines) == 0 {
		t.Fatalf("read CSV: %d lines, %v", len(lines), err)
	}
	return lines
}

// shownNumbers turns figures as the page writes them ("1,234" or
// "0.000054", micros with six decimals) back into integers.
func shownNumbers(t *testing.T, shown map[string]string) map[string]int64 {
	t.Helper()
	out := make(map[string]int64, len(shown))
	for k, s := range shown {
		out[k] = parseShown(t, s)
	}
	return out
}

func parseShown(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.NewReplacer(",", "", ".", "").Replace(strings.TrimSpace(s)), 10, 64)
	if err != nil {
		t.Fatalf("figure %q on the page: %v", s, err)
	}
	return n
}

// formatMicros writes micros as the page does: thousands separated, six
// decimals.
func formatMicros(m int64) string {
	sign := ""
	if m < 0 {
		sign, m = "-", -m
	}
	whole := strconv.FormatInt(m/1_000_000, 10)
	for i := len(whole) - 3; i > 0; i -= 3 {
		whole = whole[:i] + "," + whole[i:]
	}
	return fmt.Sprintf("%s%s.%06d", sign, whole, m%1_000_000)
}

var chartDay = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}: reported (\S+), estimated (\S+), possibly charged (\S+); cost (\S+)$`)

// chartTotals sums the chart's days, as their tooltips give them, under
// the names of the API's totals.
func chartTotals(t *testing.T, days []string) map[string]int64 {
	t.Helper()
	if len(days) == 0 {
		t.Fatal("the chart has no days")
	}
	keys := []string{"reported_micros", "estimated_micros", "possibly_charged_micros", "cost_micros"}
	sum := make(map[string]int64, len(keys))
	for _, d := range days {
		m := chartDay.FindStringSubmatch(d)
		if m == nil {
			t.Fatalf("chart day %q: not in the expected form", d)
		}
		for i, k := range keys {
			sum[k] += parseShown(t, m[i+1])
		}
	}
	return sum
}
