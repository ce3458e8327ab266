package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
)

// DefaultDNSQuery is the name a DNS probe asks by default: the API
// server's Service, which every cluster's DNS answers.
const DefaultDNSQuery = "kubernetes.default.svc.cluster.local."

// The reasons of a DNS AnswerError: bounded, metric-safe.
const (
	ReasonFormErr       = "formerr"
	ReasonServFail      = "servfail"
	ReasonNXDomain      = "nxdomain"
	ReasonNotImp        = "notimp"
	ReasonDNSRefused    = "refused" // the server's REFUSED rcode, not a transport refusal
	ReasonRCodeOther    = "rcode_other"
	ReasonTruncated     = "truncated"
	ReasonWrongID       = "wrong_id"
	ReasonWrongQuestion = "wrong_question"
	ReasonMalformed     = "malformed"
)

// DNSReasons lists every reason a DNS probe's AnswerError may carry.
var DNSReasons = []string{ReasonFormErr, ReasonServFail, ReasonNXDomain, ReasonNotImp, ReasonDNSRefused,
	ReasonRCodeOther, ReasonTruncated, ReasonWrongID, ReasonWrongQuestion, ReasonMalformed}

// maxDNSMessage bounds an answer read: a UDP answer without EDNS is at
// most 512 bytes, and an answer to one A question fits far below this.
const maxDNSMessage = 1232

// CheckDNSName reports whether name can be asked: a fully qualified name
// (a final dot is added when missing) of at most 255 bytes, labels of
// 1-63 bytes. It returns the name with its final dot.
func CheckDNSName(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty name")
	}
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	if len(name) > 254 {
		return "", fmt.Errorf("%.40q...: %d bytes, too long: a name is at most 253 without its final dot", name, len(name)-1)
	}
	if name != "." {
		for label := range strings.SplitSeq(strings.TrimSuffix(name, "."), ".") {
			if len(label) == 0 || len(label) > 63 {
				return "", fmt.Errorf("%q: labels must be 1 to 63 bytes", name)
			}
		}
	}
	if _, err := dnsmessage.NewName(name); err != nil {
		return "", fmt.Errorf("%q: %v", name, err)
	}
	return name, nil
}

// dnsQuery is one flow's query, packed once; each probe writes its ID
// into the packed message. tcp prefixes the two-byte length DNS over TCP
// needs (RFC 1035 4.2.2), so either form goes out in one write.
type dnsQuery struct {
	msg      []byte // the whole packet: [length] header question
	off      int    // where the DNS message starts in msg
	question dnsmessage.Question
}

func newDNSQuery(name string, tcp bool) (dnsQuery, error) {
	name, err := CheckDNSName(name)
	if err != nil {
		return dnsQuery{}, err
	}
	n, _ := dnsmessage.NewName(name) // checked above
	q := dnsmessage.Question{Name: n, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET}
	off := 0
	if tcp {
		off = 2
	}
	b := dnsmessage.NewBuilder(make([]byte, off, 512), dnsmessage.Header{RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		return dnsQuery{}, err
	}
	if err := b.Question(q); err != nil {
		return dnsQuery{}, err
	}
	msg, err := b.Finish()
	if err != nil {
		return dnsQuery{}, err
	}
	if tcp {
		binary.BigEndian.PutUint16(msg, uint16(len(msg)-off))
	}
	return dnsQuery{msg: msg, off: off, question: q}, nil
}

// setID writes id into the packed query.
func (q *dnsQuery) setID(id uint16) { binary.BigEndian.PutUint16(q.msg[q.off:], id) }

// dnsAnswerID is the ID of an answer, ok false when it is too short to
// hold one.
func dnsAnswerID(msg []byte) (uint16, bool) {
	if len(msg) < 2 {
		return 0, false
	}
	return binary.BigEndian.Uint16(msg), true
}

// checkDNSAnswer judges an answer to q sent with id: OK for NOERROR to
// the question asked (an answer without records, NODATA, is still the
// server working), else AnswerError and the reason. It allocates
// nothing.
func checkDNSAnswer(msg []byte, id uint16, q *dnsmessage.Question) (Outcome, string) {
	var p dnsmessage.Parser
	h, err := p.Start(msg)
	switch {
	case err != nil || !h.Response:
		return AnswerError, ReasonMalformed
	case h.ID != id:
		return AnswerError, ReasonWrongID
	case h.Truncated:
		return AnswerError, ReasonTruncated
	}
	switch h.RCode {
	case dnsmessage.RCodeSuccess:
	case dnsmessage.RCodeFormatError:
		return AnswerError, ReasonFormErr
	case dnsmessage.RCodeServerFailure:
		return AnswerError, ReasonServFail
	case dnsmessage.RCodeNameError:
		return AnswerError, ReasonNXDomain
	case dnsmessage.RCodeNotImplemented:
		return AnswerError, ReasonNotImp
	case dnsmessage.RCodeRefused:
		return AnswerError, ReasonDNSRefused
	default:
		return AnswerError, ReasonRCodeOther
	}
	got, err := p.Question()
	if err != nil {
		return AnswerError, ReasonMalformed
	}
	if got.Type != q.Type || got.Class != q.Class || !sameDNSName(&got.Name, &q.Name) {
		return AnswerError, ReasonWrongQuestion
	}
	return OK, ""
}

// sameDNSName compares names as DNS does, ASCII case-insensitively: a
// server may echo the question's case as it stores it.
func sameDNSName(a, b *dnsmessage.Name) bool {
	if a.Length != b.Length {
		return false
	}
	for i := range int(a.Length) {
		x, y := a.Data[i], b.Data[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
