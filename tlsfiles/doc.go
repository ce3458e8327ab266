// Package tlsfiles serves TLS from PEM files that change while the
// process runs: a Secret's tls.crt and tls.key that cert-manager or the
// chart rotates, a CA bundle in a mounted volume. Each is re-read on a
// handshake at most once per Every, and only when the file changed; a
// file that stops parsing keeps the last good one in use and says why.
package tlsfiles
