package source

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/sdf"
	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// decodeBatch is one bundle's worth of deliveries where the third payload
// is not JSON (after two that are) and the fifth has a malformed timestamp
// attribute, each followed by a good message.
type decodeBatch struct {
	h       *readerHarness
	fn      *readFn
	rt      *sdf.LockRTracker
	handles map[string]*fakeHandle
	emitted []string
	dead    []dlq.FailedMessage
}

// poisonData is what the poison messages carry.
var poisonData = map[string]string{"bad-json": `{"n":`, "bad-ts": `{}`}

// newDecodeBatch delivers the batch to a reader reading JSON with a
// timestamp attribute under policy, after edit.
func newDecodeBatch(t *testing.T, policy model.DecodePolicy, edit func(*Config)) *decodeBatch {
	t.Helper()
	cfg := testConfig(t, func(c *Config) {
		c.Format = model.FormatJSON
		c.DecodePolicy = policy
		c.TimestampAttribute = "ts"
		if edit != nil {
			edit(c)
		}
	})
	b := &decodeBatch{
		h:       newReaderHarness(t, cfg),
		fn:      &readFn{Cfg: cfg},
		rt:      sdf.NewLockRTracker(newTracker(Restriction{}, processID)),
		handles: map[string]*fakeHandle{},
	}
	run := b.h.poll()
	attempt := 3
	for _, m := range []*pubsub.Message{
		msg("good-0", `{"n":0}`),
		msg("good-1", `[1]`),
		{ID: "bad-json", Data: []byte(poisonData["bad-json"]), DeliveryAttempt: &attempt, PublishTime: msg("", "").PublishTime},
		msg("good-2", `"two"`),
		{ID: "bad-ts", Data: []byte(poisonData["bad-ts"]), Attributes: map[string]string{"ts": "yesterday"}, PublishTime: msg("", "").PublishTime},
		msg("good-3", `3`),
	} {
		b.handles[m.ID] = &fakeHandle{}
		deliverTo(b.h.r, run, m, b.handles[m.ID], "ack-"+m.ID)
	}
	return b
}

// process drains and emits the batch as one bundle of the read SDF would,
// and returns the ack IDs it claimed.
func (b *decodeBatch) process() ([]string, error) {
	batch := drain(b.h.r, 100, 1)
	out, err := b.fn.emitBatch(b.h.r, b.rt, 1, time.Time{}, batch,
		func(_ beam.EventTime, m model.Message) { b.emitted = append(b.emitted, m.ID) },
		func(_ beam.EventTime, f dlq.FailedMessage) { b.dead = append(b.dead, f) })
	if err != nil {
		return nil, err
	}
	b.h.r.endBundle(out.nacks, b.fn.Cfg.watermarkPolicy())
	claimed := make([]string, len(out.claimed))
	for i, id := range out.claimed {
		claimed[i] = string(id)
	}
	return claimed, nil
}

// commit acks what the bundle claimed, as the split's next bundle does.
func (b *decodeBatch) commit(claimed []string) { ack(b.h.r, claimed) }

var goodIDs = []string{"good-0", "good-1", "good-2", "good-3"}

func (b *decodeBatch) checkGoodAcked(t *testing.T) {
	t.Helper()
	if diff := cmp.Diff(goodIDs, b.emitted); diff != "" {
		t.Errorf("emitted messages (-want +got):\n%s", diff)
	}
	for _, id := range goodIDs {
		b.handles[id].check(t, id, 1, 0)
	}
	b.h.checkCount("messages_emitted", messagesEmitted, int64(len(goodIDs)))
}

