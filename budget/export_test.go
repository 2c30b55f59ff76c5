package budget

import "time"

// Names the tests of package budget_test reach that callers never need.
var (
	AddMicros = addMicros
	MulMicros = mulMicros

	ErrPeriodNotOpen = errPeriodNotOpen
	ErrBatchShort    = errBatchShort
)

const (
	GroupOwner    = groupOwner
	GroupWorkload = groupWorkload
	GroupModel    = groupModel
	GroupDay      = groupDay
	GroupMonth    = groupMonth

	WhatUnsettled         = whatUnsettled
	WhatReleasedAfterCall = whatReleasedAfterCall
)

// Bounds is bounds, for the tests.
func (p Period) Bounds(at time.Time) (start time.Time, end *time.Time) { return p.bounds(at) }
