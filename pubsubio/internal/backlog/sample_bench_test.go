package backlog_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/integration/monitoring"
	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/backlog"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// BenchmarkSampleRound is what the read's sampling costs a worker: one
// round of every subscription it reads, which the sampler runs once a
// minute, against the fake Cloud Monitoring in this process, each
// subscription with three points per metric. It reports the calls per
// round (RPCs per minute per worker) and the process CPU per round
// (client and fake server together, so an upper bound on the worker's).
//
//	go test ./pubsubio/internal/backlog/ -run '^$' -bench SampleRound -benchtime 20x
func BenchmarkSampleRound(b *testing.B) {
	for _, n := range []int{1, 40, 1000} {
		b.Run(fmt.Sprintf("subs=%d", n), func(b *testing.B) {
			srv, err := monitoring.NewServer()
			if err != nil {
				b.Fatal(err)
			}
			defer srv.Close()
			c, err := backlog.NewClient(context.Background(), connection.Settings{EmulatorEndpoint: "127.0.0.1:1", MonitoringEndpoint: srv.Addr})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			subs := make([]model.Subscription, n)
			for i := range subs {
				subs[i] = model.Subscription{Project: "p", ID: fmt.Sprintf("sub-%d", i)}
				for _, m := range backlog.Metrics {
					for k := 1; k <= 3; k++ {
						srv.Add(subs[i], m, now.Add(-time.Duration(k)*time.Minute), int64(k))
					}
				}
			}
			calls := len(srv.Requests())
			cpu := processCPU()
			b.ResetTimer()
			for range b.N {
				got, err := c.Sample(context.Background(), subs, now)
				if err != nil || len(got) != n {
					b.Fatalf("%d samples, %v; want %d", len(got), err, n)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(len(srv.Requests())-calls)/float64(b.N), "RPCs/round")
			b.ReportMetric(float64(processCPU()-cpu)/float64(time.Millisecond)/float64(b.N), "CPU-ms/round")
		})
	}
}

// processCPU is the user and system CPU time the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
