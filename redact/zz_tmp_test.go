package redact

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestZZTiming(t *testing.T) {
	data, _ := os.ReadFile("testdata/fuzz/FuzzRedact/5e6884b72dc242ea")
	line := strings.SplitN(string(data), "\n", 2)[1]
	line = strings.TrimSpace(line)
	in, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "string("), ")"))
	if err != nil { t.Fatal(err) }
	r := newRedactor(t)
	start := time.Now()
	for range 100 { r.Record().Text(in) }
	t.Logf("len %d: %v per Text", len(in), time.Since(start)/100)
}
