package main

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// The typed case: what pubsubio.Decode and pubsubio.Encode cost per
// message against a hand-written DoFn doing the same with the same library
// (typedfns.go), on Prism, with no Pub/Sub involved. Each pipeline
// generates N messages (or values) in one DoFn, fused with the contender
// and a counter, so the stage runs on one goroutine. The cost of a message
// is the process's CPU over the run divided by N (start-up included, the
// same for every contender); the baseline is the generator and the
// counter alone, and what a contender adds to it is the transform's own
// cost. CPU, not the stage's rate, because on a shared machine the rate
// also measures who else ran; the rates are printed beside it.

// typedCase is a format and a direction.
type typedCase struct {
	format string // JSON, AVRO or PROTOBUF, as typed spells them
	encode bool
}

func (c typedCase) String() string {
	dir, enc := "decode", ""
	if c.encode {
		dir = "encode"
	}
	if c.format != "JSON" {
		enc = " binary"
	}
	return fmt.Sprintf("%s %s%s", dir, c.format, enc)
}

func typedCases() []typedCase {
	var cs []typedCase
	for _, encode := range []bool{false, true} {
		for _, f := range []string{"JSON", "AVRO", "PROTOBUF"} {
			cs = append(cs, typedCase{format: f, encode: encode})
		}
	}
	return cs
}

// typedComparison is one case's contenders.
type typedComparison struct {
	name                  string
	baseline, hand, typed contender
}

// perMessage is x's CPU per message, in µs.
func (c typedComparison) perMessage(x contender) float64 { return float64(x.cpu()) / 1e3 }

// ratio is typed's own cost over the hand-written DoFn's, baseline taken
// off both.
func (c typedComparison) ratio() float64 {
	b := c.perMessage(c.baseline)
	return (c.perMessage(c.typed) - b) / (c.perMessage(c.hand) - b)
}

func (c typedComparison) row() string {
	b := c.perMessage(c.baseline)
	return fmt.Sprintf("| %s | %.2f | %.2f | %.2f | **%.2f** | %.0f / %.0f / %.0f | %.1f / %.1f |",
		c.name, b, c.perMessage(c.hand)-b, c.perMessage(c.typed)-b, c.ratio(),
		c.baseline.rate(), c.hand.rate(), c.typed.rate(), c.hand.allocs(), c.typed.allocs())
}

const typedHeader = "| case | baseline CPU µs/msg | hand-written DoFn, CPU µs/msg added | pubsubio, CPU µs/msg added | ratio | stage msg/s (baseline / hand-written / pubsubio) | allocs/msg (hand-written / pubsubio) |\n" +
	"|---|---|---|---|---|---|---|"

// typedTargets are the highest acceptable ratios: avroDecode for decoding
// binary Avro, general for the other cases.
type typedTargets struct{ general, avroDecode float64 }

func (t typedTargets) of(c typedCase) float64 {
	if c.format == "AVRO" && !c.encode {
		return t.avroDecode
	}
	return t.general
}

// measureTyped runs every typed case, interleaved, rotating who goes
// first, and returns the table and the cases whose ratio misses its
// target.
func measureTyped(ctx context.Context, n, runs int, targets typedTargets) (string, []string, error) {
	var b strings.Builder
	b.WriteString("\n" + typedHeader + "\n")
	var misses []string
	for _, c := range typedCases() {
		cmp := typedComparison{name: c.String()}
		entrants := []struct {
			name string
			who  *contender
		}{{"baseline", &cmp.baseline}, {"hand-written", &cmp.hand}, {"pubsubio", &cmp.typed}}
		for run := range runs {
			for i := range entrants {
				k := entrants[(i+run)%len(entrants)]
				id := fmt.Sprintf("typed-%s-%s-%d", strings.ReplaceAll(c.String(), " ", "-"), k.name, run)
				s, err := measured(k.name, n, func() (float64, error) { return runTyped(ctx, c, k.name, id, n) })
				if err != nil {
					return "", nil, fmt.Errorf("%s, %s: %w", c, k.name, err)
				}
				k.who.add(s)
			}
		}
		fmt.Printf("%s: baseline %.2f CPU µs/msg, hand-written +%.2f, pubsubio +%.2f, ratio %.2f (stage rates: %v / %v / %v msg/s)\n",
			c, cmp.perMessage(cmp.baseline), cmp.perMessage(cmp.hand)-cmp.perMessage(cmp.baseline),
			cmp.perMessage(cmp.typed)-cmp.perMessage(cmp.baseline), cmp.ratio(),
			rounded(cmp.baseline.rates()), rounded(cmp.hand.rates()), rounded(cmp.typed.rates()))
		b.WriteString(cmp.row() + "\n")
		if r, target := cmp.ratio(), targets.of(c); r > target {
			misses = append(misses, fmt.Sprintf("%s: pubsubio/hand-written %.2f > %.2f", c, r, target))
		}
	}
	return b.String(), misses, nil
}

// runTyped runs one contender of c over n messages and returns its
// steady-state rate.
func runTyped(ctx context.Context, c typedCase, who, run string, n int) (float64, error) {
	rc, forget := newRunCount(run, n)
	defer forget()
	p, s := beam.NewPipelineWithRoot()
	imp := beam.Impulse(s)
	event, proto := reflect.TypeOf(typedEvent{}), reflect.TypeOf((*pubsubpb.PubsubMessage)(nil))
	elem, elemFormat := event, pubsubio.Format(c.format)
	if c.format == "PROTOBUF" {
		elem = proto
	}
	countValues := func(col beam.PCollection) {
		if elem == proto {
			endStage(s, beam.ParDo(s, &countProtosFn{Run: run}, col))
		} else {
			endStage(s, beam.ParDo(s, &countEventsFn{Run: run}, col))
		}
	}
	countMessages := func(col beam.PCollection) { endStage(s, beam.ParDo(s, &countMessagesFn{Run: run}, col)) }
	if !c.encode {
		msgs := beam.ParDo(s, &genPayloadsFn{Format: c.format, N: n}, imp)
		switch {
		case who == "baseline":
			countMessages(msgs)
		case who == "pubsubio":
			values, _ := pubsubio.Decode(s, pubsubio.DecodeConfig{Format: elemFormat, AvroSchema: avroSchemaFor(c.format)}, elem, msgs)
			countValues(values)
		case elem == proto:
			countValues(beam.ParDo(s, &handProtoDecodeFn{}, msgs))
		default:
			countValues(beam.ParDo(s, &handDecodeFn{Format: c.format}, msgs))
		}
	} else {
		var values beam.PCollection
		if elem == proto {
			values = beam.ParDo(s, &genProtosFn{N: n}, imp)
		} else {
			values = beam.ParDo(s, &genEventsFn{N: n}, imp)
		}
		switch {
		case who == "baseline":
			countValues(values)
		case who == "pubsubio":
			msgs, _ := pubsubio.Encode(s, pubsubio.EncodeConfig{Format: elemFormat, AvroSchema: avroSchemaFor(c.format)}, values)
			countMessages(msgs)
		case elem == proto:
			countMessages(beam.ParDo(s, &handProtoEncodeFn{}, values))
		default:
			countMessages(beam.ParDo(s, &handEncodeFn{Format: c.format}, values))
		}
	}
	if err := beamx.Run(ctx, p); err != nil {
		return 0, err
	}
	return rc.rate()
}

func avroSchemaFor(format string) string {
	if format == "AVRO" {
		return typedEventSchema
	}
	return ""
}
