package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/tools/bench/stats"
)

// AgentConfig is the agent scenario: the throughput scenario's steps with
// agent-sized requests (see AgentBody) instead of a one-line prompt, so the
// cost of a large request (parsing, hashing, redaction, sealing, storing
// it and its record) shows against the ceiling of the same statements with
// rows of that size.
type AgentConfig struct {
	Rates        []float64     // arrivals per second, one step each (required)
	ModelLatency time.Duration // the model's latency in every step; default 0
	Shape        AgentShape    // zero takes DefaultAgentShape
	// Ceiling is the pgbench ceiling with rows of the agent request's
	// size; its Rows are filled from the request. nil skips it.
	Ceiling *CeilingConfig
}

func (c *AgentConfig) defaults(proxy bool) error {
	if len(c.Rates) == 0 {
		return errors.New("bench: the agent scenario needs at least one rate")
	}
	for _, r := range c.Rates {
		if !(r > 0) || r > 1e6 {
			return fmt.Errorf("bench: agent rate %v must be > 0", r)
		}
	}
	if c.ModelLatency < 0 {
		return fmt.Errorf("bench: agent model latency %v must be >= 0", c.ModelLatency)
	}
	if c.ModelLatency > 0 && !proxy {
		return fmt.Errorf("bench: agent model latency %v needs the latency proxy (-proxy-addr)", c.ModelLatency)
	}
	if c.Shape == (AgentShape{}) {
		c.Shape = DefaultAgentShape
	}
	return nil
}

// AgentResult is the agent scenario's outcome.
type AgentResult struct {
	RequestBytes int         `json:"request_bytes"`
	Tools        int         `json:"tools"`
	Messages     int         `json:"messages"`
	Ceiling      *Ceiling    `json:"ceiling,omitempty"`
	Steps        []AgentStep `json:"steps"`
	Summary      Sustained   `json:"summary"`
}

// AgentStep is one rate of the agent scenario: a throughput step, and its
// costs per KiB of request.
type AgentStep struct {
	Step
	// ServerCPUMSPerKiB and PostgresCPUMSPerKiB are CPU per task divided
	// by the request's size: what a KiB of request costs, to set against
	// the small request's CPU per task.
	ServerCPUMSPerKiB   float64 `json:"server_cpu_ms_per_kib"`
	PostgresCPUMSPerKiB float64 `json:"postgres_cpu_ms_per_kib"`
}

// agent runs the agent scenario: the ceiling with agent-sized rows, a
// warm-up, then every rate, each task sending the agent request.
func (s *stepper) agent(ctx context.Context, rep *Report, p *printer) (AgentResult, error) {
	cfg := s.cfg.Agent
	body, err := AgentBody(cfg.Shape)
	if err != nil {
		return AgentResult{}, err
	}
	res := AgentResult{RequestBytes: len(body), Tools: cfg.Shape.Tools, Messages: cfg.Shape.Messages}
	kib := float64(len(body)) / 1024
	p.line("\nagent: requests of %.1f KiB (%d tools, %d messages), model latency %s", kib, res.Tools, res.Messages, cfg.ModelLatency)
	if cfg.Ceiling != nil {
		cc := *cfg.Ceiling
		if cc.Rows == (CeilingRows{}) {
			cc.Rows = RowsFor(body)
		}
		if res.Ceiling, err = s.ceiling(ctx, cc, rep, p); err != nil {
			return res, err
		}
	}
	defer s.lowerPriority(rep)()

	as := *s
	as.load = newLoadClient(s.cfg.BaseURL, s.cfg.APIKey, body, s.cfg.PollInterval, s.cfg.LongPoll, s.cfg.TaskTimeout, s.cfg.MaxInFlight)
	as.runID = s.runID + "-agent"
	if err := as.vacuumBefore(ctx, "the agent scenario"); err != nil {
		return res, err
	}
	if err := as.warmUp(ctx, p, cfg.Rates[0], "-warmup-"); err != nil {
		return res, err
	}
	p.stepHeader(cfg.ModelLatency)
	for _, rate := range cfg.Rates {
		st, err := as.step(ctx, cfg.ModelLatency, rate)
		if err != nil {
			return res, err
		}
		if res.Ceiling != nil && res.Ceiling.BestTPS > 0 {
			st.CeilingRatio = st.TasksPerS / res.Ceiling.BestTPS
		}
		res.Steps = append(res.Steps, AgentStep{Step: st, ServerCPUMSPerKiB: st.ServerCPUMSPerTask / kib, PostgresCPUMSPerKiB: st.PostgresCPUMSPerTask / kib})
		p.step(st)
		p.agentStep(res.Steps[len(res.Steps)-1])
	}
	steps := make([]Step, len(res.Steps))
	for i, st := range res.Steps {
		steps[i] = st.Step
	}
	res.Summary = bestSustained(steps, stats.MS(cfg.ModelLatency))
	return res, nil
}

// agentStep prints the agent scenario's figures of a step, under its row.
func (p *printer) agentStep(s AgentStep) {
	ratio, wal := "no ceiling", "-"
	if s.CeilingRatio > 0 {
		ratio = fmt.Sprintf("%.3f of the agent ceiling", s.CeilingRatio)
	}
	if s.PG != nil {
		wal = bytesIEC(s.PG.WALBytesPerTask)
	}
	p.line("       agent: %.1f tasks/s = %s; cpu per task srv / pg %.2f / %.2f ms, per KiB of request %.3f / %.3f ms; WAL %s per task",
		s.TasksPerS, ratio, s.ServerCPUMSPerTask, s.PostgresCPUMSPerTask, s.ServerCPUMSPerKiB, s.PostgresCPUMSPerKiB, wal)
}

// agentSummary adds the agent scenario's lines to the summary.
func (p *printer) agentSummary(a *AgentResult) {
	if a == nil {
		return
	}
	if c := a.Ceiling; c != nil {
		var wal float64
		for _, run := range c.Runs {
			if run.Clients == c.BestClients {
				wal = run.Cost.WALBytesPerTask
			}
		}
		p.line("  agent ceiling (pgbench, rows of %s requests): %.1f tasks/s at %d clients, %s WAL/task",
			bytesIEC(float64(c.RequestBytes)), c.BestTPS, c.BestClients, bytesIEC(wal))
	}
	s := a.Summary
	if s.TasksPerS == 0 {
		p.line("  agent (%s requests): %s", bytesIEC(float64(a.RequestBytes)), s.Note)
		return
	}
	ratio, note := "", ""
	if s.CeilingRatio > 0 {
		ratio = fmt.Sprintf(" = %.3f of the agent ceiling", s.CeilingRatio)
	}
	if s.Note != "" {
		note = " (" + s.Note + ")"
	}
	p.line("  agent (%s requests): sustained %.1f tasks/s at %g/s offered, admission p99 %.1f ms%s%s",
		bytesIEC(float64(a.RequestBytes)), s.TasksPerS, s.Rate, s.AdmissionP99MS, ratio, note)
}
