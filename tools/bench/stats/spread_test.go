package stats

import (
	"testing"
	"time"
)

func TestSpreadTakesTheLowerMiddleOfAnEvenCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		xs          []float64
		lo, mid, hi float64
	}{
		{"none", nil, 0, 0, 0},
		{"one", []float64{2.5}, 2.5, 2.5, 2.5},
		{"odd count, any order", []float64{3, 1, 2}, 1, 2, 3},
		{"even count", []float64{4, 1, 3, 2}, 1, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := append([]float64(nil), tc.xs...)
			lo, mid, hi := Spread(tc.xs)
			if lo != tc.lo || mid != tc.mid || hi != tc.hi {
				t.Errorf("Spread(%v) = %v, %v, %v, want %v, %v, %v", tc.xs, lo, mid, hi, tc.lo, tc.mid, tc.hi)
			}
			for i := range in {
				if in[i] != tc.xs[i] {
					t.Errorf("Spread reordered its input: %v", tc.xs)
				}
			}
		})
	}
}

func TestMeanOfNoneIsZero(t *testing.T) {
	t.Parallel()
	if got := Mean(nil); got != 0 {
		t.Errorf("Mean(nil) = %v, want 0", got)
	}
	if got := Mean([]time.Duration{time.Millisecond, 2 * time.Millisecond}); got != 1500*time.Microsecond {
		t.Errorf("Mean(1ms, 2ms) = %v, want 1.5ms", got)
	}
}
