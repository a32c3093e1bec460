package pubsubio_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/window"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// Dead letters of windowed input land in the failed message's window, at
// its event time, whichever call of the writer emitted them.

func init() {
	register.Function2x0(stampFromAttribute)
	register.Function4x0(describeInWindow)
}

// epoch is where the tests' event times count from.
var epoch = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// stampFromAttribute emits m at the event time in its "at" attribute,
// seconds after epoch.
func stampFromAttribute(m pubsubio.Message, emit func(beam.EventTime, pubsubio.Message)) {
	s, _ := strconv.Atoi(m.Attributes["at"])
	emit(mtime.FromTime(epoch.Add(time.Duration(s)*time.Second)), m)
}

// described is describeInWindow of each of failed, in the global window
// that passert needs.
func described(s beam.Scope, failed beam.PCollection) beam.PCollection {
	return beam.WindowInto(s, window.NewGlobalWindows(), beam.ParDo(s, describeInWindow, failed))
}

// describeInWindow names a dead letter by its payload, stage and code, the
// window it is in and its event time, in seconds after epoch.
func describeInWindow(w beam.Window, et beam.EventTime, f pubsubio.FailedMessage, emit func(string)) {
	sec := func(t mtime.Time) int64 { return int64(t.ToTime().Sub(epoch) / time.Second) }
	where := "global"
	if iw, ok := w.(window.IntervalWindow); ok {
		where = fmt.Sprintf("[%d,%d)", sec(iw.Start), sec(iw.End))
	}
	emit(fmt.Sprintf("%s %s %s in %s at %d", f.Message.Data, f.Stage, f.Code, where, sec(et)))
}

// timed is a message of the tests: data, event time (seconds after epoch)
// and, when set, its own destination.
func timed(data string, at int, topic string) pubsubio.Message {
	m := pubsubio.Message{Data: []byte(data), Attributes: map[string]string{"at": strconv.Itoa(at)}}
	if topic != "" {
		m.Topic = pubsubio.TopicOf("my-project", topic)
	}
	return m
}

// windowed is msgs in fixed windows of a minute, at their "at" times.
func windowed(s beam.Scope, msgs ...pubsubio.Message) beam.PCollection {
	stamped := beam.ParDo(s, stampFromAttribute, beam.CreateList(s, msgs))
	return beam.WindowInto(s, window.NewFixedWindows(time.Minute), stamped)
}

// rejectBad answers a Publish carrying a message with data "bad" with
// INVALID_ARGUMENT, as Pub/Sub rejects a batch: the sink isolates it.
func rejectBad() pstest.ServerReactorOption {
	return pstest.ServerReactorOption{FuncName: "Publish", Reactor: reactorFunc(func(req any) (bool, any, error) {
		for _, m := range req.(*pubsubpb.PublishRequest).GetMessages() {
			if string(m.GetData()) == "bad" {
				return true, nil, status.Error(codes.InvalidArgument, "Invalid message")
			}
		}
		return false, nil, nil
	})}
}

type reactorFunc func(req any) (bool, any, error)

func (f reactorFunc) React(req any) (bool, any, error) { return f(req) }

func TestWriteDeadLettersOfWindowedInputKeepTheirWindows(t *testing.T) {
	pubsub := newFakePubSub(rejectBad())
	defer pubsub.close()
	long := strings.Repeat("k", 300) // over Pub/Sub's 256-byte attribute key

	p, s := beam.NewPipelineWithRoot()
	oversized := timed("oversized", 130, "")
	oversized.Attributes[long] = "v"
	deadLetters := pubsubio.Write(s, pubsubio.WriteConfig{
		Topic:             pubsubio.TopicOf("my-project", "orders"),
		CreateDisposition: pubsubio.CreateNever,
		FailurePolicy:     pubsubio.PolicyDeadLetter,
		Connection:        pubsub.connection(),
	}, windowed(s,
		timed("good", 10, ""),
		timed("bad", 70, ""), // rejected in a batch, then alone: a verdict, not a call
		timed("good", 75, ""),
		oversized,                     // rejected before sending, in ProcessElement
		timed("lost", 200, "nowhere"), // a missing topic under CreateNever
	))
	passert.Equals(s, described(s, deadLetters),
		"bad publish INVALID_ARGUMENT in [60,120) at 70",
		"oversized validate INVALID_ARGUMENT in [120,180) at 130",
		"lost publish NOT_FOUND in [180,240) at 200")
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
}

// The record view and the dead-letter writer take windowed input too.
func TestRecordsAndWriteDeadLettersTakeWindowedInput(t *testing.T) {
	pubsub := newFakePubSub()
	defer pubsub.close()

	p, s := beam.NewPipelineWithRoot()
	records, undecodable := pubsubio.Records(s, pubsubio.RecordConfig{}, windowed(s,
		timed(`{"n":1}`, 10, ""),
		timed(`{"n":`, 70, ""),
		timed(`not json`, 130, "")))
	passert.Count(s, beam.WindowInto(s, window.NewGlobalWindows(), records), "records", 1)
	passert.Equals(s, described(s, undecodable),
		`{"n": decode  in [60,120) at 70`,
		"not json decode  in [120,180) at 130")
	pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{
		Topic:      pubsubio.TopicOf("my-project", "dead-letters"),
		Connection: pubsub.connection(),
	}, undecodable)
	if err := ptest.Run(p); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range pubsub.srv.Messages() {
		if m.Topic == "projects/my-project/topics/dead-letters" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d dead letters on the topic, want 2", n)
	}
}
