package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/cmd/internal/cli"
)

func TestTraceFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no host", nil, "exactly one HOST is required"},
		{"two hosts", []string{"192.0.2.1", "192.0.2.2"}, "exactly one HOST is required"},
		{"flows", []string{"--flows", "0", "192.0.2.1"}, "--flows: 0 not in 1..256"},
		{"port", []string{"--port", "70000", "192.0.2.1"}, "--port: 70000 not in 1..65535"},
		{"probes", []string{"--probes", "101", "192.0.2.1"}, "--probes: 101 not in 1..100"},
		{"max-ttl", []string{"--max-ttl", "65", "192.0.2.1"}, "--max-ttl: 65 not in 1..64"},
		{"retries", []string{"--retries", "-1", "192.0.2.1"}, "--retries: -1 not in"},
		{"rate", []string{"--rate", "0", "192.0.2.1"}, "must be positive"},
		{"source", []string{"--source", "garbage", "192.0.2.1"}, `--source: "garbage" is not a unicast IP address`},
		{"source family", []string{"-4", "--source", "2001:db8::1", "192.0.2.1"}, "--source: 2001:db8::1 is not ipv4"},
		{"both families", []string{"-4", "-6", "192.0.2.1"}, "-4 and -6: pick one family"},
		{"sport-base", []string{"--sport-base", "80", "192.0.2.1"}, "--sport-base: 80 leaves no room"},
		{"unknown flag", []string{"--bogus", "192.0.2.1"}, "flag provided but not defined: -bogus"},
		// Flags after HOST are parsed too (nothing is sent: the value
		// is refused first).
		{"flag after host", []string{"192.0.2.1", "--flows", "300"}, "--flows: 300 not in 1..256"},
		{"unknown flag after host", []string{"192.0.2.1", "--bogus"}, "flag provided but not defined: -bogus"},
		{"two hosts around a flag", []string{"192.0.2.1", "--json", "192.0.2.2"}, "exactly one HOST is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runArgs(append([]string{"trace"}, tc.args...)...)
			if code != cli.ExitUsage {
				t.Errorf("exit %d, want %d (stderr %q)", code, cli.ExitUsage, errOut)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr %q lacks %q", errOut, tc.want)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
		})
	}
}

// TestTraceNoPrivilege checks the message an operator without
// CAP_NET_RAW gets. The probe sockets are never opened, so nothing is
// sent to the documentation address.
func TestTraceNoPrivilege(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("runs as root, which has CAP_NET_RAW; the non-root run of the suite covers this")
	}
	code, _, errOut := runArgs("trace", "--source", "127.0.0.1", "192.0.2.1")
	if code != cli.ExitRuntime || strings.Count(errOut, "CAP_NET_RAW") != 1 || !strings.Contains(errOut, "setcap cap_net_raw+ep") {
		t.Errorf("exit %d stderr %q, want %d naming CAP_NET_RAW once and how to grant it", code, errOut, cli.ExitRuntime)
	}
}

// TestTraceProgressNotATerminal: progress to a pipe or log prints whole
// lines, no carriage returns.
func TestTraceProgressNotATerminal(t *testing.T) {
	t.Parallel()
	var buf strings.Builder // written by progress's goroutine, read after stop
	stop := progress(&buf, "tracing 32 flows to 198.18.0.1:80", time.Now().Add(-3*time.Second), 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	stop()
	got := buf.String()
	lines := strings.SplitAfter(got, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 || strings.Contains(got, "\r") {
		t.Fatalf("progress wrote %q, want whole lines and no carriage return", got)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "tracing 32 flows to 198.18.0.1:80... 3s") || !strings.HasSuffix(l, "\n") {
			t.Errorf("progress line %q, want %q ending in a newline", l, "tracing 32 flows to 198.18.0.1:80... 3s")
		}
	}
}
