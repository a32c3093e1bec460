package dlq

import (
	"math"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.Function1x1(describeOriginal)
}

func describeOriginal(m model.Message) string {
	return string(m.Data) + "->" + m.Topic.ID + m.Subscription.ID
}

func TestMain(m *testing.M) {
	ptest.Main(m)
}

// An invalid configuration or input is rejected at graph construction,
// naming the option; Write panics with what TryWrite returns.
func TestTryWriteRejectsAtConstruction(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	failed := beam.Create(s, failures(1)[0])
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"no topic", Config{}, []string{"Topic is unset", "must exist"}},
		{"bad topic", Config{Topic: model.TopicOf("p", "x")}, []string{"Topic:", `"p"`}},
		{"bound", Config{Topic: dlqTopic, MaxInFlightMessages: -2}, []string{"MaxInFlightMessages -2", "synchronously", "-1"}},
		{"timeouts", Config{Topic: dlqTopic, FlushTimeout: -1, ShutdownTimeout: -1}, []string{"FlushTimeout -1ns must be between 100ms and 1h0m0s", "ShutdownTimeout -1ns must be between"}},
		{"flush timeout overflowing the client's", Config{Topic: dlqTopic, FlushTimeout: math.MaxInt64}, []string{"FlushTimeout 2562047h47m16.854775807s must be between 100ms and 1h0m0s"}},
		{"connection", Config{Topic: dlqTopic, Connection: connection.Settings{EmulatorEndpoint: "localhost"}}, []string{"EmulatorEndpoint", "missing port"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := TryWrite(s, tc.cfg, failed)
			if err == nil {
				t.Fatal("TryWrite accepted it")
			}
			for _, w := range append(tc.want, "dlq.Write: invalid configuration") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if err := TryWrite(s, Config{Topic: dlqTopic}, beam.Create(s, "a")); err == nil || !strings.Contains(err.Error(), "PCollection<string>") {
		t.Errorf("TryWrite on PCollection<string>: %v", err)
	}
	if err := TryWrite(s, Config{Topic: dlqTopic, MaxInFlightMessages: Synchronous}, failed); err != nil {
		t.Errorf("TryWrite with a valid configuration: %v", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "FlushTimeout") {
			t.Errorf("Write with a negative FlushTimeout: recovered %v, want a panic naming the option", r)
		}
	}()
	Write(s, Config{Topic: dlqTopic, FlushTimeout: -1}, failed)
}

// On Prism: Write publishes every dead letter before the pipeline ends, and
// a missing topic fails the pipeline naming it.
func TestWriteOnPrism(t *testing.T) {
	f := newFakeServer(t, false, nil)
	sent := failures(50)
	p, s := beam.NewPipelineWithRoot()
	Write(s, Config{Topic: dlqTopic, Connection: connection.Settings{EmulatorEndpoint: f.srv.Addr}}, beam.CreateList(s, sent))
	if err := ptest.Run(p); err != nil {
		t.Fatalf("pipeline failed: %v", err)
	}
	if err := samePayloads(f.deadLetters(t), sent); err != nil {
		t.Fatal(err)
	}

	missing := newFakeServer(t, true, nil)
	p, s = beam.NewPipelineWithRoot()
	Write(s, Config{Topic: dlqTopic, Connection: connection.Settings{EmulatorEndpoint: missing.srv.Addr}}, beam.CreateList(s, sent[:2]))
	err := ptest.Run(p)
	if err == nil || !strings.Contains(err.Error(), dlqTopic.String()) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a pipeline writing to a missing dead-letter topic: %v, want a failure naming it", err)
	}
}

// Originals recovers the original messages of dead letters in a pipeline.
func TestOriginalsOnPrism(t *testing.T) {
	fs := sampleFailures()
	p, s := beam.NewPipelineWithRoot()
	got := beam.ParDo(s, describeOriginal, Originals(s, beam.CreateList(s, fs)))
	passert.Equals(s, got, `{"order": 1->orders-sub`, "payload->orders", "\xff\x00\xfe->orders")
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}
