package bigdata

import (
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Shape is the history a seed writes: how many tasks and ledger rows, for
// how many owners, over which window.
type Shape struct {
	// Tasks is the number of rows in tasks, each finished, with its
	// attempts and replay records.
	Tasks int64
	// Ledger is the number of budget_ledger rows to aim at: settled tasks
	// are added until their reserve, release and settle rows reach it
	// (the count is approximate; the seed reports the real one). 0 seeds
	// no money at all.
	Ledger int64
	// Owners is how many owners share the history, org-000 the busiest.
	Owners int
	// Span is how far back the oldest task lies from End.
	Span time.Duration
	// End is when the newest task was created.
	End time.Time
	// Batch is how many tasks one INSERT statement writes.
	Batch int64
}

// DefaultShape is the data scenarios' sizes: 1,000,000 tasks and about
// 10,000,000 ledger rows over 90 days for 40 owners, ending at end.
func DefaultShape(end time.Time) Shape {
	return Shape{Tasks: 1_000_000, Ledger: 10_000_000, Owners: 40, Span: 90 * 24 * time.Hour,
		End: end.UTC().Truncate(time.Second), Batch: 100_000}
}

// Validate returns an error naming the first field out of range.
func (s Shape) Validate() error {
	switch {
	case s.Tasks < 0 || s.Ledger < 0:
		return errors.New("bigdata: sizes must not be negative")
	case s.Tasks == 0 && s.Ledger == 0:
		return errors.New("bigdata: nothing to seed (tasks and ledger are both 0)")
	case s.Owners < 1 || s.Owners > 1000:
		return fmt.Errorf("bigdata: owners must be 1-1000, got %d", s.Owners)
	case s.Span < time.Hour:
		return fmt.Errorf("bigdata: span must be at least an hour, got %s", s.Span)
	case s.End.IsZero():
		return errors.New("bigdata: end time is required")
	case s.Batch < 1:
		return fmt.Errorf("bigdata: batch must be positive, got %d", s.Batch)
	}
	return nil
}

// The shares of task outcomes and shapes. The seed's SQL and the
// measurement's choice of queries both read them.
const (
	shareSucceeded = 0.93 // the rest fail (failedShare) or are canceled while queued
	shareFailed    = 0.04
	shareRetried   = 0.06 // of tasks that ran: a transient failure, then the final attempt
	shareLong      = 0.20 // a follow-up question after an earlier answer
	shareErased    = 0.005
	shareEstimated = 0.02 // settled on Tollgate's token estimate
	skuCount       = 20_000
	customerCount  = 50_000
)

// ledgerRowsPerTask is the expected number of ledger rows of one task:
// reserve and release always, settle when it succeeded.
const ledgerRowsPerTask = 2 + shareSucceeded

// LedgerTasks is how many tasks the money seed covers to reach s.Ledger
// ledger rows.
func (s Shape) LedgerTasks() int64 {
	if s.Ledger <= 0 {
		return 0
	}
	return max(1, int64(float64(s.Ledger)/ledgerRowsPerTask+0.5))
}

// Universe is the number of task indexes the history spans. The tasks table
// and the ledger each take an evenly spread subset of 1..Universe (the
// larger of the two takes all of it), and every attribute of a task is a
// function of its index: where they overlap they describe the same task.
func (s Shape) Universe() int64 { return max(s.Tasks, s.LedgerTasks()) }

// spread maps the j-th (1-based) of n evenly spread members of 1..u to its
// index, ceil(j*u/n): strictly increasing in j, from about u/n up to u.
func spread(j, n, u int64) int64 { return (j*u + n - 1) / n }

// Batches splits 1..n into consecutive ranges of at most size.
func Batches(n, size int64) [][2]int64 {
	var out [][2]int64
	for lo := int64(1); lo <= n; lo += size {
		out = append(out, [2]int64{lo, min(lo+size-1, n)})
	}
	return out
}

// TaskID is the id the seed gives the task of index i: an MD5 of the index
// shaped as a version 4 UUID. It mirrors taskIDSQL.
func TaskID(i int64) string {
	sum := md5.Sum([]byte(idPrefix + strconv.FormatInt(i, 10)))
	h := hex.EncodeToString(sum[:])
	nibble, _ := strconv.ParseUint(h[16:17], 16, 8)
	v := h[:12] + "4" + h[13:16] + string("89ab"[nibble%4]) + h[17:]
	return v[:8] + "-" + v[8:12] + "-" + v[12:16] + "-" + v[16:20] + "-" + v[20:]
}

const idPrefix = "tollgate-bigdata/"

// OwnerID names the owner of rank k (0 the busiest).
func OwnerID(k int) string { return fmt.Sprintf("org-%03d", k) }

// model is one model of the seeded catalog; prices are micros per million
// tokens.
type model struct {
	Name, Provider, ProviderModel string
	Share                         float64
	InPrice, OutPrice             int64
}

// models is the seeded mix, most used first.
var models = []model{
	{"gpt-4o-mini", "openai:primary", "gpt-4o-mini-2024-07-18", 0.45, 150_000, 600_000},
	{"gpt-4o", "openai:primary", "gpt-4o-2024-08-06", 0.20, 2_500_000, 10_000_000},
	{"claude-3-5-haiku", "anthropic:primary", "claude-3-5-haiku-20241022", 0.15, 800_000, 4_000_000},
	{"claude-sonnet-4", "anthropic:primary", "claude-sonnet-4-20250514", 0.10, 3_000_000, 15_000_000},
	{"llama-3.1-8b", "cloudflare:primary", "@cf/meta/llama-3.1-8b-instruct", 0.10, 280_000, 830_000},
}

// Models returns the seeded model names, most used first.
func Models() []string {
	out := make([]string, len(models))
	for i, m := range models {
		out[i] = m.Name
	}
	return out
}

// commonWords name what a request is about: one of them is in every
// request, so each matches about 1 in 16 records.
var commonWords = []string{
	"refund", "invoice", "shipping", "password", "cancellation", "upgrade", "warranty", "delivery",
	"billing", "login", "discount", "return", "subscription", "outage", "complaint", "receipt",
}

// topicWords name the team that flagged a request: about 1 in 64 records
// each.
var topicWords = []string{
	"logistics", "payments", "fraud", "onboarding", "security", "mobile", "checkout", "catalog",
	"pricing", "partners", "compliance", "inventory", "loyalty", "marketing", "warehouse", "returns",
	"escalations", "enterprise", "retail", "wholesale", "identity", "search", "reviews", "recommendations",
	"notifications", "accounts", "tax", "customs", "insurance", "claims", "procurement", "payroll",
	"analytics", "reporting", "integrations", "api", "web", "desktop", "tablet", "kiosk",
	"voice", "email", "chat", "social", "community", "forum", "docs", "training",
	"sales", "renewals", "trials", "education", "healthcare", "travel", "hospitality", "automotive",
	"energy", "telecom", "media", "gaming", "sports", "music", "fashion", "grocery",
}

// CommonWords returns the words found in about 1 in 16 records each.
func CommonWords() []string { return append([]string(nil), commonWords...) }

// TopicWords returns the words found in about 1 in 64 records each.
func TopicWords() []string { return append([]string(nil), topicWords...) }

// SKU returns the item code of number n (0 ≤ n < 20,000); each is in about
// one record in 20,000.
func SKU(n int) string { return "sku" + strconv.Itoa(10_000+n%skuCount) }

// OrderNumber is the order a task's request names: unique per task.
func OrderNumber(i int64) string { return strconv.FormatInt(100_000+i, 10) }

// IdempotencyKey is the key the seeded task of index i was submitted with.
func IdempotencyKey(i int64) string { return "order-" + OrderNumber(i) + "-reply" }
