package matrix

import (
	"fmt"
	"slices"
)

// candidate is a suspect under construction.
type candidate struct {
	Suspect
	excess float64 // lost probes beyond the healthy rate
	conf   float64
	dev    int32   // the device it names, or -1
	links  []int32 // its lossy links
}

// fabricSuspects turns the estimator's links into suspects. A link is
// bad when its attributed loss is significant. A device is bad when at
// least two of its incoming or outgoing links are bad and they are at
// least half of that side (NetBouncer's rule: no healthy path through
// it); a lossy device drops on every link, and the fit may put the loss
// on either side. A VIP is never the fabric: any bad link of it makes it
// an lb suspect, which Localize keeps only when the lb rule agrees. A
// host (an agent or target) with a bad access link is a host suspect.
// What is left is single links between fabric devices and hosts.
func fabricSuspects(r *round, e *estimator, th *Thresholds) []candidate {
	nd := len(r.devName)
	inN, outN := make([]int, nd), make([]int, nd)
	inBad, outBad := make([][]int32, nd), make([][]int32, nd)
	bad := make([]bool, len(r.links))
	for l, lk := range r.links {
		if e.sent[l] < float64(th.MinSent) {
			continue
		}
		inN[lk.to]++
		outN[lk.from]++
		if ok, _ := th.significant(e.lost[l], e.sent[l]); ok {
			bad[l] = true
			inBad[lk.to] = append(inBad[lk.to], int32(l))
			outBad[lk.from] = append(outBad[lk.from], int32(l))
		}
	}
	var out []candidate
	claimed := make([]bool, len(r.links))
	isDev := make([]bool, nd)
	// VIPs and fabric devices first, hosts after: a bad ToR explains its
	// hosts, and a link of a VIP is the LB's, never a fabric link.
	for d := range nd {
		in, o := inBad[d], outBad[d]
		switch {
		case r.devLB[d]:
			if len(in)+len(o) == 0 {
				continue
			}
			out = append(out, deviceCandidate(r, e, th, int32(d), KindLB, in, o, claimed))
		case r.devHost[d]:
		case len(in) >= 2 && 2*len(in) >= inN[d] || len(o) >= 2 && 2*len(o) >= outN[d]:
			isDev[d] = true
			out = append(out, deviceCandidate(r, e, th, int32(d), KindDevice, in, o, claimed))
		}
	}
	for d := range nd {
		if !r.devHost[d] || r.devLB[d] || len(inBad[d])+len(outBad[d]) == 0 {
			continue
		}
		if acc := r.devAcc[d]; acc >= 0 && isDev[acc] {
			continue
		}
		out = append(out, deviceCandidate(r, e, th, int32(d), KindHost, inBad[d], outBad[d], claimed))
	}
	for l := range r.links {
		if !bad[l] || claimed[l] {
			continue // a VIP's links are claimed: it has a candidate
		}
		lk := r.links[l]
		if isDev[lk.from] || isDev[lk.to] {
			continue
		}
		ok, conf := th.significant(e.lost[l], e.sent[l])
		if !ok {
			continue
		}
		c := candidate{dev: -1, links: []int32{int32(l)}, conf: conf}
		c.Kind, c.Name = KindLink, r.linkName(int32(l))
		c.Addresses = append(slices.Clone(r.devAddr[lk.from]), r.devAddr[lk.to]...)
		c.EstimatedLoss = rateToLoss(e.q[l])
		c.excess = e.lost[l] - th.Healthy*e.sent[l]
		c.Evidence = Evidence{
			Stage:      "estimator",
			Detail:     fmt.Sprintf("link %s loses %.2g of the flows through it; the links around it do not", c.Name, c.EstimatedLoss),
			LossyFlows: int(e.lossyFlows[l]), CleanFlows: int(e.cleanFlows[l]),
			LostProbes: e.lost[l], SentProbes: e.sent[l],
			PValue: upperTail(e.lost[l], e.sent[l], th.Healthy),
		}
		out = append(out, c)
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
