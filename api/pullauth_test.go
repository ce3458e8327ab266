package api

import (
	"strings"
	"testing"
	"time"
)

func TestPullAuth(t *testing.T) {
	now := time.Unix(1_800_000_000, 123)
	h := SignPull("key1", "GET", "/api/v1/observations", now)
	if strings.Contains(h, "key1") {
		t.Fatalf("the header %q carries the key", h)
	}
	mac, ok := VerifyPull("key1", h, "GET", "/api/v1/observations", now.Add(time.Second))
	if !ok || mac == "" {
		t.Fatalf("a fresh signature refused: %q", h)
	}
	if again := SignPull("key1", "GET", "/api/v1/observations", now.Add(time.Nanosecond)); again == h {
		t.Error("two requests a nanosecond apart signed alike: a replay check could not tell them apart")
	}
	for name, tc := range map[string]struct {
		key, header, method, uri string
		at                       time.Time
	}{
		"another key":      {"key2", h, "GET", "/api/v1/observations", now},
		"another method":   {"key1", h, "POST", "/api/v1/observations", now},
		"another uri":      {"key1", h, "GET", "/api/v1/trace?target=x", now},
		"too late":         {"key1", h, "GET", "/api/v1/observations", now.Add(PullWindow + time.Second)},
		"too early":        {"key1", h, "GET", "/api/v1/observations", now.Add(-PullWindow - time.Second)},
		"bearer":           {"key1", "Bearer key1", "GET", "/api/v1/observations", now},
		"empty":            {"key1", "", "GET", "/api/v1/observations", now},
		"time respelled":   {"key1", strings.Replace(h, "t=", "t=0", 1), "GET", "/api/v1/observations", now},
		"mac padded":       {"key1", h + "=", "GET", "/api/v1/observations", now},
		"no mac":           {"key1", strings.Split(h, ",")[0], "GET", "/api/v1/observations", now},
		"huge time":        {"key1", PullAuthScheme + " t=99999999999999999999999,mac=" + strings.Split(h, "mac=")[1], "GET", "/api/v1/observations", now},
		"negative time":    {"key1", strings.Replace(h, "t=", "t=-", 1), "GET", "/api/v1/observations", now},
		"mac of another t": {"key1", strings.Replace(h, "t=1800000000000000123", "t=1800000000000000124", 1), "GET", "/api/v1/observations", now},
	} {
		if _, ok := VerifyPull(tc.key, tc.header, tc.method, tc.uri, tc.at); ok {
			t.Errorf("%s: accepted %q", name, tc.header)
		}
	}
}

func BenchmarkPullAuth(b *testing.B) {
	now := time.Unix(1_800_000_000, 0)
	for range b.N {
		h := SignPull("0123456789abcdef0123456789abcdef0123456789ab", "GET", "/api/v1/observations", now)
		if _, ok := VerifyPull("0123456789abcdef0123456789abcdef0123456789ab", h, "GET", "/api/v1/observations", now); !ok {
			b.Fatal("refused")
		}
	}
}
