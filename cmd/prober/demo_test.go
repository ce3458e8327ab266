package main

import (
	"context"

	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/lab/labtest"
)

// TestNamespaceLoss is issue 2's end-to-end test, through the same code as
// `make demo`: two hosts joined by routers in network namespaces, the real
// agent on each probing the other, then random loss injected on one link
// with an nftables numgen rule. Each agent must measure what was injected.
func TestNamespaceLoss(t *testing.T) {
	labtest.NeedNetAdmin(t)
	const permille = 200
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := pairDemo(ctx, pairDemoOptions{
		exe: os.Args[0], env: []string{"PROBER_TEST_AS_MAIN=1"},
		prefix: labtest.Prefix(t), permille: permille, window: 6 * time.Second,
		out: io.MultiWriter(&out, testWriter{t, &strings.Builder{}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// 6 s at 10 ms, a lost probe holding its flow for the 50 ms timeout:
	// ~330 icmp and ~1,300 tcp_syn probes per direction under 20% loss.
	// 12-28% is then 3.6 standard deviations each side for icmp (sd 2.2%)
	// and over 7 for tcp_syn.
	for _, agent := range []string{"n11", "n21"} {
		for _, proto := range []string{"icmp", "tcp_syn"} {
			key := agent + "/" + proto
			h, ok := res.healthy[key]
			if !ok {
				t.Fatalf("healthy: no %s measurement", key)
			}
			if h.Sent < 200 || h.Lost != 0 {
				t.Errorf("healthy %s: sent %d lost %d, want >= 200 sent and 0 lost", key, h.Sent, h.Lost)
			}
			f := res.faulty[key]
			if f.Sent < 200 || f.LossRatio < 0.12 || f.LossRatio > 0.28 {
				t.Errorf("20%% loss %s: sent %d lost %d = %.1f%%, want 12-28%%", key, f.Sent, f.Lost, 100*f.LossRatio)
			}
			if proto == "tcp_syn" {
				if len(f.Flows) != 4 {
					t.Fatalf("%s: %d flows, want 4", key, len(f.Flows))
				}
				for _, fl := range f.Flows {
					if fl.Lost == 0 {
						t.Errorf("%s flow %d saw no loss under 20%% random loss", key, fl.SourcePort)
					}
				}
			}
		}
	}
	for _, want := range []string{"building the fabric", "injecting 20% random loss", "cleaning up"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// testWriter logs whole lines, leaving out progress bars.
type testWriter struct {
	t   *testing.T
	buf *strings.Builder
}

func (w testWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	for {
		s := w.buf.String()
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return len(b), nil
		}
		if line := s[:i]; !strings.Contains(line, "\r") {
			w.t.Log(line)
		}
		w.buf.Reset()
		w.buf.WriteString(s[i+1:])
	}
}