func TestDecodeFailFailsTheBundleNamingTheMessage(t *testing.T) {
	b := newDecodeBatch(t, model.DecodeFail, nil)
	_, err := b.process()
	if err == nil {
		t.Fatal("the bundle did not fail")
	}
	for _, want := range []string{"bad-json", "not JSON", "redelivered", string(model.DecodeDeadLetter)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// The poison message goes back at once; what the failed bundle emitted
	// before it stays leased for the retry, which fails again until the
	// publisher is fixed, and with it whatever the bundle had not reached.
	b.handles["bad-json"].check(t, "bad-json", 0, 1)
	for _, id := range []string{"good-0", "good-1"} {
		b.handles[id].check(t, id, 0, 0)
	}
	b.h.checkCount("decode_failures", decodeFailures, 1)
	b.h.checkCount("messages_requeued", messagesRequeued, int64(len(b.handles)-1))
}

func TestDecodeFailOnAMalformedTimestamp(t *testing.T) {
	b := newDecodeBatch(t, model.DecodeFail, func(c *Config) { c.Format = model.FormatBytes }) // only the timestamp fails
	_, err := b.process()
	if err == nil || !strings.Contains(err.Error(), "bad-ts") || !strings.Contains(err.Error(), `"yesterday"`) {
		t.Fatalf("error %v does not name message bad-ts and its attribute value", err)
	}
}

func TestDecodeDropAcksWithTheBundleAndEmitsNothing(t *testing.T) {
	b := newDecodeBatch(t, model.DecodeDrop, nil)
	claimed, err := b.process()
	if err != nil {
		t.Fatalf("process: %v", err)
	}
	if len(claimed) != 6 {
		t.Errorf("claimed %d ack IDs, want all 6", len(claimed))
	}
	for _, id := range []string{"bad-json", "bad-ts"} {
		b.handles[id].check(t, id+" before the commit", 0, 0)
	}
	b.commit(claimed)
	b.checkGoodAcked(t)
	for _, id := range []string{"bad-json", "bad-ts"} {
		b.handles[id].check(t, id, 1, 0)
	}
	if len(b.dead) != 0 {
		t.Errorf("%d dead letters, want none", len(b.dead))
	}
	b.h.checkCount("decode_failures", decodeFailures, 2)
}

func TestDecodeNackNacksAtOnceAndDoesNotAckLater(t *testing.T) {
	b := newDecodeBatch(t, model.DecodeNack, nil)
	claimed, err := b.process()
	if err != nil {
		t.Fatalf("process: %v", err)
	}
	// Nacked with the bundle, before any commit.
	for _, id := range []string{"bad-json", "bad-ts"} {
		b.handles[id].check(t, id, 0, 1)
	}
	for _, id := range claimed {
		if strings.HasPrefix(id, "ack-bad") {
			t.Errorf("claimed %s: it would be acked after its nack", id)
		}
	}
	b.commit(claimed)
	b.checkGoodAcked(t)
	for _, id := range []string{"bad-json", "bad-ts"} {
		b.handles[id].check(t, id+" after the commit", 0, 1)
	}
	b.h.checkCount("decode_failures", decodeFailures, 2)
	b.h.checkCount("messages_nacked_decode", nackedDecode, 2)
}

func TestDecodeDeadLetterEmitsFailedMessagesAndAcksThem(t *testing.T) {
	b := newDecodeBatch(t, model.DecodeDeadLetter, nil)
	claimed, err := b.process()
	if err != nil {
		t.Fatalf("process: %v", err)
	}
	b.commit(claimed)
	b.checkGoodAcked(t)
	for _, id := range []string{"bad-json", "bad-ts"} {
		b.handles[id].check(t, id, 1, 0)
	}
	if len(b.dead) != 2 {
		t.Fatalf("%d dead letters, want 2", len(b.dead))
	}
	sub := b.fn.Cfg.Subscriptions[0]
	for i, want := range []struct {
		id, why  string
		attempts int
	}{{"bad-json", "not JSON", 3}, {"bad-ts", "yesterday", 0}} {
		f := b.dead[i]
		if f.Message.ID != want.id || f.Stage != dlq.StageDecode || f.Subscription != sub || f.Attempts != want.attempts ||
			!strings.Contains(f.Error, want.why) || f.Code != "" || f.Time.IsZero() {
			t.Errorf("dead letter %d = %+v; want message %s, stage decode, subscription %s, %d attempts, an error saying %q", i, f, want.id, sub, want.attempts, want.why)
		}
		if got := f.Original(); got.Subscription != sub || string(got.Data) != poisonData[want.id] {
			t.Errorf("dead letter %d's original = %+v", i, got)
		}
	}
	b.h.checkCount("decode_failures", decodeFailures, 2)
}

func TestDecodeBytesFormatAcceptsAnything(t *testing.T) {
	b := newDecodeBatch(t, model.DecodeFail, func(c *Config) {
		c.Format = model.FormatBytes
		c.TimestampAttribute = ""
	})
	claimed, err := b.process()
	if err != nil || len(claimed) != 6 {
		t.Fatalf("process: %d claimed, %v; want 6 and no error", len(claimed), err)
	}
}

func TestDecodeConfigRejectsUnknownFormatAndPolicy(t *testing.T) {
	cfg := validConfig()
	cfg.Format = "XML"
	cfg.DecodePolicy = "RETRY"
	_, _, err := cfg.withDefaults()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{`Format: "XML" is not a known format`, `DecodePolicy "RETRY" is unknown`, string(model.DecodeDeadLetter)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	cfg, _, err = validConfig().withDefaults()
	if err != nil || cfg.Format != model.FormatBytes || cfg.DecodePolicy != model.DecodeFail {
		t.Errorf("defaults: format %q, policy %q, %v; want BYTES and FAIL", cfg.Format, cfg.DecodePolicy, err)
	}
}

func TestReadRejectsDeadLetterPolicy(t *testing.T) {
	cfg := validConfig()
	cfg.DecodePolicy = model.DecodeDeadLetter
	_, s := beam.NewPipelineWithRoot()
	if _, err := TryRead(s, cfg); err == nil || !strings.Contains(err.Error(), "ReadWithDeadLetters") {
		t.Errorf("TryRead under DeadLetter: %v; want an error pointing at ReadWithDeadLetters", err)
	}
	if _, _, err := TryReadWithDeadLetters(s, cfg); err != nil {
		t.Errorf("TryReadWithDeadLetters: %v", err)
	}
}

// Construction refuses create options that would make a subscription
// DecodePolicy NACK cannot use: one without a dead-letter topic.
func TestNackPolicyNeedsADeadLetterTopicToCreate(t *testing.T) {
	sub := model.SubscriptionOf(testProject, "poisoned")
	topic := model.TopicOf(testProject, "events")
	bad := validConfig()
	bad.Subscriptions = []model.Subscription{sub}
	bad.DecodePolicy = model.DecodeNack
	bad.Setup = []SubscriptionSetup{{Subscription: sub, Create: SubscriptionCreateOptions{Topic: topic}}}
	if _, _, err := bad.withDefaults(); err == nil || !strings.Contains(err.Error(), "Setup[0].Create") || !strings.Contains(err.Error(), "DeadLetterTopic") {
		t.Errorf("construction with create options without DeadLetterTopic under Nack: %v; want an error saying to set it", err)
	}
	bad.Setup[0].Create.DeadLetterTopic = model.TopicOf(testProject, "dead")
	if _, _, err := bad.withDefaults(); err != nil {
		t.Errorf("construction with DeadLetterTopic under Nack: %v", err)
	}
}

func TestEventTime(t *testing.T) {
	publish := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	const attr = "ts"
	cases := []struct {
		name      string
		attribute string
		attrs     map[string]string
		want      time.Time
	}{
		{"no attribute configured", "", map[string]string{attr: "1700000000000"}, publish},
		{"attribute missing", attr, map[string]string{"other": "x"}, publish},
		{"no attributes at all", attr, nil, publish},
		{"RFC 3339", attr, map[string]string{attr: "2023-11-14T22:13:20Z"}, time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)},
		{"RFC 3339 with offset and fraction", attr, map[string]string{attr: "2023-11-14T23:13:20.123456789+01:00"},
			time.Date(2023, 11, 14, 22, 13, 20, 123456789, time.UTC)},
		{"Unix millis", attr, map[string]string{attr: "1700000000123"}, time.UnixMilli(1700000000123)},
		{"Unix millis zero", attr, map[string]string{attr: "0"}, time.UnixMilli(0)},
		{"Unix millis before the epoch", attr, map[string]string{attr: "-1000"}, time.UnixMilli(-1000)},
		// What Write(TimestampAttribute) stamps on an element at Beam's
		// minimum timestamp: the far end of the range, but in it.
		{"Beam's minimum timestamp", attr, map[string]string{attr: "-9223372036854775"}, mtime.MinTimestamp.ToTime()},
		{"the end of the global window", attr, map[string]string{attr: strconv.FormatInt(mtime.EndOfGlobalWindowTime.Milliseconds(), 10)}, mtime.EndOfGlobalWindowTime.ToTime()},
	}
	for _, c := range cases {
		got, err := eventTime(c.attribute, c.attrs, publish)
		if err != nil {
			t.Errorf("%s: error %v", c.name, err)
			continue
		}
		if !got.Equal(c.want) {
			t.Errorf("%s: eventTime = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEventTimeMalformedNamesAttributeAndValue(t *testing.T) {
	publish := time.Unix(1, 0)
	for _, v := range []string{"yesterday", "", "1.5", "2023-11-14 22:13:20", "1e12", "2023-13-01T00:00:00Z"} {
		_, err := eventTime("event_ts", map[string]string{"event_ts": v}, publish)
		if err == nil {
			t.Errorf("value %q: no error", v)
			continue
		}
		for _, want := range []string{`"event_ts"`, `"` + v + `"`} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("value %q: error %q does not contain %s", v, err, want)
			}
		}
	}
}

// A time Beam cannot carry is a decode failure naming the attribute and
// the value: emitted, it would be clamped to another time, and its lag
// would overflow the watermark's arithmetic.
func TestEventTimeOutsideBeamsRangeFails(t *testing.T) {
	publish := time.Unix(1, 0)
	for _, v := range []string{
		"-9223372036854776",   // a millisecond before Beam's minimum
		"9223372036854775807", // the largest int64 of milliseconds
		strconv.FormatInt(mtime.EndOfGlobalWindowTime.Milliseconds()+1, 10),
	} {
		_, err := eventTime("event_ts", map[string]string{"event_ts": v}, publish)
		if err == nil || !strings.Contains(err.Error(), `"event_ts"`) || !strings.Contains(err.Error(), "outside the timestamps Beam can carry") {
			t.Errorf("value %q: error %v, want one naming the attribute and the range", v, err)
		}
	}
	if _, err := eventTime("", nil, mtime.MaxTimestamp.ToTime()); err == nil || !strings.Contains(err.Error(), "publish time") {
		t.Errorf("a publish time past the global window: error %v, want one naming the publish time", err)
	}
}

func TestEventTimeMalformedLongValueIsTruncated(t *testing.T) {
	long := strings.Repeat("z", 1000)
	_, err := eventTime("ts", map[string]string{"ts": long}, time.Time{})
	if err == nil {
		t.Fatal("no error")
	}
	if !strings.Contains(err.Error(), `"ts"`) || !strings.Contains(err.Error(), strings.Repeat("z", text.MaxQuoted-3)+"...") {
		t.Errorf("error %q does not name the attribute and the value's start", err)
	}
	if len(err.Error()) > 400 {
		t.Errorf("error is %d bytes long; a long value should be truncated", len(err.Error()))
	}
}
