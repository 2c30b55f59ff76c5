package prometheus_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	promparser "github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/template"
)

// pending are metrics announced by a feature still in flight, with their
// labels. The rules may use them before package metrics defines them; once
// it does, the definition in package metrics is what the rules are checked
// against, and the entry here is dead (the test says so).
var pending = map[string]metric{}

type metric struct {
	labels    map[string]bool
	histogram bool
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// TestAlertRules loads alerts.yml as Prometheus would and checks that each
// rule only uses metrics and labels Tollgate exports.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	groups, errs := rulefmt.ParseFile("alerts.yml", false)
	for _, err := range errs {
		t.Errorf("alerts.yml: %v", err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	defined := definedMetrics(t, "../../metrics")
	known := maps.Clone(defined)
	for name, m := range pending {
		if _, ok := defined[name]; ok {
			t.Logf("%s is now defined in package metrics: remove it from pending", name)
			continue
		}
		known[name] = m
	}

	var alerts []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: recording rule %q: this file holds alerts only", g.Name, r.Record)
				continue
			}
			alerts = append(alerts, r.Alert)
			t.Run(r.Alert, func(t *testing.T) {
				checkRule(t, r, known)
			})
		}
	}
	// The README explains each of these; a rule dropped or renamed here
	// must be dropped or renamed there too.
	want := []string{
		"TollgateFallbackRateHigh", "TollgateBreakerOpen", "TollgateBudgetAt90Percent",
		"TollgateQueueStalled", "TollgateUnclassifiedProviderErrors", "TollgateBudgetOrphansReaped", "TollgateImplausibleUsage",
		"TollgateShedding", "TollgateProviderErrorRatioHigh", "TollgateHTTP5xxRateHigh", "TollgateAdmissionSlow",
		"TollgateDBPoolWaiting",
	}
	if !slices.Equal(alerts, want) {
		t.Errorf("alerts = %v\nwant %v", alerts, want)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts {
		if !strings.Contains(string(readme), "`"+a+"`") {
			t.Errorf("deploy/README.md does not explain `%s`", a)
		}
	}
}

var labelRef = regexp.MustCompile(`\$labels\.([A-Za-z_][A-Za-z0-9_]*)`)

func checkRule(t *testing.T, r rulefmt.Rule, known map[string]metric) {
	t.Helper()
	expr, err := promparser.ParseExpr(r.Expr)
	if err != nil {
		t.Fatalf("parse expr: %v", err)
	}
	promparser.Inspect(expr, func(n promparser.Node, _ []promparser.Node) error {
		if vs, ok := n.(*promparser.VectorSelector); ok {
			checkSelector(t, vs, known)
		}
		return nil
	})
	out := outputLabels(t, expr, known)

	if sev := r.Labels["severity"]; sev != "critical" && sev != "warning" {
		t.Errorf("severity label = %q, want critical or warning", sev)
	}
	for _, k := range []string{"summary", "description"} {
		if strings.TrimSpace(r.Annotations[k]) == "" {
			t.Errorf("annotation %s is missing", k)
		}
	}
	// Every label an annotation prints must be on the alert, and every
	// template must expand, as Prometheus would expand it when firing.
	labels := map[string]string{}
	for l := range out {
		labels[l] = "example-" + l
	}
	data := template.AlertTemplateData(labels, nil, "", promql.Sample{F: 0.5})
	header := "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}"
	for name, text := range r.Annotations {
		for _, m := range labelRef.FindAllStringSubmatch(text, -1) {
			if !out[m[1]] {
				t.Errorf("annotation %s prints $labels.%s, but the alert only carries %v", name, m[1], slices.Sorted(maps.Keys(out)))
			}
		}
		exp := template.NewTemplateExpander(context.Background(), header+text, name, data, model.Now(), nil, nil, []string{"missingkey=error"})
		got, err := exp.Expand()
		if err != nil {
			t.Errorf("annotation %s: expand: %v", name, err)
		} else if strings.Contains(got, "<no value>") {
			t.Errorf("annotation %s expands with a missing value:\n%s", name, got)
		}
	}
}

// checkSelector fails the test when a selector names a metric or a label
// Tollgate does not export.
func checkSelector(t *testing.T, vs *promparser.VectorSelector, known map[string]metric) {
	t.Helper()
	name, m, ok := lookup(vs.Name, known)
	if !ok {
		t.Errorf("selector %s: no metric %q in package metrics (renamed?)", vs, vs.Name)
		return
	}
	for _, lm := range vs.LabelMatchers {
		if lm.Name != model.MetricNameLabel && !m.labels[lm.Name] {
			t.Errorf("selector %s: %s has no label %q; it has %v", vs, name, lm.Name, slices.Sorted(maps.Keys(m.labels)))
		}
	}
}

// lookup finds a series name among the metrics, including a histogram's
// _bucket (with its le label), _sum and _count series.
func lookup(series string, known map[string]metric) (string, metric, bool) {
	if m, ok := known[series]; ok && !m.histogram {
		return series, m, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(series, suffix)
		if m, found := known[base]; ok && found && m.histogram {
			if suffix == "_bucket" {
				m.labels = maps.Clone(m.labels)
				m.labels["le"] = true
			}
			return base, m, true
		}
	}
	return "", metric{}, false
}

