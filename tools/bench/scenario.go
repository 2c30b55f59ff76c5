package bench

import (
	"fmt"
	"slices"
	"strings"
)

// The scenarios the harness runs, in the order it runs them. The numbers
// are the scenarios' own: (4) and (5) are the data scenarios of
// tools/bench/bigdata.
const (
	// ScenarioThroughput (1) offers each rate open loop at each model
	// latency and finds the highest sustained one, against the pgbench
	// ceiling.
	ScenarioThroughput = "throughput"
	// ScenarioAgent is throughput's steps with agent-sized
	// requests (tools, a tool loop's history), against the ceiling of the
	// same statements with rows of that size.
	ScenarioAgent = "agent"
	// ScenarioInFlight (2) submits thousands of tasks against a slow model
	// and watches the server's memory and goroutines until all finished.
	ScenarioInFlight = "inflight"
	// ScenarioDuplicates (3) hammers the server with replayed duplicate
	// POSTs and with GET polls of existing tasks, closed loop.
	ScenarioDuplicates = "duplicates"
)

var scenarios = []string{ScenarioThroughput, ScenarioAgent, ScenarioInFlight, ScenarioDuplicates}

// ParseScenarios reads a comma-separated list of scenario names, or "all".
// It returns them in the harness's order without repeats, or an error
// naming the first unknown one or saying the list is empty.
func ParseScenarios(s string) ([]string, error) {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		switch {
		case f == "":
			continue
		case f == "all":
			return slices.Clone(scenarios), nil
		case !slices.Contains(scenarios, f):
			return nil, fmt.Errorf("bench: unknown scenario %q (want %s or all)", f, strings.Join(scenarios, ", "))
		}
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: no scenario (want %s or all)", strings.Join(scenarios, ", "))
	}
	// Canonical order, so a run reads the same whatever order was asked.
	var ordered []string
	for _, sc := range scenarios {
		if slices.Contains(out, sc) {
			ordered = append(ordered, sc)
		}
	}
	return ordered, nil
}

func (c *Config) runs(scenario string) bool { return slices.Contains(c.Scenarios, scenario) }
