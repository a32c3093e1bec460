package source

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestWithDefaultsFillsEveryDefault(t *testing.T) {
	cfg, _, err := validConfig().withDefaults()
	if err != nil {
		t.Fatalf("withDefaults: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"Ordering", cfg.Ordering, OrderingNone},
		{"Finalization", cfg.Finalization, FinalizationAuto},
		{"Splits", cfg.Splits, 1},
		// The buffer budget's share of the one stream, at most the default.
		{"MaxOutstandingMessages", cfg.MaxOutstandingMessages, DefaultMaxOutstandingMessages},
		{"MaxOutstandingBytes", cfg.MaxOutstandingBytes, int(DefaultBufferMaxBytes)},
		{"MaxExtension", cfg.MaxExtension, DefaultMaxExtension},
		{"MaxDurationPerAckExtension", cfg.MaxDurationPerAckExtension, time.Duration(0)},
		{"ParallelPullCount", cfg.ParallelPullCount, DefaultParallelPullCount},
		{"ShutdownTimeout", cfg.ShutdownTimeout, DefaultShutdownTimeout},
		{"MaxRecordsPerBundle", cfg.MaxRecordsPerBundle, DefaultMaxRecordsPerBundle},
		{"BufferMaxMessages", cfg.BufferMaxMessages, DefaultBufferMaxMessages},
		{"BufferMaxBytes", cfg.BufferMaxBytes, int64(DefaultBufferMaxBytes)},
		{"LeaseIdle", cfg.LeaseIdle, DefaultLeaseIdle},
		{"PollDelay", cfg.PollDelay, DefaultPollDelay},
		{"WatermarkWindow", cfg.WatermarkWindow, DefaultWatermarkWindow},
		{"WatermarkIdle", cfg.WatermarkIdle, DefaultWatermarkIdle},
		{"WatermarkLateness", cfg.WatermarkLateness, DefaultWatermarkLateness},
		{"MaxMessages", cfg.MaxMessages, int64(0)},
		{"IdleTimeout", cfg.IdleTimeout, time.Duration(0)},
		{"TimestampAttribute", cfg.TimestampAttribute, ""},
		{"Connection", cfg.Connection, connection.Settings{}},
		// The documented values of the defaults themselves.
		{"DefaultShutdownTimeout", DefaultShutdownTimeout, 10 * time.Second},
		{"DefaultMaxRecordsPerBundle", DefaultMaxRecordsPerBundle, 1000},
		{"DefaultBufferMaxMessages", DefaultBufferMaxMessages, 40000},
		{"DefaultMaxOutstandingMessages", DefaultMaxOutstandingMessages, 2000},
		{"DefaultBufferMaxBytes", int64(DefaultBufferMaxBytes), int64(64 << 20)},
		{"DefaultFlinkBufferMaxMessages", DefaultFlinkBufferMaxMessages, 200000},
		{"DefaultFlinkBufferMaxBytes", int64(DefaultFlinkBufferMaxBytes), int64(256 << 20)},
		{"DefaultLeaseIdle", DefaultLeaseIdle, 2 * time.Minute},
		{"DefaultPollDelay", DefaultPollDelay, 100 * time.Millisecond},
		{"DefaultWatermarkWindow", DefaultWatermarkWindow, time.Minute},
		{"DefaultWatermarkIdle", DefaultWatermarkIdle, 10 * time.Second},
		{"DefaultWatermarkLateness", DefaultWatermarkLateness, time.Second},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v (%T), want %v (%T)", c.name, c.got, c.got, c.want, c.want)
		}
	}
}

