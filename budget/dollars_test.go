package budget_test

import (
	"errors"
	"testing"

	"github.com/tollgate/tollgate/budget"
)

func TestParseDollarsPerToken(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want int64
		err  error // nil: want is the answer
	}{
		{"0.0000025", 2_500_000, nil},
		{"2.5e-06", 2_500_000, nil},
		{"2.5E-6", 2_500_000, nil},
		{"1e-7", 100_000, nil},
		{"1.5e-07", 150_000, nil},
		{"6e-07", 600_000, nil},
		{"0.00000015", 150_000, nil},
		{"3.75e-06", 3_750_000, nil},
		{"1e-12", 1, nil},
		{"0.000000000001", 1, nil},
		{"1.000e-12", 1, nil},
		{"0", 0, nil},
		{"0.0", 0, nil},
		{"0e0", 0, nil},
		{"1", 1_000_000_000_000, nil},
		{"1e+0", 1_000_000_000_000, nil},
		{"00.5", 500_000_000_000, nil},
		{"1.23456789e-13", 0, budget.ErrInexact},
		{"1e-13", 0, budget.ErrInexact},
		{"0.0000000000015", 0, budget.ErrInexact},
		{"-0.0000025", 0, budget.ErrInvalid},
		{"-1e-7", 0, budget.ErrInvalid},
		{"NaN", 0, budget.ErrInvalid},
		{"nan", 0, budget.ErrInvalid},
		{"Infinity", 0, budget.ErrInvalid},
		{"inf", 0, budget.ErrInvalid},
		{"+1e-7", 0, budget.ErrInvalid},
		{"0x1p-20", 0, budget.ErrInvalid},
		{"1/3", 0, budget.ErrInvalid},
		{".5", 0, budget.ErrInvalid},
		{"5.", 0, budget.ErrInvalid},
		{"1e", 0, budget.ErrInvalid},
		{"1e-400", 0, budget.ErrInvalid},
		{"1e400", 0, budget.ErrInvalid},
		{"1_000", 0, budget.ErrInvalid},
		{" 1e-7", 0, budget.ErrInvalid},
		{"", 0, budget.ErrInvalid},
		{"1.0000000000001", 0, budget.ErrInexact},
		{"1.000001", 0, budget.ErrInvalid}, // above the bound
		{"2", 0, budget.ErrInvalid},
		{"1e30", 0, budget.ErrInvalid},
		{"99999999999999999999999999999999999999999999999999999999999", 0, budget.ErrInvalid},
		{"1" + string(make([]byte, 70)), 0, budget.ErrInvalid},
	}
	for _, c := range cases {
		got, err := budget.ParseDollarsPerToken(c.in)
		if c.err == nil {
			if err != nil || got != c.want {
				t.Errorf("ParseDollarsPerToken(%q) = %d, %v; want %d", c.in, got, err, c.want)
			}
			continue
		}
		if !errors.Is(err, c.err) {
			t.Errorf("ParseDollarsPerToken(%q) = %d, %v; want %v", c.in, got, err, c.err)
		}
	}
}