// outputLabels returns the labels the expression's result series carry,
// following PromQL's rules for the constructs the alert rules use, and
// checks on the way that every by (...) and on (...) label exists below it.
func outputLabels(t *testing.T, e promparser.Expr, known map[string]metric) map[string]bool {
	t.Helper()
	switch e := e.(type) {
	case *promparser.ParenExpr:
		return outputLabels(t, e.Expr, known)
	case *promparser.NumberLiteral:
		return nil
	case *promparser.VectorSelector:
		_, m, _ := lookup(e.Name, known)
		return m.labels
	case *promparser.MatrixSelector:
		return outputLabels(t, e.VectorSelector, known)
	case *promparser.Call:
		for _, a := range e.Args {
			if a.Type() == promparser.ValueTypeVector || a.Type() == promparser.ValueTypeMatrix {
				return outputLabels(t, a, known)
			}
		}
		return nil
	case *promparser.AggregateExpr:
		in := outputLabels(t, e.Expr, known)
		if e.Without {
			t.Errorf("%s: without (...) is not supported by this test; use by (...)", e)
			return nil
		}
		for _, l := range e.Grouping {
			if !in[l] {
				t.Errorf("%s: groups by %q, which the series below do not carry (%v)", e, l, slices.Sorted(maps.Keys(in)))
			}
		}
		return set(e.Grouping...)
	case *promparser.BinaryExpr:
		lhs, rhs := outputLabels(t, e.LHS, known), outputLabels(t, e.RHS, known)
		lvec, rvec := e.LHS.Type() == promparser.ValueTypeVector, e.RHS.Type() == promparser.ValueTypeVector
		if !lvec || !rvec {
			if lvec {
				return lhs
			}
			return rhs
		}
		vm := e.VectorMatching
		if vm.On {
			for _, l := range vm.MatchingLabels {
				if !lhs[l] || !rhs[l] {
					t.Errorf("%s: matches on %q, which one side does not carry", e, l)
				}
			}
		}
		switch {
		case e.Op == promparser.LOR:
			out := map[string]bool{}
			for l := range lhs {
				if rhs[l] {
					out[l] = true
				}
			}
			return out
		case e.Op.IsSetOperator(), e.Op.IsComparisonOperator() && !e.ReturnBool:
			return lhs
		case vm.Card == promparser.CardManyToOne:
			return union(lhs, set(vm.Include...))
		case vm.Card == promparser.CardOneToMany:
			return union(rhs, set(vm.Include...))
		case vm.On:
			return set(vm.MatchingLabels...)
		default:
			out := maps.Clone(lhs)
			for _, l := range vm.MatchingLabels {
				delete(out, l)
			}
			return out
		}
	}
	t.Errorf("outputLabels: %T (%s) is not supported by this test; extend it", e, e)
	return nil
}

func union(a, b map[string]bool) map[string]bool {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]bool{}
	}
	maps.Copy(out, b)
	return out
}

// definedMetrics reads the metric definitions from package metrics'
// source: each prometheus.New*Vec(Opts{Name: ...}, []string{labels...}),
// prometheus.New{Counter,Gauge,Histogram,Summary}(Opts{Name: ...}) and
// prometheus.NewDesc(name, help, []string{labels...}, ...). Reading the
// source, not a list kept here, is what makes a rename break this test.
func definedMetrics(t *testing.T, dir string) map[string]metric {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]metric{}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "New") {
				return true
			}
			name, m, err := definition(sel.Sel.Name, call.Args)
			switch {
			case err != nil:
				t.Errorf("%s: %v", fset.Position(call.Pos()), err)
			case name != "":
				out[name] = m
			}
			return true
		})
	}
	if len(out) == 0 {
		t.Fatalf("found no metric definitions in %s: has the package changed shape?", dir)
	}
	return out
}

// definition returns the metric a constructor call defines, "" for calls
// that define none, or an error for a definition this reader cannot
// follow (a name from a constant, a Namespace field).
func definition(fn string, args []ast.Expr) (string, metric, error) {
	var m metric
	switch fn {
	case "NewDesc":
		if len(args) < 3 {
			return "", m, fmt.Errorf("NewDesc with %d arguments", len(args))
		}
		name, err := stringLit(args[0])
		if err != nil {
			return "", m, err
		}
		m.labels, err = stringList(args[2])
		return name, m, err
	case "NewCounter", "NewGauge", "NewHistogram", "NewSummary",
		"NewCounterVec", "NewGaugeVec", "NewHistogramVec", "NewSummaryVec":
	default:
		return "", m, nil
	}
	name, err := optsName(args[0])
	if err != nil {
		return "", m, err
	}
	m.labels = map[string]bool{}
	if strings.HasSuffix(fn, "Vec") {
		if len(args) < 2 {
			return "", m, fmt.Errorf("%s without labels", fn)
		}
		if m.labels, err = stringList(args[1]); err != nil {
			return "", m, err
		}
	}
	m.histogram = strings.HasPrefix(fn, "NewHistogram") || strings.HasPrefix(fn, "NewSummary")
	return name, m, nil
}

func optsName(e ast.Expr) (string, error) {
	if u, ok := e.(*ast.UnaryExpr); ok {
		e = u.X
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return "", fmt.Errorf("metric options are not a composite literal")
	}
	name := ""
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		switch key := fmt.Sprint(kv.Key); key {
		case "Name":
			var err error
			if name, err = stringLit(kv.Value); err != nil {
				return "", err
			}
		case "Namespace", "Subsystem":
			return "", fmt.Errorf("options set %s: teach this test to join it to Name", key)
		}
	}
	if name == "" {
		return "", fmt.Errorf("metric options without a Name")
	}
	return name, nil
}

func stringLit(e ast.Expr) (string, error) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", fmt.Errorf("metric name or label %s is not a string literal", e)
	}
	return strconv.Unquote(lit.Value)
}

func stringList(e ast.Expr) (map[string]bool, error) {
	out := map[string]bool{}
	if id, ok := e.(*ast.Ident); ok && id.Name == "nil" {
		return out, nil
	}
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("labels are not a []string literal")
	}
	for _, el := range lit.Elts {
		s, err := stringLit(el)
		if err != nil {
			return nil, err
		}
		out[s] = true
	}
	return out, nil
}
