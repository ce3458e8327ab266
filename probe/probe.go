package probe

import (
	"net/netip"
	"time"

	"github.com/netprober/prober/api"
)

// Protocol names a probe engine. The strings appear in configs, metrics
// and the observations API.
type Protocol string

// The probe protocols.
const (
	ProtocolICMP      Protocol = api.ProtocolICMP
	ProtocolTCPSYN    Protocol = api.ProtocolTCPSYN
	ProtocolHTTP2Ping Protocol = api.ProtocolHTTP2Ping
)

// Protocols lists every protocol in a stable order.
var Protocols = []Protocol{ProtocolICMP, ProtocolTCPSYN, ProtocolHTTP2Ping}

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
	}
	return "unknown"
}

// Reached reports whether the target answered at all: an RST proves the
// path works as well as a SYN-ACK does.
func (o Outcome) Reached() bool { return o == OK || o == Refused }

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
	// ("send", "rejected", "no_route", ...).
	Reason string
	Err    error
}
