package matrix

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// candidate is a suspect under construction.
type candidate struct {
	Suspect
	excess float64 // lost probes beyond the healthy rate
	conf   float64
	dev    int32   // the device it names, or -1
	links  []int32 // its lossy links
	pairs  []int32 // the pairs a rule's suspect explains
}

// fabricSuspects names what the estimator's links say drops packets. A
// link is lossy when its attributed loss is significant at the screen's
// p < sqrt(Alpha). A VIP is never the fabric: any lossy link of it
// (at p < Alpha) makes it an lb suspect, which Localize keeps only when
// the lb rule agrees. The rest is the selector's choice among the
// devices, hosts and links around the lossy links (select.go): the
// fewest that explain the loss, each a device dropping on every link, a
// host's own links, or one link, and beside each, the ones the data
// cannot tell from it. The hosts the host rule names (ruleHosts) are
// weighed too.
func fabricSuspects(r *round, e *estimator, s *selector, th *Thresholds, ruleHosts []int32) []candidate {
	// The selector judges what it is given: screen with a looser test
	// (p < sqrt(Alpha)) so that a fault the per-link fit spread over
	// collinear links still makes its links candidates.
	screen := *th
	screen.Alpha = math.Sqrt(th.Alpha)
	bad := make([]bool, len(r.links))
	var vipIn, vipOut map[int32][]int32
	for l, lk := range r.links {
		if e.sent[l] < float64(th.MinSent) {
			continue
		}
		if ok, _ := screen.significant(e.lost[l], e.sent[l]); !ok {
			continue
		}
		bad[l] = true
		if ok, _ := th.significant(e.lost[l], e.sent[l]); !ok {
			continue
		}
		for _, d := range [2]int32{lk.from, lk.to} {
			if !r.devLB[d] {
				continue
			}
			if vipIn == nil {
				vipIn, vipOut = map[int32][]int32{}, map[int32][]int32{}
			}
			if d == lk.to {
				vipIn[d] = append(vipIn[d], int32(l))
			} else {
				vipOut[d] = append(vipOut[d], int32(l))
			}
		}
	}
	var out []candidate
	claimed := make([]bool, len(r.links))
	for d := range int32(len(r.devName)) {
		if in, o := vipIn[d], vipOut[d]; len(in)+len(o) > 0 {
			out = append(out, deviceCandidate(r, e, th, d, KindLB, in, o, claimed))
		}
	}
	s.bg, s.alpha, s.disputes = th.Healthy, th.Alpha, nil
	s.hypotheses(r, e, bad, ruleHosts, th)
	if len(s.hs) == 0 {
		return out
	}
	s.collect(r, e)
	s.choose(r, th, -math.Log(th.Alpha)/2)
	s.disputes = s.dispute(r, th)
	for h := range s.hs {
		if !s.hs[h].chosen {
			continue
		}
		group := []int32{int32(h)}
		for t := range s.hs {
			if s.hs[t].tieOf == int32(h) {
				group = append(group, int32(t))
			}
		}
		for _, g := range group {
			out = append(out, s.candidate(r, e, th, int32(h), g, group))
		}
	}
	return out
}

