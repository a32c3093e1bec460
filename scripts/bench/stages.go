package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// slowPublish answers every Publish after a delay.
type slowPublish time.Duration

func (d slowPublish) React(any) (bool, any, error) {
	time.Sleep(time.Duration(d))
	return false, nil, nil
}

// measureStages measures what this process spends while a writer's stage
// waits for Pub/Sub inside ProcessElement: Prism (Beam 2.77) waits for a
// stage without outputs in a busy loop, so a writer whose stage had none
// would burn a core for as long as Pub/Sub takes. Each writer publishes
// one message, waiting for its confirmation at once (MaxInFlightMessages
// 1), to an in-process server that answers every publish after delay.
func measureStages(ctx context.Context, delay time.Duration) (string, error) {
	var b strings.Builder
	b.WriteString("\n| writer, waiting for Pub/Sub in ProcessElement | wall | CPU of this process |\n|---|---|---|\n")
	for _, w := range []struct {
		name  string
		build func(s beam.Scope, conn pubsubio.Connection, topic pubsubio.Topic)
	}{
		{"pubsubio.Write", func(s beam.Scope, conn pubsubio.Connection, topic pubsubio.Topic) {
			msgs := beam.Reshuffle(s, beam.Create(s, pubsubio.Message{Data: []byte("x")}))
			pubsubio.Write(s, pubsubio.WriteConfig{Topic: topic, MaxInFlightMessages: 1, Connection: conn}, msgs)
		}},
		{"pubsubio.WriteDeadLetters", func(s beam.Scope, conn pubsubio.Connection, topic pubsubio.Topic) {
			failed := beam.Reshuffle(s, beam.Create(s, pubsubio.FailedMessage{Message: pubsubio.Message{Data: []byte("x")}, Stage: pubsubio.StageValidate, Error: "e"}))
			pubsubio.WriteDeadLetters(s, pubsubio.DeadLetterConfig{Topic: topic, MaxInFlightMessages: 1, Connection: conn}, failed)
		}},
	} {
		wall, cpu, err := stageRun(ctx, delay, w.build)
		if err != nil {
			return "", fmt.Errorf("%s: %w", w.name, err)
		}
		fmt.Printf("stages: %s waiting %v for Pub/Sub: %v wall, %v CPU\n", w.name, delay, wall, cpu)
		fmt.Fprintf(&b, "| %s, %v | %v | %v |\n", w.name, delay, wall, cpu)
	}
	return b.String(), nil
}

func stageRun(ctx context.Context, delay time.Duration, build func(beam.Scope, pubsubio.Connection, pubsubio.Topic)) (wall, cpu time.Duration, err error) {
	srv := pstest.NewServer(pstest.ServerReactorOption{FuncName: "Publish", Reactor: slowPublish(delay)})
	defer srv.Close()
	topic := pubsubio.TopicOf(project, "stages")
	if _, err := srv.GServer.CreateTopic(ctx, &pubsubpb.Topic{Name: topic.String()}); err != nil {
		return 0, 0, err
	}
	p, s := beam.NewPipelineWithRoot()
	build(s, pubsubio.Connection{EmulatorEndpoint: srv.Addr}, topic)
	cpu0, _ := usage()
	start := time.Now()
	if err := beamx.Run(ctx, p); err != nil {
		return 0, 0, err
	}
	cpu1, _ := usage()
	if len(srv.Messages()) != 1 {
		return 0, 0, errors.New("the message was not published")
	}
	return time.Since(start).Round(10 * time.Millisecond), (cpu1 - cpu0).Round(10 * time.Millisecond), nil
}
