package probe

import (
	"net/netip"
	"time"

	"github.com/netprober/prober/api"
)

// Protocol names a probe engine. The strings appear in configs, metrics
// and the observations API.
type Protocol string

// The probe protocols. ProtocolDNS is a config's word for the two DNS
// probes, ProtocolDNSUDP and ProtocolDNSTCP (api.ReportedAs).
const (
	ProtocolICMP      Protocol = api.ProtocolICMP
	ProtocolTCPSYN    Protocol = api.ProtocolTCPSYN
	ProtocolHTTP2Ping Protocol = api.ProtocolHTTP2Ping
	ProtocolDNS       Protocol = api.ProtocolDNS
	ProtocolDNSUDP    Protocol = api.ProtocolDNSUDP
	ProtocolDNSTCP    Protocol = api.ProtocolDNSTCP
	ProtocolTCPSYNMTU Protocol = api.ProtocolTCPSYNMTU
)

// Protocols lists every protocol a config may name, in a stable order.
var Protocols = []Protocol{ProtocolICMP, ProtocolTCPSYN, ProtocolHTTP2Ping, ProtocolDNS}

// Outcome is the fate of one probe. Only Lost is loss; LocalError means
// the probe never left (or its answer could not be read) and must not be
// counted against the network.
type Outcome uint8

// The outcomes.
const (
	OK         Outcome = iota // an answer came back in time (echo reply, SYN-ACK)
	Lost                      // nothing came back before the timeout
	Refused                   // the target answered but refused (RST, ICMP unreachable)
	LocalError                // sending or receiving failed locally
	// AnswerError: the target answered with an error (a DNS SERVFAIL,
	// NXDOMAIN, truncation, wrong ID): the path works, the service does
	// not. Reason says which; never loss.
	AnswerError
	// TooBig: a sized probe (TCPSYN.ProbeSized) met a link too small
	// for it, and the network said so ("fragmentation needed" or
	// "packet too big" reached the sender): path MTU discovery works.
	// Result.MTU is the path MTU; never loss.
	TooBig
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Lost:
		return "lost"
	case Refused:
		return "refused"
	case LocalError:
		return "local_error"
	case AnswerError:
		return "error"
	case TooBig:
		return "too_big"
	}
	return "unknown"
}

// Reached reports whether the target answered at all: an RST proves the
// path works as well as a SYN-ACK does.
func (o Outcome) Reached() bool { return o == OK || o == Refused || o == AnswerError }

// Target is one address to probe.
type Target struct {
	Addr netip.Addr
	Port uint16 // TCP port for tcp_syn, http2_ping and traces
}

// Result is one probe's fate.
type Result struct {
	Outcome Outcome
	RTT     time.Duration // valid when Outcome.Reached()
	// Reason is a short, bounded, metric-safe word for LocalError
	// ("send", "rejected", "no_route", ...) and AnswerError ("servfail",
	// "truncated", ...).
	Reason string
	Err    error
	// MTU is the path MTU the network reported, with TooBig.
	MTU int
}
