// Package status reads Tollgate's state at a glance, for the people who run
// it: the work queues, the provider-key gates (throttle pauses and circuit
// breakers), the budgets near their limits and the tasks that have waited
// longest.
//
// It owns its SQL and only reads. Everything it reports lives in
// PostgreSQL, which every instance shares, so any instance (or the
// `tollgate status` command run anywhere with DATABASE_URL) reports the
// whole fleet, not one process. The same Report is printed as tables by
// `tollgate status` and served as JSON by GET /v1/admin/status.
package status
