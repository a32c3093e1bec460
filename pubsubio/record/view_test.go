package record

import (
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"

	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func init() {
	register.Function1x1(describeDeadLetter)
}

func TestMain(m *testing.M) {
	ptest.Main(m)
}

// describeDeadLetter summarizes a dead letter for passert.
func describeDeadLetter(f dlq.FailedMessage) string {
	ok := f.Stage == dlq.StageDecode && f.Code == "" && f.Subscription == f.Message.Subscription && !f.Time.IsZero() &&
		strings.Contains(f.Error, "format JSON") && strings.Contains(f.Error, f.Message.ID)
	if !ok {
		return "unexpected: " + f.Error
	}
	return f.Message.ID + ":" + string(f.Message.Data)
}

// On Prism, in one bundle: good payloads become records, and a payload that
// is not JSON, after others succeeded, becomes a dead letter naming the
// message and why.
func TestRecordsOnPrism(t *testing.T) {
	msgs := []model.Message{message(`{"n":1}`), message(`{"n":2}`), message(`{"n":`), message(`[3]`), message("not json")}
	for i := range msgs {
		msgs[i].ID = string(rune('a' + i))
	}
	p, s := beam.NewPipelineWithRoot()
	records, dead := Records(s, Config{}, beam.CreateList(s, msgs))
	const rest = `,"__attributes":{"a<b":"x&y","type":"order"},"message_id":"%s","ordering_key":"order-42","publish_time_millis":1716700000123}`
	passert.Equals(s, records,
		`{"data":{"n":1}`+strings.Replace(rest, "%s", "a", 1),
		`{"data":{"n":2}`+strings.Replace(rest, "%s", "b", 1),
		`{"data":[3]`+strings.Replace(rest, "%s", "d", 1))
	passert.Equals(s, beam.ParDo(s, describeDeadLetter, dead), `c:{"n":`, "e:not json")
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

func TestTryRecordsRejectsAtConstruction(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	msgs := beam.Create(s, message("1"))
	if _, _, err := TryRecords(s, Config{Format: "AVRO"}, msgs); err == nil || !strings.Contains(err.Error(), `"AVRO"`) {
		t.Errorf("unknown format: %v", err)
	}
	if _, _, err := TryRecords(s, Config{}, beam.Create(s, "x")); err == nil || !strings.Contains(err.Error(), "PCollection<string>") {
		t.Errorf("wrong input: %v", err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "AttributesKey") {
			t.Errorf("Records with a bad key: recovered %v", r)
		}
	}()
	Records(s, Config{AttributesKey: "message_id"}, msgs)
}
