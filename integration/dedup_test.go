package integration

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

func init() {
	register.Function1x1(inputIDOf)
	register.Function1x1(inputAndMessageID)
}

// inputIDOf is the input ID a crash output message carries.
func inputIDOf(m pubsubio.Message) string { return m.Attributes[crash.InputIDAttribute] }

// inputAndMessageID keys one output message: its input ID and its own.
func inputAndMessageID(m pubsubio.Message) string { return inputIDOf(m) + "/" + m.ID }

// verifyDeduplicated reads kept, a subscription that kept every copy a
// crash test's runs published, with a bounded read on Prism through
// Deduplicate keyed on the input ID attribute, and checks that every input
// ID comes out exactly once, whatever the copies: exactly once at the
// output, from an at-least-once pipeline. At least atLeast input IDs must
// have copies (the test republishes that many: Topology.RepublishOutputs),
// or the check proves nothing. It logs how many copies there were.
func verifyDeduplicated(t *testing.T, e *emulator.Emulator, kept pubsubio.Subscription, ids []string, atLeast int) {
	t.Helper()
	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: []pubsubio.Subscription{kept},
		IdleTimeout:   15 * time.Second,
		Connection:    pubsubio.Connection{EmulatorEndpoint: e.Endpoint},
	})
	raw, deduped := collect.Bucket(t), collect.Bucket(t)
	collect.Into(s, raw, beam.ParDo(s, inputAndMessageID, msgs))
	// Event time: the bounded read ends with its input. Every copy was
	// published within the test's hour: the read's watermark, which follows
	// the clock when the subscription is idle, never passes the first
	// copy's publish time plus the horizon while the read runs.
	once := pubsubio.Deduplicate(s, pubsubio.DedupConfig{IDAttribute: crash.InputIDAttribute, TimeDomain: pubsubio.DedupEventTime, Horizon: time.Hour}, msgs)
	collect.Into(s, deduped, beam.ParDo(s, inputIDOf, once))
	ctx, cancel := runContext(5 * time.Minute)
	defer cancel()
	if err := beamx.Run(ctx, p); err != nil {
		t.Fatalf("the deduplicating read failed: %v", err)
	}

	copies := map[string]int{} // input ID -> distinct output messages read
	for key := range tally(t, raw) {
		in, _, _ := strings.Cut(key, "/")
		copies[in]++
	}
	got := tally(t, deduped)
	want := map[string]bool{}
	var wrong []string
	duplicated, total := 0, 0
	for _, id := range ids {
		want[id] = true
		total += copies[id]
		if copies[id] > 1 {
			duplicated++
		}
		if got[id] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s×%d (of %d copies read)", id, got[id], copies[id]))
		}
	}
	for id := range got {
		if !want[id] {
			wrong = append(wrong, "unexpected "+id)
		}
	}
	sort.Strings(wrong)
	t.Logf("DEDUP SUMMARY inputs=%d output_copies_read=%d inputs_with_copies=%d deduplicated=%d wrong=%d",
		len(ids), total, duplicated, collect.Len(deduped), len(wrong))
	if duplicated < atLeast {
		t.Errorf("only %d input IDs had more than one copy on the output, want at least the %d republished: the deduplication was not tested", duplicated, atLeast)
	}
	if len(wrong) > 0 {
		t.Errorf("after Deduplicate, %d of %d input IDs were not emitted exactly once (ID×times), e.g. %v", len(wrong), len(ids), wrong[:min(10, len(wrong))])
	}
}
