package matrix

import (
	"math"
	"testing"
)

// exactTail is P(X >= k) for X ~ Binomial(n, p), summed in log space.
func exactTail(k, n int, p float64) float64 {
	s := 0.0
	for i := k; i <= n; i++ {
		lg := lgamma(n+1) - lgamma(i+1) - lgamma(n-i+1) + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p)
		s += math.Exp(lg)
	}
	return s
}

func lgamma(x int) float64 { v, _ := math.Lgamma(float64(x)); return v }

func TestUpperTailBoundsExact(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		k, n int
		p    float64
	}{{5, 1000, 1e-3}, {10, 1000, 1e-3}, {50, 5000, 1e-3}, {3, 20, 0.01}, {20, 20, 1e-3}} {
		got, exact := upperTail(float64(tc.k), float64(tc.n), tc.p), exactTail(tc.k, tc.n, tc.p)
		if got < exact {
			t.Errorf("upperTail(%d, %d, %g) = %g < exact %g: not conservative", tc.k, tc.n, tc.p, got, exact)
		}
		if exact > 1e-300 && got > 1000*exact && got > 1e-3 {
			t.Errorf("upperTail(%d, %d, %g) = %g, exact %g: too loose to be useful", tc.k, tc.n, tc.p, got, exact)
		}
	}
}

func TestSignificant(t *testing.T) {
	t.Parallel()
	th := Thresholds{}
	th.SetDefaults()
	for _, tc := range []struct {
		name       string
		lost, sent float64
		want       bool
	}{
		{"background 1e-4 on 5000", 1, 5000, false},
		{"fluke 5 of 1000", 5, 1000, false},
		{"1% on 5000", 50, 5000, true},
		{"0.5% on 5000", 25, 5000, true},
		{"black hole 20 of 20", 20, 20, true},
		{"too few probes", 5, 5, false},
	} {
		if got, _ := th.significant(tc.lost, tc.sent); got != tc.want {
			t.Errorf("%s: significant(%v, %v) = %v, want %v", tc.name, tc.lost, tc.sent, got, tc.want)
		}
	}
}
