#!/usr/bin/env bash
# Maps the paths of 32 flows with `prober trace` and with a loop of
# Debian's `traceroute -T --sport` (seed 004's method) in a lab of 3
# spines and 2 racks whose routers keep Linux's default ICMP rate limit,
# and prints time and correctness (docs/performance.md, "Traceroute").
# Needs root, traceroute (hack/deps.sh) and a built prober:
#
#   make build && sudo hack/trace-compare.sh ./bin/prober [RUNS] [SPORT_BASE...]
#
# The lab (prefix trcmp) is created here and removed on exit. It takes
# about 100 s per port range: the loop is 90 s of it.
set -euo pipefail

prober=${1:?usage: $0 PROBER [RUNS] [SPORT_BASE...]}
runs=${2:-10}
shift $(($# < 2 ? $# : 2))
bases=("${@:-64000}")
prober=$(realpath "$prober")
command -v traceroute >/dev/null || { echo "$0: traceroute not installed (hack/deps.sh)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "$0: python3 is needed to read the JSON" >&2; exit 1; }

dst=198.19.2.11
ns=/run/netns/trcmp-n11
work=$(mktemp -d)
cleanup() {
	"$prober" lab down --prefix trcmp >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
echo "building the lab (3 spines, 2 racks, Linux's default ICMP rate limit)..."
"$prober" lab up --prefix trcmp --spines 3 --racks 2 --nodes 1 --pods -1 --lb=false >/dev/null

for base in "${bases[@]}"; do
	sleep 7 # the routers' ICMP bursts refill
	echo "traceroute loop, source ports $base-$((base + 31)) (about 90 s)..."
	start=$(date +%s.%N)
	for p in $(seq "$base" $((base + 31))); do
		echo "sport $p"
		nsenter --net="$ns" traceroute -T -n --sport="$p" -p 9808 "$dst"
	done >"$work/loop" 2>&1
	end=$(date +%s.%N)
	loop=$(echo "$end - $start" | bc)
	# The loop's hop-2 answer per source port is the reference.
	python3 - "$work/loop" "$work/truth.json" <<'PY'
import json, sys
truth, port = {}, None
for line in open(sys.argv[1]):
    f = line.split()
    if f[:1] == ["sport"]:
        port = f[1]
    elif f[:1] == ["2"] and port:
        addrs = [x for x in f[1:] if x.count(".") == 3]
        if addrs:
            truth[port] = addrs[0]
json.dump(truth, open(sys.argv[2], "w"))
PY
	echo "loop: $loop s"
	for i in $(seq 1 "$runs"); do
		sleep 7
		start=$(date +%s.%N)
		nsenter --net="$ns" "$prober" trace --flows 32 --port 9808 --probes 1 --sport-base "$base" --json "$dst" 2>/dev/null >"$work/trace.json"
		end=$(date +%s.%N)
		python3 - "$work/trace.json" "$work/truth.json" "$(echo "$end - $start" | bc)" "$loop" "$i" <<'PY'
import json, sys
rep, truth = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
wall, loop = float(sys.argv[3]), float(sys.argv[4])
right = sum(1 for f in rep["flows"] if len(f["hops"]) == 4 and f["hops"][1] == truth.get(str(f["sourcePort"])))
inferred = sum(1 for f in rep["flows"] if 2 in (f.get("inferredTTLs") or []))
per = sorted((len(p["sourcePorts"]) for p in rep["paths"]), reverse=True)
print(f"prober run {sys.argv[5]}: {wall:.2f} s wall, {right}/32 paths right, {inferred} spine hops inferred, flows per path {per}, {loop / wall:.1f}x the loop")
PY
	done
done
