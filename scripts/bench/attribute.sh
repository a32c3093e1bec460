#!/usr/bin/env bash
# Attributes a read profile of the bench to who spent it, per message:
#
#   go build -o /tmp/bench ./scripts/bench
#   /tmp/bench --cases=saturation --runs=1 --only="1024 B, 1 split(s) x 1" \
#       --sat_read_messages=200000 --contenders=source-worker --cpuprofile=/tmp/cpu.prof
#   scripts/bench/attribute.sh /tmp/bench /tmp/cpu.prof 200000
#
# Each category takes the samples under its roots that no earlier category
# took, so the rows add up; the backlog's publishing comes first and is
# left out of the total per message.
set -euo pipefail
bin=$1 prof=$2 messages=$3

categories=(
	"backlog publishing (not the contender)|env..backlog|publishMessageBundle|bundler"
	"the source's callback (intake, decode, ack ID)|clientPuller..receive.func1"
	"the source's bundle (emit, claim, ack after commit)|readFn..runBundle"
	"Beam harness (bundles, progress, data channel)|beam/sdks/v2/go/pkg/beam/core/runtime/harness"
	"client: streaming pull, unmarshal|messageIterator..receive$|recordingStream"
	"client: callback goroutine per message|runtime.newproc|Receive.func2.2.2$|ReceiveScheduler"
	"client: acks and lease extensions|sendAck|sendModAck|ackManager|Acknowledge|ModifyAckDeadline|messageIterator..sender"
	"gRPC transport|http2Client|http2Server|loopyWriter"
	"garbage collector (background)|gcBgMarkWorker|bgsweep|bgscavenge"
	"scheduler|runtime.mcall|runtime.schedule|findRunnable|park_m|goexit0"
)

seconds() { # pprof's total for focus $1, ignoring $2
	go tool pprof -focus="$1" ${2:+-ignore="$2"} -top -nodefraction=0 -nodecount=100000 "$bin" "$prof" 2>/dev/null |
		awk '/Showing nodes accounting for/ { v = $5; sub(/,$/, "", v); if (v ~ /ms$/) { sub(/ms$/, "", v); v /= 1000 } else sub(/s$/, "", v); print v; exit }'
}

total=$(go tool pprof -top -nodecount=1 "$bin" "$prof" 2>/dev/null | awk '/Total samples/ { v = $(NF-1); if (v ~ /ms$/) { sub(/ms$/, "", v); v /= 1000 } else sub(/s$/, "", v); print v }')
ignore="" counted=0 backlog=0
printf "| %s | %s |\n|---|---|\n" "where" "µs per message"
for c in "${categories[@]}"; do
	name=${c%%|*} roots=${c#*|}
	s=$(seconds "$roots" "$ignore"); s=${s:-0}
	if [ -z "$ignore" ]; then backlog=$s; else printf "| %s | %.2f |\n" "$name" "$(echo "$s * 1000000 / $messages" | bc -l)"; fi
	counted=$(echo "$counted + $s" | bc -l)
	ignore=${ignore:+$ignore|}$roots
done
printf "| %s | %.2f |\n" "everything else" "$(echo "($total - $counted) * 1000000 / $messages" | bc -l)"
printf "| **total, without the backlog** | **%.2f** |\n" "$(echo "($total - $backlog) * 1000000 / $messages" | bc -l)"
