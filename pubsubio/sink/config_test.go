package sink

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	vkit "cloud.google.com/go/pubsub/v2/apiv1"
	gax "github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

var validTopic = model.TopicOf("pubsubio-test", "events")

// The publisher defaults are the client's, but for DelayThreshold, which
// holds a batch until the writer flushes: a client upgrade that changes one
// fails here instead of silently changing how the sink batches.
func TestPublisherDefaultsAreTheClients(t *testing.T) {
	cfg, err := Config{Topic: validTopic}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Publisher.publishSettings()
	want := pubsub.DefaultPublishSettings
	want.DelayThreshold = untilFlushed
	if !reflect.DeepEqual(got, want) {
		t.Errorf("default publish settings drifted from the client's:\n got  %+v\n want %+v", got, want)
	}
}

// The retry backoff defaults are apiv1's Publish call options: both
// resolve to the same retryer.
func TestRetryDefaultsAreTheClients(t *testing.T) {
	cfg, err := Config{Topic: validTopic}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	c, err := vkit.NewTopicAdminClient(context.Background(), option.WithEndpoint("localhost:1"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resolve := func(opts []gax.CallOption) string {
		var s gax.CallSettings
		for _, o := range opts {
			o.Resolve(&s)
		}
		return fmt.Sprintf("%+v", s.Retry())
	}
	if got, want := resolve(cfg.Publisher.publishCallOptions()), resolve(c.CallOptions.Publish); got != want {
		t.Errorf("default Publish retry drifted from the client's:\n got  %s\n want %s", got, want)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Config{}.withDefaults()
	if err != nil {
		t.Fatalf("the zero Config is valid (every message may name its topic): %v", err)
	}
	want := Config{
		MaxInFlightMessages: 10000, MaxInFlightBytes: 64 << 20, MaxActivePublishers: 100, MaxGroupedMessages: 30000,
		DestinationIdleTimeout: time.Hour, PublishProgressTimeout: 10 * time.Minute, ShutdownTimeout: 30 * time.Second,
		CreateDisposition: CreateIfNeeded, RecoveryInitialBackoff: 500 * time.Millisecond, RecoveryMaxBackoff: 10 * time.Second,
		RecoveryMaxAttempts: 10, RecoveryJitter: 0.25, FailurePolicy: model.PolicyFail, MaxConsecutiveRejections: 100,
	}
	want.Publisher = cfg.Publisher // pinned to the client above
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults:\n got  %+v\n want %+v", cfg, want)
	}
}

// Every invalid option is rejected at construction with an error naming the
// option and the value.
func TestValidationNamesOptionAndValue(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"malformed topic", Config{Topic: model.TopicOf("pubsubio-test", "goog-x")}, []string{"Topic", `"goog-x"`}},
		{"malformed project", Config{Topic: model.TopicOf("P!", "events")}, []string{"Topic", `"P!"`}},
		{"negative message cap", Config{MaxInFlightMessages: -1}, []string{"MaxInFlightMessages -1"}},
		{"negative byte cap", Config{MaxInFlightBytes: -5}, []string{"MaxInFlightBytes -5"}},
		{"negative publishers", Config{MaxActivePublishers: -2}, []string{"MaxActivePublishers -2"}},
		{"negative grouped messages", Config{MaxGroupedMessages: -3}, []string{"MaxGroupedMessages -3"}},
		{"negative attempts", Config{RecoveryMaxAttempts: -1}, []string{"RecoveryMaxAttempts -1"}},
		{"rejections below -1", Config{MaxConsecutiveRejections: -2}, []string{"MaxConsecutiveRejections -2", "-1 for no bound"}},
		{"negative progress", Config{PublishProgressTimeout: -time.Second}, []string{"PublishProgressTimeout -1s"}},
		{"negative shutdown", Config{ShutdownTimeout: -time.Second}, []string{"ShutdownTimeout -1s"}},
		{"negative idle", Config{DestinationIdleTimeout: -time.Second}, []string{"DestinationIdleTimeout -1s"}},
		{"backoff inverted", Config{RecoveryInitialBackoff: time.Minute, RecoveryMaxBackoff: time.Second}, []string{"RecoveryInitialBackoff 1m0s", "RecoveryMaxBackoff 1s"}},
		{"jitter", Config{RecoveryJitter: 1.5}, []string{"RecoveryJitter 1.5"}},
		{"unknown policy", Config{FailurePolicy: "RETRY"}, []string{`FailurePolicy "RETRY"`, "FAIL", "DROP", "DEAD_LETTER"}},
		{"unknown disposition", Config{CreateDisposition: "SOMETIMES"}, []string{`CreateDisposition "SOMETIMES"`}},
		{"create options with CreateNever", Config{CreateDisposition: CreateNever, TopicCreate: TopicCreateOptions{MessageRetention: time.Hour}}, []string{"TopicCreate", "CREATE_NEVER"}},
		{"retention too short", Config{TopicCreate: TopicCreateOptions{MessageRetention: time.Minute}}, []string{"TopicCreate.MessageRetention 1m0s"}},
		{"retention too long", Config{TopicCreate: TopicCreateOptions{MessageRetention: 40 * 24 * time.Hour}}, []string{"TopicCreate.MessageRetention 960h0m0s"}},
		{"bad kms key", Config{TopicCreate: TopicCreateOptions{KMSKeyName: "my-key"}}, []string{`TopicCreate.KMSKeyName "my-key"`}},
		{"bad region", Config{TopicCreate: TopicCreateOptions{AllowedPersistenceRegions: []string{"Europe West"}}}, []string{`AllowedPersistenceRegions[0] "Europe West"`}},
		{"duplicate region", Config{TopicCreate: TopicCreateOptions{AllowedPersistenceRegions: []string{"europe-west1", "europe-west1"}}}, []string{`AllowedPersistenceRegions[1] "europe-west1" is listed twice`}},
		{"in transit without regions", Config{TopicCreate: TopicCreateOptions{EnforceInTransit: true}}, []string{"EnforceInTransit needs AllowedPersistenceRegions"}},
		{"count threshold over the request limit", Config{Publisher: PublisherOptions{CountThreshold: 5000}}, []string{"Publisher.CountThreshold 5000", "1000"}},
		{"byte threshold over the request limit", Config{Publisher: PublisherOptions{ByteThreshold: 2e7}}, []string{"Publisher.ByteThreshold 20000000"}},
		{"negative delay", Config{Publisher: PublisherOptions{DelayThreshold: -time.Millisecond}}, []string{"Publisher.DelayThreshold -1ms"}},
		{"negative goroutines", Config{Publisher: PublisherOptions{NumGoroutines: -1}}, []string{"Publisher.NumGoroutines -1"}},
		{"negative timeout", Config{Publisher: PublisherOptions{Timeout: -time.Second}}, []string{"Publisher.Timeout -1s"}},
		{"compression threshold without compression", Config{Publisher: PublisherOptions{CompressionBytesThreshold: 4096}}, []string{"Publisher.CompressionBytesThreshold 4096", "Publisher.EnableCompression"}},
		{"retry multiplier", Config{Publisher: PublisherOptions{RetryMultiplier: 0.5}}, []string{"Publisher.RetryMultiplier 0.5"}},
		{"retry inverted", Config{Publisher: PublisherOptions{RetryInitialBackoff: 5 * time.Minute}}, []string{"Publisher.RetryInitialBackoff 5m0s", "RetryMaxBackoff 1m0s"}},
		{"publish timeout a bare 1", Config{Publisher: PublisherOptions{Timeout: 1}}, []string{"Publisher.Timeout 1ns", "nanoseconds"}},
		{"publish timeout over progress", Config{PublishProgressTimeout: 30 * time.Second}, []string{"Publisher.Timeout 1m0s exceeds PublishProgressTimeout 30s"}},
		{"goroutines 1<<20", Config{Publisher: PublisherOptions{NumGoroutines: 1 << 20}}, []string{"Publisher.NumGoroutines 1048576", "or 0 for the client's default"}},
		{"publishers a million", Config{MaxActivePublishers: 1e6}, []string{"MaxActivePublishers 1000000", "between 1 and 10000"}},
		{"attempts a billion", Config{RecoveryMaxAttempts: 1e9}, []string{"RecoveryMaxAttempts 1000000000"}},
		{"progress a bare 600", Config{PublishProgressTimeout: 600}, []string{"PublishProgressTimeout 600ns"}},
		{"delay a week", Config{Publisher: PublisherOptions{DelayThreshold: 7 * 24 * time.Hour}}, []string{"Publisher.DelayThreshold 168h0m0s"}},
		{"emulator and key", Config{Connection: connection.Settings{EmulatorEndpoint: "localhost:8085", CredentialsFile: "/k.json"}}, []string{"EmulatorEndpoint and CredentialsFile"}},
		{"bad endpoint", Config{Connection: connection.Settings{EmulatorEndpoint: "http://x:1"}}, []string{`EmulatorEndpoint "http://x:1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.cfg.withDefaults()
			if err == nil {
				t.Fatalf("%+v was accepted", tc.cfg)
			}
			for _, w := range append(tc.want, "pubsubio.Write") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

// Ordering combines with a bounded Timeout and retry backoff in the Go
// client (see PublisherOptions.validate), so the combination is accepted.
func TestOrderingWithBoundedRetryIsAccepted(t *testing.T) {
	cfg := Config{Topic: validTopic, Publisher: PublisherOptions{EnableMessageOrdering: true, Timeout: 5 * time.Second, RetryMaxBackoff: time.Second}}
	if _, err := cfg.withDefaults(); err != nil {
		t.Fatal(err)
	}
}

func TestPublishSettingsMapOneToOne(t *testing.T) {
	o := PublisherOptions{DelayThreshold: time.Second, CountThreshold: 7, ByteThreshold: 9, NumGoroutines: 3, Timeout: time.Minute, EnableCompression: true, CompressionBytesThreshold: 11}
	s := o.publishSettings()
	if s.DelayThreshold != time.Second || s.CountThreshold != 7 || s.ByteThreshold != 9 || s.NumGoroutines != 3 ||
		s.Timeout != time.Minute || !s.EnableCompression || s.CompressionBytesThreshold != 11 {
		t.Errorf("publishSettings = %+v", s)
	}
	if s.FlowControlSettings != pubsub.DefaultPublishSettings.FlowControlSettings || s.HedgingSettings != nil {
		t.Errorf("unexposed settings are not the client's defaults: %+v", s)
	}
}

func TestTopicProto(t *testing.T) {
	o := TopicCreateOptions{
		MessageRetention:          48 * time.Hour,
		KMSKeyName:                "projects/p/locations/l/keyRings/r/cryptoKeys/k",
		AllowedPersistenceRegions: []string{"europe-west1", "europe-west4"},
		EnforceInTransit:          true,
	}
	p := o.topicProto(validTopic)
	if p.Name != validTopic.String() || p.MessageRetentionDuration.AsDuration() != 48*time.Hour || p.KmsKeyName != o.KMSKeyName ||
		!reflect.DeepEqual(p.MessageStoragePolicy.AllowedPersistenceRegions, o.AllowedPersistenceRegions) || !p.MessageStoragePolicy.EnforceInTransit {
		t.Errorf("topicProto = %v", p)
	}
	if p := (TopicCreateOptions{}).topicProto(validTopic); p.MessageRetentionDuration != nil || p.MessageStoragePolicy != nil || p.KmsKeyName != "" {
		t.Errorf("empty options set fields: %v", p)
	}
}