// The defaults documented as the client's must be the client's, so that a
// client upgrade that changes them is noticed.
func TestClientDerivedDefaultsMatchTheClient(t *testing.T) {
	client := pubsub.DefaultReceiveSettings
	cfg, _, err := validConfig().withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if DefaultMaxOutstandingMessages != 2*client.MaxOutstandingMessages || cfg.MaxOutstandingMessages != 2*client.MaxOutstandingMessages {
		t.Errorf("MaxOutstandingMessages cap %d and default %d, want twice the client's %d", DefaultMaxOutstandingMessages, cfg.MaxOutstandingMessages, client.MaxOutstandingMessages)
	}
	if DefaultMaxOutstandingBytes != client.MaxOutstandingBytes {
		t.Errorf("MaxOutstandingBytes cap %d, client's %d", int(DefaultMaxOutstandingBytes), client.MaxOutstandingBytes)
	}
	if cfg.MaxExtension != client.MaxExtension {
		t.Errorf("MaxExtension default %v, client's %v", cfg.MaxExtension, client.MaxExtension)
	}
	if cfg.ParallelPullCount != client.NumGoroutines {
		t.Errorf("ParallelPullCount default %d, client's NumGoroutines %d", cfg.ParallelPullCount, client.NumGoroutines)
	}
	if cfg.MaxDurationPerAckExtension != client.MaxDurationPerAckExtension {
		t.Errorf("MaxDurationPerAckExtension default %v, client's %v", cfg.MaxDurationPerAckExtension, client.MaxDurationPerAckExtension)
	}

	rs := cfg.receiveSettings()
	if rs.MaxOutstandingMessages != cfg.MaxOutstandingMessages || rs.MaxOutstandingBytes != cfg.MaxOutstandingBytes ||
		rs.MaxExtension != client.MaxExtension || rs.NumGoroutines != client.NumGoroutines ||
		rs.MaxDurationPerAckExtension != client.MaxDurationPerAckExtension {
		t.Errorf("receiveSettings() of the defaults %+v differ from the read's flow control and the client's other defaults %+v", rs, client)
	}
	if rs.ShutdownOptions == nil || rs.ShutdownOptions.Behavior != pubsub.ShutdownBehaviorNackImmediately || rs.ShutdownOptions.Timeout != DefaultShutdownTimeout {
		t.Errorf("receiveSettings().ShutdownOptions = %+v, want nack immediately within %v", rs.ShutdownOptions, DefaultShutdownTimeout)
	}
}

func TestWithDefaultsKeepsSetValues(t *testing.T) {
	in := Config{
		Subscriptions:          testSubs(2),
		Splits:                 5,
		MaxOutstandingMessages: -1,
		MaxOutstandingBytes:    -1,
		ParallelPullCount:      3,
		BufferMaxBytes:         123,
		LeaseIdle:              time.Hour,
		Finalization:           FinalizationOff,
	}
	cfg, _, err := in.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Splits != 5 || cfg.MaxOutstandingMessages != -1 || cfg.MaxOutstandingBytes != -1 || cfg.ParallelPullCount != 3 ||
		cfg.BufferMaxBytes != 123 || cfg.LeaseIdle != time.Hour || cfg.Finalization != FinalizationOff {
		t.Errorf("withDefaults overwrote set values: %+v", cfg)
	}
}

