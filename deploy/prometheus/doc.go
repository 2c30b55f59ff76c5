// Package prometheus holds Tollgate's example Prometheus alerting rules,
// alerts.yml, and nothing else: it has no Go API.
//
// Its test is the reason it is a package. It parses alerts.yml with
// Prometheus's own rule parser, and checks every metric, label and
// template the rules use against the metrics Tollgate defines in package
// metrics, so that renaming a metric or a label fails `go test ./...`
// instead of silently disarming an alert.
package prometheus
