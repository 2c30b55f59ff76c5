// Package limits owns rate limits: requests and tokens per minute, per
// owner and per workload of an owner, and the per-minute windows that
// count them.
//
// A limit is a row of rate_limits (owner, workload, requests per minute,
// tokens per minute); workload "" is the owner's own limit, NULL is
// unlimited. Every limited scope an admission falls under (the owner's,
// and its workload's) has one counter row per UTC minute in rate_windows.
// The same table counts the routes' per-user guards (Take, RouteScope):
// one counter, one purge, whatever the window's length.
//
// Admission counts itself on those rows with one statement (QueueAdmit),
// in the admission's own transaction: ON CONFLICT DO UPDATE takes the row
// lock, so the admissions of every instance are ordered on it and each
// sees the count the ones before it committed. Decide turns the counts
// the statement returns into the answer; a refused admission rolls back,
// its count with it, so nothing of it is written. Tokens are counted at
// the reservation's estimate and corrected, once, when the task's usage is
// recorded at settlement: a trigger on usage_records records the
// correction (actual minus estimate) in rate_corrections, and the next
// admission on the window folds it into the count, never below zero.
// Settlement never takes a window's lock: it holds the owner's budget
// rows, which an admission holding a window's lock may be waiting for.
package limits
