package api

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// The matrix signs each pull of an agent with the agent's pull key
// (Authorization: Prober-Pull t=<unix ns>,mac=<base64url>) rather than
// sending the key: the key then crosses the network only inside the
// agents' long-poll, which TLS protects, and a request read off the wire
// is good for nothing but itself, once, within PullWindow.
const (
	PullAuthScheme = "Prober-Pull"
	// PullWindow is how far a signed request's time may be from the
	// agent's clock: nodes' clocks drift, and a replay is refused anyway.
	PullWindow = 5 * time.Minute
)

// SignPull is the Authorization header of a request of method to uri
// (its path and query, as sent) at t.
func SignPull(key, method, uri string, t time.Time) string {
	ns := strconv.FormatInt(t.UnixNano(), 10)
	return PullAuthScheme + " t=" + ns + ",mac=" + base64.RawURLEncoding.EncodeToString(pullMAC(key, method, uri, ns))
}

func pullMAC(key, method, uri, ns string) []byte {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(ns + "\n" + method + "\n" + uri))
	return m.Sum(nil)
}

// VerifyPull checks header, a SignPull of method and uri, against key at
// now; it returns the request's MAC, which names it for a replay check.
func VerifyPull(key, header, method, uri string, now time.Time) (mac string, ok bool) {
	rest, found := strings.CutPrefix(header, PullAuthScheme+" t=")
	if !found {
		return "", false
	}
	ns, mac, found := strings.Cut(rest, ",mac=")
	if !found || len(ns) > 20 || len(mac) != base64.RawURLEncoding.EncodedLen(sha256.Size) {
		return "", false
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil || strconv.FormatInt(n, 10) != ns {
		return "", false
	}
	if d := now.Sub(time.Unix(0, n)); d > PullWindow || d < -PullWindow {
		return "", false
	}
	got, err := base64.RawURLEncoding.Strict().DecodeString(mac)
	if err != nil || !hmac.Equal(got, pullMAC(key, method, uri, ns)) {
		return "", false
	}
	return mac, true
}