// candidate is the suspect hypothesis g names, fitted as chosen
// hypothesis h; group is h and the hypotheses tied with it, which share
// its excess loss equally.
func (s *selector) candidate(r *round, e *estimator, th *Thresholds, h, g int32, group []int32) candidate {
	hy, fit := &s.hs[g], &s.hs[h]
	c := candidate{dev: -1}
	c.Kind = hy.kind
	_, c.conf = th.significant(fit.lost, fit.sent)
	c.EstimatedLoss = rateToLoss(s.q[h])
	c.excess = (fit.lost - th.Healthy*fit.sent) / float64(len(group))
	var detail string
	switch hy.kind {
	case KindLink:
		c.links = []int32{hy.id}
		c.Name = r.linkName(hy.id)
		lk := r.links[hy.id]
		c.Addresses = append(slices.Clone(r.devAddr[lk.from]), r.devAddr[lk.to]...)
		detail = fmt.Sprintf("link %s loses %.2g of the packets through it; no device or host explains the loss as well", c.Name, c.EstimatedLoss)
	case KindDevice:
		c.dev, c.Name = hy.id, r.devName[hy.id]
		c.Addresses = slices.Clone(r.devAddr[hy.id])
		c.links = s.lossyLinks(r, e, func(lk link) bool { return lk.from == hy.id || lk.to == hy.id })
		detail = fmt.Sprintf("drops %.2g of the packets it forwards, whichever link they use; its links' loss is explained by no link or host alone", c.EstimatedLoss)
	case KindHost:
		c.dev, c.Name = hy.id, r.devName[hy.id]
		c.Addresses = slices.Clone(r.devAddr[hy.id])
		c.links = s.lossyLinks(r, e, func(lk link) bool {
			return lk.from == hy.id && r.devAcc[lk.to] != hy.id || lk.to == hy.id && r.devAcc[lk.from] != hy.id
		})
		detail = fmt.Sprintf("its own links lose %.2g of the packets, both ways, while its neighbours' do not: its NIC, cable or agent", c.EstimatedLoss)
	}
	var ties []Ref
	for _, t := range group {
		if t != g {
			ties = append(ties, s.ref(r, t))
		}
	}
	if len(ties) > 0 {
		others := make([]string, len(ties))
		for i, x := range ties {
			others[i] = x.Kind + " " + x.Name
		}
		detail += fmt.Sprintf("; the data cannot tell it from %s (the same flows cross them)", strings.Join(others, ", "))
	}
	c.Evidence = Evidence{
		Stage:      "estimator",
		Detail:     detail,
		LossyFlows: int(hy.lossy), CleanFlows: int(hy.clean),
		LostProbes: fit.lost, SentProbes: fit.sent,
		PValue: upperTail(fit.lost, fit.sent, th.Healthy),
		Ties:   ties,
	}
	for _, l := range c.links {
		c.Evidence.Links = append(c.Evidence.Links, r.linkName(l))
	}
	return c
}

// ref is hypothesis h as the suspect it is named as.
func (s *selector) ref(r *round, h int32) Ref {
	hy := &s.hs[h]
	if hy.kind == KindLink {
		return Ref{Kind: hy.kind, Name: r.linkName(hy.id)}
	}
	return Ref{Kind: hy.kind, Name: r.devName[hy.id]}
}

// lossyLinks lists the links matching of that the per-link fit gave
// lost probes, in id order.
func (s *selector) lossyLinks(r *round, e *estimator, of func(link) bool) []int32 {
	var out []int32
	for l, lk := range r.links {
		if of(lk) && e.lost[l] > 0 {
			out = append(out, int32(l))
		}
	}
	return out
}

func deviceCandidate(r *round, e *estimator, th *Thresholds, d int32, kind string, in, o []int32, claimed []bool) candidate {
	c := candidate{dev: d}
	c.Kind, c.Name = kind, r.devName[d]
	c.Addresses = slices.Clone(r.devAddr[d])
	var lostIn, sentIn, lostOut, sentOut float64
	for _, l := range in {
		lostIn += e.lost[l]
		sentIn += e.sent[l]
	}
	for _, l := range o {
		lostOut += e.lost[l]
		sentOut += e.sent[l]
	}
	lost := lostIn + lostOut
	sent := max(sentIn, sentOut)
	c.links = append(slices.Clone(in), o...)
	slices.Sort(c.links)
	var lossy, clean int32
	for _, l := range c.links {
		claimed[l] = true
		c.Evidence.Links = append(c.Evidence.Links, r.linkName(l))
		if r.links[l].to == d {
			lossy += e.lossyFlows[l]
			clean += e.cleanFlows[l]
		}
	}
	if lossy+clean == 0 { // only outgoing links known (a source host)
		for _, l := range o {
			lossy += e.lossyFlows[l]
			clean += e.cleanFlows[l]
		}
	}
	_, c.conf = th.significant(lost, sent)
	if c.conf == 0 {
		c.conf = 0.5 // each link passed on its own
	}
	c.EstimatedLoss = min(1, lost/max(sent, 1))
	c.excess = lost - th.Healthy*sent
	detail := "%d of its incoming and %d of its outgoing links lose; no path through it is clean"
	switch kind {
	case KindHost:
		detail = "its access links lose (%d in, %d out) while its ToR's other hosts do not: its NIC, cable or agent"
	case KindLB:
		detail = "%d of its incoming and %d of its outgoing links lose: the VIP, or the links to it"
	}
	c.Evidence = Evidence{
		Stage:      "estimator",
		Detail:     fmt.Sprintf(detail, len(in), len(o)),
		LossyFlows: int(lossy), CleanFlows: int(clean),
		LostProbes: lost, SentProbes: sent,
		PValue: upperTail(lost, sent, th.Healthy),
		Links:  c.Evidence.Links,
	}
	return c
}

// rateToLoss turns a Poisson loss rate into a loss ratio.
func rateToLoss(q float64) float64 { return -expm1(-q) }
