package matrix

import "math"

// upperTail bounds P(X >= k) for X ~ Binomial(n, p) from above with the
// Chernoff bound exp(-n KL(k/n || p)). It is conservative (never smaller
// than the exact tail), works for the fractional counts the estimator
// attributes, and costs two logarithms. It returns 1 when k <= n p.
func upperTail(k, n, p float64) float64 {
	if n <= 0 || k <= n*p {
		return 1
	}
	if p <= 0 {
		return 0
	}
	q := k / n
	if q >= 1 {
		return math.Exp(n * math.Log(p))
	}
	kl := q*math.Log(q/p) + (1-q)*math.Log((1-q)/(1-p))
	return math.Exp(-n * kl)
}

// significant reports whether lost of sent is loss above the healthy rate
// beyond chance, and how confident that is on a 0-1 scale: 0.5 at
// p-value Alpha, 1 at Alpha squared or below.
func (th *Thresholds) significant(lost, sent float64) (bool, float64) {
	if sent < float64(th.MinSent) || lost <= 0 || lost/sent <= th.Healthy {
		return false, 0
	}
	pv := upperTail(lost, sent, th.Healthy)
	if pv >= th.Alpha {
		return false, 0
	}
	if pv <= 0 {
		return true, 1
	}
	return true, min(1, math.Log(pv)/(2*math.Log(th.Alpha)))
}

// isSignificant is significant for a tally, without the confidence.
func (th *Thresholds) isSignificant(t tally) bool {
	ok, _ := th.significant(float64(t.lost), float64(t.sent))
	return ok
}

func expm1(x float64) float64 { return math.Expm1(x) }