func TestValidationErrorsNameTheOption(t *testing.T) {
	sub := model.SubscriptionOf("pubsubio-test", "sub-0")
	cases := []struct {
		name  string
		edit  func(*Config)
		wants []string // every one must appear in the error
	}{
		{"empty subscriptions", func(c *Config) { c.Subscriptions = nil }, []string{"Subscriptions and Topics are both empty"}},
		{"malformed subscription project", func(c *Config) { c.Subscriptions = []model.Subscription{model.SubscriptionOf("P", "sub-0")} },
			[]string{"Subscriptions[0]", `"P"`}},
		{"malformed subscription ID", func(c *Config) {
			c.Subscriptions = []model.Subscription{sub, model.SubscriptionOf("pubsubio-test", "goog-x")}
		}, []string{"Subscriptions[1]", `"goog-x"`}},
		{"duplicate subscriptions", func(c *Config) { c.Subscriptions = []model.Subscription{sub, testSubs(2)[1], sub} },
			[]string{"Subscriptions[2]", sub.String(), "twice"}},
		{"PER_KEY with ParallelPullCount 2", func(c *Config) { c.Ordering = OrderingPerKey; c.ParallelPullCount = 2 },
			[]string{"ParallelPullCount", "2", "PER_KEY"}},
		{"PER_KEY with Splits 3", func(c *Config) { c.Ordering = OrderingPerKey; c.Splits = 3 }, []string{"Splits", "3", "PER_KEY"}},
		{"unknown ordering", func(c *Config) { c.Ordering = "SOMETIMES" }, []string{"Ordering", "SOMETIMES"}},
		{"unknown finalization", func(c *Config) { c.Finalization = "MAYBE" }, []string{"Finalization", "MAYBE"}},
		{"negative Splits", func(c *Config) { c.Splits = -1 }, []string{"Splits", "-1"}},
		{"negative ParallelPullCount", func(c *Config) { c.ParallelPullCount = -1 }, []string{"ParallelPullCount", "-1"}},
		{"negative MaxRecordsPerBundle", func(c *Config) { c.MaxRecordsPerBundle = -1 }, []string{"MaxRecordsPerBundle", "-1"}},
		{"negative BufferMaxMessages", func(c *Config) { c.BufferMaxMessages = -1 }, []string{"BufferMaxMessages", "-1"}},
		{"negative BufferMaxBytes", func(c *Config) { c.BufferMaxBytes = -1 }, []string{"BufferMaxBytes", "-1"}},
		{"MaxOutstandingMessages below -1", func(c *Config) { c.MaxOutstandingMessages = -2 }, []string{"MaxOutstandingMessages", "-2"}},
		{"MaxOutstandingBytes below -1", func(c *Config) { c.MaxOutstandingBytes = -2 }, []string{"MaxOutstandingBytes", "-2"}},
		{"negative MaxMessages", func(c *Config) { c.MaxMessages = -1 }, []string{"MaxMessages", "-1"}},
		{"negative MaxExtension", func(c *Config) { c.MaxExtension = -time.Second }, []string{"MaxExtension", "-1s"}},
		{"negative MaxDurationPerAckExtension", func(c *Config) { c.MaxDurationPerAckExtension = -time.Second }, []string{"MaxDurationPerAckExtension", "-1s"}},
		{"negative ShutdownTimeout", func(c *Config) { c.ShutdownTimeout = -time.Second }, []string{"ShutdownTimeout", "-1s"}},
		{"negative LeaseIdle", func(c *Config) { c.LeaseIdle = -time.Second }, []string{"LeaseIdle", "-1s"}},
		{"negative PollDelay", func(c *Config) { c.PollDelay = -time.Second }, []string{"PollDelay", "-1s"}},
		{"negative IdleTimeout", func(c *Config) { c.IdleTimeout = -time.Second }, []string{"IdleTimeout", "-1s"}},
		{"negative WatermarkWindow", func(c *Config) { c.WatermarkWindow = -time.Second }, []string{"WatermarkWindow", "-1s"}},
		{"negative WatermarkIdle", func(c *Config) { c.WatermarkIdle = -time.Second }, []string{"WatermarkIdle", "-1s"}},
		{"negative WatermarkLateness", func(c *Config) { c.WatermarkLateness = -time.Second }, []string{"WatermarkLateness", "-1s"}},
		{"MaxDurationPerAckExtension 5s", func(c *Config) { c.MaxDurationPerAckExtension = 5 * time.Second }, []string{"MaxDurationPerAckExtension", "5s"}},
		{"MaxDurationPerAckExtension 11m", func(c *Config) { c.MaxDurationPerAckExtension = 11 * time.Minute }, []string{"MaxDurationPerAckExtension", "11m0s"}},
		{"LeaseIdle a bare 1", func(c *Config) { c.LeaseIdle = 1 }, []string{"LeaseIdle 1ns", "between 1s and 1h0m0s", "nanoseconds"}},
		{"IdleTimeout a bare 1", func(c *Config) { c.IdleTimeout = 1 }, []string{"IdleTimeout 1ns", "or 0 for no idle bound"}},
		{"PollDelay an hour", func(c *Config) { c.PollDelay = time.Hour }, []string{"PollDelay 1h0m0s", "between 1ms and 1m0s"}},
		{"PollDelay against IdleTimeout", func(c *Config) { c.PollDelay, c.IdleTimeout = time.Minute, 5*time.Second },
			[]string{"IdleTimeout 5s is under 10 x PollDelay 1m0s"}},
		{"PollDelay against LeaseIdle", func(c *Config) { c.PollDelay, c.LeaseIdle = time.Second, 5*time.Second },
			[]string{"LeaseIdle 5s is under 10 x PollDelay 1s"}},
		{"Splits 1<<30", func(c *Config) { c.Splits = 1 << 30 }, []string{"Splits 1073741824", "between 1 and 1000"}},
		{"Splits 2000000", func(c *Config) { c.Splits = 2000000 }, []string{"Splits 2000000"}},
		{"ParallelPullCount 1<<20", func(c *Config) { c.ParallelPullCount = 1 << 20 }, []string{"ParallelPullCount 1048576"}},
		{"too many streams", func(c *Config) { c.Splits, c.ParallelPullCount = 100, 20 },
			[]string{"Splits 100", "ParallelPullCount 20", "2000 streaming pulls, over 1000"}},
		{"too many subscriptions for the streams", func(c *Config) { c.Subscriptions = testSubs(600); c.ParallelPullCount = 2 },
			[]string{"len(Subscriptions) 600", "1200 streaming pulls"}},
		{"MaxExtension a bare 60", func(c *Config) { c.MaxExtension = 60 }, []string{"MaxExtension 60ns", "nanoseconds"}},
		{"ShutdownTimeout a day", func(c *Config) { c.ShutdownTimeout = 24 * time.Hour }, []string{"ShutdownTimeout 24h0m0s", "10m0s"}},
		{"WatermarkIdle a bare 10", func(c *Config) { c.WatermarkIdle = 10 }, []string{"WatermarkIdle 10ns"}},
		{"TimestampAttribute of 300 bytes", func(c *Config) { c.TimestampAttribute = strings.Repeat("t", 300) }, []string{"TimestampAttribute", "is 300 bytes, over Pub/Sub's 256"}},
		{"TimestampAttribute not UTF-8", func(c *Config) { c.TimestampAttribute = "ts\xff" }, []string{`TimestampAttribute "ts\xff" is not valid UTF-8`}},
		{"TimestampAttribute reserved", func(c *Config) { c.TimestampAttribute = "googTs" }, []string{`TimestampAttribute "googTs" starts with "goog"`}},
		{"TimestampAttribute blank", func(c *Config) { c.TimestampAttribute = " \t" }, []string{`TimestampAttribute " \t" is blank`}},
		{"start time in year 10000", func(c *Config) {
			c.Setup = []SubscriptionSetup{{Subscription: c.Subscriptions[0], Start: StartFromTimestamp(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))}}
		}, []string{"Setup[0].Start: Time 10000-01-01", "outside years 1 to 9999"}},
		{"start time before year 1", func(c *Config) {
			c.Setup = []SubscriptionSetup{{Subscription: c.Subscriptions[0], Start: StartFromTimestamp(time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC))}}
		}, []string{"outside years 1 to 9999"}},
		{"emulator endpoint with credentials file", func(c *Config) {
			c.Connection = connection.Settings{EmulatorEndpoint: "localhost:8085", CredentialsFile: "/keys/sa.json"}
		}, []string{"EmulatorEndpoint", "CredentialsFile"}},
		{"malformed endpoint", func(c *Config) { c.Connection = connection.Settings{EmulatorEndpoint: "http://localhost:8085"} },
			[]string{"EmulatorEndpoint", "http://localhost:8085"}},
		{"endpoint without port", func(c *Config) { c.Connection = connection.Settings{EmulatorEndpoint: "localhost"} },
			[]string{"EmulatorEndpoint", `"localhost"`}},
		{"options without topics", func(c *Config) { c.TopicSubscriptions.Name = "x" },
			[]string{"TopicSubscriptions is set but Topics is empty"}},
		{"topic listed twice", func(c *Config) { c.Topics = []model.Topic{ordersTopic, ordersTopic} },
			[]string{"Topics[1]", "twice"}},
		{"invalid topic", func(c *Config) { c.Topics = []model.Topic{{Project: "pubsubio-test", ID: "goog-x"}} },
			[]string{"Topics[0]", "goog-x"}},
		{"create topic set", func(c *Config) {
			c.Topics = []model.Topic{ordersTopic}
			c.TopicSubscriptions.Create.Topic = returnsTopic
		}, []string{"TopicSubscriptions.Create.Topic", "leave it empty"}},
		{"name makes an invalid ID", func(c *Config) {
			c.Topics = []model.Topic{ordersTopic}
			c.TopicSubscriptions.Name = "9lives"
		}, []string{"TopicSubscriptions.Name \"9lives\"", "orders"}},
		{"name too long", func(c *Config) {
			c.Topics = []model.Topic{ordersTopic}
			c.TopicSubscriptions.Name = "n" + strings.Repeat("x", 250)
		}, []string{"Topics[0]", "over Pub/Sub's 255", "shorten TopicSubscriptions.Name"}},
		{"subscription also listed", func(c *Config) {
			c.Topics = []model.Topic{ordersTopic}
			c.TopicSubscriptions.Name = "sub"
			c.Subscriptions = []model.Subscription{model.SubscriptionOf("pubsubio-test", "sub-orders")}
		}, []string{"Topics[0]", "also listed in Subscriptions"}},
		{"TTL under Pub/Sub's minimum", func(c *Config) {
			c.Topics = []model.Topic{ordersTopic, returnsTopic}
			c.TopicSubscriptions.Create.ExpirationTTL = time.Hour
		}, []string{"TopicSubscriptions.Create.ExpirationTTL 1h0m0s must be from 24h0m0s"}},
		{"label Pub/Sub refuses", func(c *Config) {
			c.Topics = []model.Topic{ordersTopic}
			c.TopicSubscriptions.Create.Labels = map[string]string{"Team": "x", "ok": "Upper", "": "y"}
		}, []string{`TopicSubscriptions.Create.Labels["Team"]: the key must start with a lowercase letter`,
			`Labels["ok"]: the value "Upper" may hold only lowercase letters`, `Labels[""]: the key is empty`}},
		{"ordering without an ordered subscription", func(c *Config) {
			c.Topics = []model.Topic{ordersTopic}
			c.Ordering = OrderingPerKey
		}, []string{"TopicSubscriptions.Create would create a subscription the read rejects", "EnableMessageOrdering"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := validConfig()
			c.edit(&cfg)
			_, _, err := cfg.withDefaults()
			if err == nil {
				t.Fatalf("withDefaults accepted %+v", cfg)
			}
			for _, want := range c.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

func TestValidationAcceptsBoundaryValues(t *testing.T) {
	cases := map[string]func(*Config){
		"PER_KEY with Splits 1":            func(c *Config) { c.Ordering = OrderingPerKey; c.Splits = 1 },
		"PER_KEY with ParallelPullCount 1": func(c *Config) { c.Ordering = OrderingPerKey; c.ParallelPullCount = 1 },
		"no flow-control limit":            func(c *Config) { c.MaxOutstandingMessages = -1; c.MaxOutstandingBytes = -1 },
		"MaxDurationPerAckExtension 10s":   func(c *Config) { c.MaxDurationPerAckExtension = 10 * time.Second },
		"MaxDurationPerAckExtension 600s":  func(c *Config) { c.MaxDurationPerAckExtension = 600 * time.Second },
		"bounded by count and idleness":    func(c *Config) { c.MaxMessages = 5; c.IdleTimeout = time.Second },
		"finalization on":                  func(c *Config) { c.Finalization = FinalizationOn },
		"emulator endpoint":                func(c *Config) { c.Connection.EmulatorEndpoint = "localhost:8085" },
		"Splits 1000":                      func(c *Config) { c.Splits = 1000 },
		"LeaseIdle and IdleTimeout 1s":     func(c *Config) { c.LeaseIdle, c.IdleTimeout = time.Second, time.Second },
		"a thousand subscriptions":         func(c *Config) { c.Subscriptions = testSubs(1000) },
		"start time in year 9999": func(c *Config) {
			c.Setup = []SubscriptionSetup{{Subscription: c.Subscriptions[0], Start: StartFromTimestamp(time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC))}}
		},
		"TimestampAttribute of 256 bytes": func(c *Config) { c.TimestampAttribute = strings.Repeat("t", 256) },
	}
	for name, edit := range cases {
		cfg := validConfig()
		edit(&cfg)
		if _, _, err := cfg.withDefaults(); err != nil {
			t.Errorf("%s: rejected: %v", name, err)
		}
	}
}

func TestTryReadReturnsConfigErrorAndReadPanics(t *testing.T) {
	_, s := beam.NewPipelineWithRoot()
	_, err := TryRead(s, Config{})
	if err == nil || !strings.Contains(err.Error(), "Subscriptions") {
		t.Fatalf("TryRead(empty config) = %v, want an error naming Subscriptions", err)
	}

	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_, s := beam.NewPipelineWithRoot()
		Read(s, Config{})
	}()
	if recovered == nil {
		t.Fatal("Read(empty config) did not panic")
	}
	if got := fmt.Sprint(recovered); !strings.Contains(got, "Subscriptions") {
		t.Errorf("Read panicked with %q, want the configuration error naming Subscriptions", got)
	}
}

