package tasks

import (
	"slices"
	"strings"

	"github.com/riverqueue/river/rivertype"
	"github.com/tollgate/tollgate/provider"
)

// noCallPrefix starts the text of every error a run returns before calling
// the provider. River keeps that text in river_job.errors, which is how a
// later run tells an attempt that never reached the provider from one that
// may have (see unrecordedRuns).
const noCallPrefix = "tollgate: no call made: "

// noCallError is an error a run met before any provider call.
type noCallError struct{ err error }

func (e *noCallError) Error() string { return noCallPrefix + e.err.Error() }
func (e *noCallError) Unwrap() error { return e.err }

// retryError is what a run returns to River, after recording its attempt,
// to have the job retried. It hides the call's cause on purpose: were it a
// context cancellation, River would take the run for one cut short by a
// shutdown, reuse its attempt number and leave no entry in river_job.errors,
// and the journal names runs by those entries.
type retryError struct{ pe *provider.Error }

func (e *retryError) Error() string { return e.pe.Error() }

// As lets errors.As find the provider error (spans and logs read its class).
func (e *retryError) As(target any) bool {
	if p, ok := target.(**provider.Error); ok {
		*p = e.pe
		return true
	}
	return false
}

// unrecordedRuns are the earlier runs of the job that ended without
// recording an attempt: killed and rescued, timed out, or failed while
// recording after the call. Each may have called the provider. A run that
// records an attempt and then fails the job (to retry it) names itself in
// the attempt's river_error_attempt; a run that failed before calling says
// so in its error's text.
func unrecordedRuns(errs []rivertype.AttemptError, recorded []int32) []rivertype.AttemptError {
	var out []rivertype.AttemptError
	for _, e := range errs {
		if strings.HasPrefix(e.Error, noCallPrefix) || slices.Contains(recorded, int32(e.Attempt)) {
			continue
		}
		out = append(out, e)
	}
	return out
}
