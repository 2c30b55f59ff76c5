package tasks

import (
	"math"

	"github.com/tollgate/tollgate/budget"
)

// LeastReservation is the least any request admitted now would reserve,
// whatever model it names: a chat of one empty message asking for one
// output token, or an embedding of a one-token input, on the cheapest
// model a client may name. An owner whose room is below it cannot be
// admitted, so a request of theirs may be refused before its body is read
// (server's room check). It is 0 when a free model is nameable.
func (s *Service) LeastReservation() int64 {
	f := s.fitting
	f.least.once.Do(func() { f.least.micros = f.leastReservation() })
	return f.least.micros
}

// leastReservation figures LeastReservation.
func (f *modelFit) leastReservation() int64 {
	least := int64(math.MaxInt64)
	for m := range f.catalog.Nameable() {
		p := m.Price()
		if m.Serves(false) {
			least = min(least, p.CostOf(budget.Tokens{Input: messageFraming, Output: 1}))
		}
		if m.Serves(true) {
			least = min(least, p.CostOf(budget.Tokens{Input: 1}))
		}
	}
	if least == math.MaxInt64 {
		return 0
	}
	return least
}
