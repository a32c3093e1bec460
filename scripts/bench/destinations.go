package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/grpcproxy"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

var (
	destMessages = flag.Int("destinations_messages", 30000, "messages per run of the emulator's many-destinations case, 1 KiB")
	destTopics   = flag.Int("destinations_topics", 300, "topics of the emulator's many-destinations case, in round robin")
	destTarget   = flag.Float64("destinations_target", 20, "fewest messages per Publish RPC the sink must send at its defaults in the emulator's many-destinations case")
)

// publishMethod is the RPC the destinations case counts.
const publishMethod = "/google.pubsub.v1.Publisher/Publish"

// measureEmulatorDestinations writes 1 KiB messages over many topics in
// round robin to the emulator with the sink at its defaults, the sink
// with the client's 10 ms DelayThreshold, and raw publishers (writeRaw),
// each run through a proxy that counts Publish RPCs. Most topics see a
// trickle: how many messages an RPC carries is what batching buys. The
// proxy runs in this process, so its CPU is in every contender's.
func measureEmulatorDestinations(ctx context.Context, e *env) (string, []string, error) {
	var publishes atomic.Int64
	proxy, err := grpcproxy.Start(e.conn.EmulatorEndpoint, func(method string, fromClient bool, msg []byte) ([]byte, error) {
		if fromClient && method == publishMethod {
			publishes.Add(1)
		}
		return msg, nil
	})
	if err != nil {
		return "", nil, err
	}
	defer proxy.Stop()
	counted, err := newEnv(ctx, proxy.Addr)
	if err != nil {
		return "", nil, err
	}
	defer counted.close()
	counted.jobServer = e.jobServer

	c := writeCase{size: 1024, topics: *destTopics, messages: *destMessages}
	tenMillis := pubsubio.WriteConfig{Publisher: pubsubio.PublisherOptions{DelayThreshold: 10 * time.Millisecond}}
	entrants := []struct {
		name  string
		write func(context.Context, []pair) (float64, error)
		rate  contender
		rpcs  []float64
	}{
		{name: "sink, defaults", write: func(ctx context.Context, ps []pair) (float64, error) { return writeWithSink(ctx, counted, c, ps) }},
		{name: "sink, DelayThreshold 10 ms", write: func(ctx context.Context, ps []pair) (float64, error) {
			return writeWithSinkConfig(ctx, counted, c, ps, tenMillis)
		}},
		{name: "raw, a publisher per topic", write: func(ctx context.Context, ps []pair) (float64, error) { return writeRaw(ctx, counted, c, ps) }},
	}
	for run := range *runs {
		for i := range entrants {
			k := &entrants[(i+run)%len(entrants)]
			ps, err := e.newPairs(ctx, "d", c.topics)
			if err != nil {
				return "", nil, err
			}
			before := publishes.Load()
			s, err := measured(k.name, c.messages, func() (float64, error) { return k.write(ctx, ps) })
			rpcs := publishes.Load() - before
			e.drop(ctx, ps)
			if err != nil {
				k.rate.fail(k.name, run, err)
				continue
			}
			perRPC := float64(c.messages) / float64(max(rpcs, 1))
			fmt.Printf("  destinations on the emulator, %-28s %8.0f msg/s  %.1f msgs per Publish\n", k.name, s.rate, perRPC)
			k.rate.add(s)
			k.rpcs = append(k.rpcs, perRPC)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| %d topics round robin on the emulator (1 KiB, %d msgs) | msg/s | / raw | messages per Publish RPC | CPU µs/msg |\n|---|---|---|---|---|\n",
		c.topics, c.messages)
	raw := entrants[len(entrants)-1].rate.rate()
	for _, k := range entrants {
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.1f | %s |\n", k.name, k.rate.rate(), per(k.rate.rate(), raw), median(k.rpcs), micros(k.rate.cpu()))
	}
	var misses []string
	if got := median(entrants[0].rpcs); got < *destTarget {
		misses = append(misses, fmt.Sprintf("destinations on the emulator: the sink at its defaults sent %.1f messages per Publish RPC, under %.0f", got, *destTarget))
	}
	return b.String(), misses, nil
}
