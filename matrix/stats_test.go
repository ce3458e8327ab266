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

// TestSickLimit: a flow is sick from the fewest lost probes whose bound is
// below flowSickP at Healthy, and its null chance is the exact binomial
// tail, far below that bound (which is why sick flows are counted
// against the null, not against flowSickP).
func TestSickLimit(t *testing.T) {
	for _, c := range []struct{ sent, k uint64 }{{1, 1}, {8, 2}, {26, 2}, {300, 4}} {
		k, p := sickLimit(c.sent, 1e-3)
		exact := exactTail(int(k), int(c.sent), 1e-3)
		if k != c.k || math.Abs(p-exact) > 1e-3*exact || p >= flowSickP {
			t.Errorf("sent %d: sick from %d lost, null %.3g; want %d, %.3g (< %g)", c.sent, k, p, c.k, exact, flowSickP)
		}
	}
	// A report's largest count (api.MaxCount) costs a bisection, not a
	// count of every probe.
	if k, p := sickLimit(1<<40, 1e-3); k < 1<<29 || k > 1<<31 || p <= 0 || p >= flowSickP {
		t.Errorf("sent 2^40: sick from %d lost, null %g", k, p)
	}
	l := sickLimits{h: 1e-3}
	for range 2 { // computed, then cached
		if k, p := l.of(26); k != 2 || math.Abs(p-exactTail(2, 26, 1e-3)) > 1e-6 {
			t.Errorf("sickLimits.of(26) = %d, %g", k, p)
		}
	}
}
