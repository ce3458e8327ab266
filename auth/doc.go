// Package auth verifies the projected ServiceAccount tokens agents present
// to the matrix, locally, against the API server's published signing keys
// (its JWKS): no TokenReview, no API call per request. It holds no I/O:
// peers fetches the keys, hub asks.
package auth