func TestTryReadRejectsDirectRunner(t *testing.T) {
	f := flag.Lookup("runner")
	if f == nil {
		t.Fatal(`no "runner" flag is defined in the test binary`)
	}
	prev := f.Value.String()
	t.Cleanup(func() {
		if err := flag.Set("runner", prev); err != nil {
			t.Errorf("restoring the runner flag: %v", err)
		}
	})

	if err := flag.Set("runner", "direct"); err != nil {
		t.Fatal(err)
	}
	_, s := beam.NewPipelineWithRoot()
	_, err := TryRead(s, validConfig())
	if err == nil || !strings.Contains(err.Error(), "direct runner") {
		t.Fatalf("TryRead with --runner=direct = %v, want an error about the direct runner", err)
	}

	if err := flag.Set("runner", "prism"); err != nil {
		t.Fatal(err)
	}
	_, s = beam.NewPipelineWithRoot()
	if _, err := TryRead(s, validConfig()); err != nil {
		t.Fatalf("TryRead with --runner=prism: %v", err)
	}
}

// A read whose streams may be sent more than the buffer budget of a worker
// that runs all its splits, or whose byte budget holds fewer than three of
// the largest messages, is warned about at construction; the defaults,
// flow control left to its share of the budget, and 10 streams of 1,000
// (the default budget) are not.
func TestBudgetWarning(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want []string // nil: no warning
	}{
		{"defaults", nil, nil},
		{"ten streams fill the budget exactly", func(c *Config) { c.ParallelPullCount, c.MaxOutstandingMessages = 10, 4000 }, nil},
		{"no per-stream limit", func(c *Config) { c.MaxOutstandingMessages = -1; c.ParallelPullCount = 20 }, nil},
		{"eleven streams sharing the budget", func(c *Config) { c.ParallelPullCount = 11 }, nil},
		{"eleven streams", func(c *Config) { c.ParallelPullCount, c.MaxOutstandingMessages = 11, 4000 },
			[]string{"a worker that runs all 1 split(s) may be sent 44000 unacked messages", "ParallelPullCount 11", "MaxOutstandingMessages 4000", "BufferMaxMessages 40000", "to 44000"}},
		{"twelve splits", func(c *Config) { c.Subscriptions = testSubs(3); c.Splits = 12; c.MaxOutstandingMessages = 4000 },
			[]string{"a worker that runs all 12 split(s) may be sent 48000 unacked messages", "ParallelPullCount 1", "to 48000"}},
		{"small budget shared", func(c *Config) { c.BufferMaxMessages = 500 }, nil},
		{"small budget", func(c *Config) { c.BufferMaxMessages, c.MaxOutstandingMessages = 500, 1000 },
			[]string{"1000 unacked", "BufferMaxMessages 500"}},
		{"byte budget of three 10 MB messages", func(c *Config) { c.BufferMaxBytes = 30_000_000 }, nil},
		{"byte budget under three 10 MB messages", func(c *Config) { c.BufferMaxBytes = 1 << 20 },
			[]string{"BufferMaxBytes 1048576 holds fewer than three", "10000000 bytes each", "at least 30000000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := testConfig(t, tc.edit).warnings(now)
			if tc.want == nil {
				if len(w) != 0 {
					t.Fatalf("warnings %q, want none", w)
				}
				return
			}
			if len(w) != 1 {
				t.Fatalf("warnings %q, want one", w)
			}
			for _, want := range tc.want {
				if !strings.Contains(w[0], want) {
					t.Errorf("warning does not contain %q: %s", want, w[0])
				}
			}
		})
	}
}
