package source

import (
	"strings"
	"testing"
	"time"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source/internal/prepare"
)

var (
	setupSub   = model.SubscriptionOf("pubsubio-test", "sub-0")
	setupTopic = model.TopicOf("pubsubio-test", "orders")
	deadTopic  = model.TopicOf("pubsubio-test", "orders-dead")
)

// withSetup is validConfig reading setupSub with one Setup entry for it.
func withSetup(s SubscriptionSetup) Config {
	cfg := validConfig()
	if s.Subscription == (model.Subscription{}) {
		s.Subscription = setupSub
	}
	cfg.Setup = []SubscriptionSetup{s}
	return cfg
}

func createWith(edit func(*SubscriptionCreateOptions)) SubscriptionSetup {
	o := SubscriptionCreateOptions{Topic: setupTopic}
	edit(&o)
	return SubscriptionSetup{Create: o}
}

// Every bad input of the prepare step's options is rejected at
// construction, naming the option, the value and what is allowed.
func TestSetupValidationNamesOptionValueAndRange(t *testing.T) {
	cases := []struct {
		name  string
		cfg   Config
		wants []string
	}{
		{"unknown start position", withSetup(SubscriptionSetup{Start: StartPosition{Kind: "YESTERDAY"}}),
			[]string{"Setup[0].Start", `"YESTERDAY"`, "RESUME", "EARLIEST_RETAINED", "LATEST", "TIMESTAMP", "SNAPSHOT"}},
		{"timestamp without time", withSetup(SubscriptionSetup{Start: StartPosition{Kind: PositionTimestamp}}),
			[]string{"Setup[0].Start", "TIMESTAMP needs Time"}},
		{"time with another kind", withSetup(SubscriptionSetup{Start: StartPosition{Kind: PositionLatest, Time: time.Unix(1e9, 0)}}),
			[]string{"Setup[0].Start", "Time", "LATEST", "does not use it"}},
		{"snapshot without name", withSetup(SubscriptionSetup{Start: StartPosition{Kind: PositionSnapshot}}),
			[]string{"Setup[0].Start", "SNAPSHOT needs Snapshot"}},
		{"malformed snapshot name", withSetup(SubscriptionSetup{Start: StartFromSnapshot("projects/p/topics/x")}),
			[]string{"Setup[0].Start", `"projects/p/topics/x"`, "projects/PROJECT/snapshots/ID"}},
		{"invalid snapshot ID", withSetup(SubscriptionSetup{Start: StartFromSnapshot("goog-snap")}),
			[]string{"Setup[0].Start", `"goog-snap"`, "snapshot ID"}},
		{"invalid snapshot in a full name", withSetup(SubscriptionSetup{Start: StartFromSnapshot("projects/my-project/snapshots/x")}),
			[]string{"Setup[0].Start", `"projects/my-project/snapshots/x" is not a snapshot's name`, `snapshot ID "x"`}},
		{"snapshot with another kind", withSetup(SubscriptionSetup{Start: StartPosition{Kind: PositionEarliestRetained, Snapshot: "snap"}}),
			[]string{"Setup[0].Start", `Snapshot "snap"`, "EARLIEST_RETAINED"}},
		{"empty topic in create options", withSetup(SubscriptionSetup{Create: SubscriptionCreateOptions{AckDeadline: time.Minute}}),
			[]string{"Setup[0].Create.Topic is empty"}},
		{"malformed topic", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.Topic = model.TopicOf("pubsubio-test", "x") })),
			[]string{"Setup[0].Create.Topic", `"x"`}},
		{"ack deadline below 10s", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.AckDeadline = 9 * time.Second })),
			[]string{"Setup[0].Create.AckDeadline", "9s", "10s to 10m0s"}},
		{"ack deadline above 600s", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.AckDeadline = 601 * time.Second })),
			[]string{"Setup[0].Create.AckDeadline", "10m1s", "10s to 10m0s"}},
		{"ack deadline not whole seconds", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.AckDeadline = 10500 * time.Millisecond })),
			[]string{"Setup[0].Create.AckDeadline", "10.5s", "whole seconds"}},
		{"retention below 10 minutes", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.MessageRetention = 9 * time.Minute })),
			[]string{"Setup[0].Create.MessageRetention", "9m0s", "10m0s to 744h0m0s (31 days"}},
		{"retention above 31 days", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.MessageRetention = 32 * 24 * time.Hour })),
			[]string{"Setup[0].Create.MessageRetention", "768h0m0s", "10m0s to 744h0m0s"}},
		{"expiration below 1 day", withSetup(createWith(func(o *SubscriptionCreateOptions) {
			o.ExpirationTTL = 23 * time.Hour
			o.MessageRetention = time.Hour
		})), []string{"Setup[0].Create.ExpirationTTL", "23h0m0s", "from 24h0m0s to 8760h0m0s"}},
		{"expiration shorter than retention", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.ExpirationTTL = 2 * 24 * time.Hour })),
			[]string{"Setup[0].Create.ExpirationTTL", "48h0m0s", "message retention 168h0m0s"}},
		{"negative expiration", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.ExpirationTTL = -time.Hour })),
			[]string{"Setup[0].Create.ExpirationTTL", "-1h0m0s", "NeverExpire"}},
		{"expiration and never expire", withSetup(createWith(func(o *SubscriptionCreateOptions) {
			o.ExpirationTTL = 10 * 24 * time.Hour
			o.NeverExpire = true
		})), []string{"Setup[0].Create.ExpirationTTL", "NeverExpire", "choose one"}},
		{"max delivery attempts below 5", withSetup(createWith(func(o *SubscriptionCreateOptions) {
			o.DeadLetterTopic = deadTopic
			o.MaxDeliveryAttempts = 4
		})), []string{"Setup[0].Create.MaxDeliveryAttempts", "4", "5 to 100"}},
		{"max delivery attempts above 100", withSetup(createWith(func(o *SubscriptionCreateOptions) {
			o.DeadLetterTopic = deadTopic
			o.MaxDeliveryAttempts = 101
		})), []string{"Setup[0].Create.MaxDeliveryAttempts", "101", "5 to 100"}},
		{"max delivery attempts without dead-letter topic", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.MaxDeliveryAttempts = 10 })),
			[]string{"Setup[0].Create.MaxDeliveryAttempts", "without DeadLetterTopic"}},
		{"dead-letter topic is the subscription's topic", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.DeadLetterTopic = setupTopic })),
			[]string{"Setup[0].Create.DeadLetterTopic", setupTopic.String(), "own topic"}},
		{"filter over 256 bytes", withSetup(createWith(func(o *SubscriptionCreateOptions) { o.Filter = strings.Repeat("a", 257) })),
			[]string{"Setup[0].Create.Filter", "257 bytes", "256"}},
		{"ordering off under PER_KEY", func() Config {
			cfg := withSetup(createWith(func(*SubscriptionCreateOptions) {}))
			cfg.Ordering = OrderingPerKey
			return cfg
		}(), []string{"Setup[0].Create", "message ordering is disabled", "Ordering " + string(OrderingPerKey) + " needs it", "set EnableMessageOrdering"}},
		{"subscription not listed", withSetup(SubscriptionSetup{Subscription: model.SubscriptionOf("pubsubio-test", "other")}),
			[]string{"Setup[0]", "projects/pubsubio-test/subscriptions/other", "Subscriptions does not list"}},
		{"two entries for one subscription", func() Config {
			cfg := withSetup(SubscriptionSetup{})
			cfg.Setup = append(cfg.Setup, SubscriptionSetup{Subscription: setupSub, Start: StartLatest()})
			return cfg
		}(), []string{"Setup[1]", setupSub.String(), "more than one entry"}},
		{"malformed setup subscription", withSetup(SubscriptionSetup{Subscription: model.SubscriptionOf("P", "sub-0")}),
			[]string{"Setup[0].Subscription", `"P"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := c.cfg.withDefaults()
			if err == nil {
				t.Fatalf("withDefaults accepted %+v", c.cfg.Setup)
			}
			for _, want := range c.wants {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error does not contain %q:\n%v", want, err)
				}
			}
		})
	}
}

func TestSetupValidationAcceptsBoundaryValues(t *testing.T) {
	cases := map[string]Config{
		"no setup": validConfig(),
		"every create option at its lower bound": withSetup(createWith(func(o *SubscriptionCreateOptions) {
			o.AckDeadline = 10 * time.Second
			o.MessageRetention = 10 * time.Minute
			o.ExpirationTTL = 24 * time.Hour
			o.DeadLetterTopic = deadTopic
			o.MaxDeliveryAttempts = 5
			o.Filter = "attributes:" + strings.Repeat("a", 256-len("attributes:"))
		})),
		"every create option at its upper bound": withSetup(createWith(func(o *SubscriptionCreateOptions) {
			o.AckDeadline = 600 * time.Second
			o.MessageRetention = 31 * 24 * time.Hour
			o.NeverExpire = true
			o.RetainAckedMessages = true
			o.DeadLetterTopic = deadTopic
			o.MaxDeliveryAttempts = 100
		})),
		"ordering on under PER_KEY": func() Config {
			cfg := withSetup(createWith(func(o *SubscriptionCreateOptions) { o.EnableMessageOrdering = true }))
			cfg.Ordering = OrderingPerKey
			return cfg
		}(),
		"start position only":         withSetup(SubscriptionSetup{Start: StartEarliestRetained()}),
		"latest":                      withSetup(SubscriptionSetup{Start: StartLatest()}),
		"timestamp":                   withSetup(SubscriptionSetup{Start: StartFromTimestamp(time.Now().Add(-time.Hour))}),
		"snapshot ID":                 withSetup(SubscriptionSetup{Start: StartFromSnapshot("snap-1")}),
		"snapshot in another project": withSetup(SubscriptionSetup{Start: StartFromSnapshot("projects/other-project/snapshots/snap-1")}),
	}
	for name, cfg := range cases {
		if _, _, err := cfg.withDefaults(); err != nil {
			t.Errorf("%s: rejected: %v", name, err)
		}
	}
}

// An empty start position means resume, and the caller's Setup is not
// written to.
func TestSetupDefaults(t *testing.T) {
	in := withSetup(SubscriptionSetup{})
	cfg, _, err := in.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Setup[0].Start.Kind; got != PositionResume {
		t.Errorf("default start position %q, want %q", got, PositionResume)
	}
	if in.Setup[0].Start.Kind != "" {
		t.Errorf("withDefaults wrote %q into the caller's Setup", in.Setup[0].Start.Kind)
	}
	other := prepare.SetupFor(cfg.Setup, model.SubscriptionOf("pubsubio-test", "not-set-up"))
	if !other.Create.IsZero() || other.Start.Kind != PositionResume {
		t.Errorf("a subscription without an entry gets %+v, want no create options and %s", other, PositionResume)
	}
}

// A timestamp in the future is accepted, with a warning that explains what
// the seek will do; a past one is not warned about.
func TestFutureTimestampWarns(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	cfg := withSetup(SubscriptionSetup{Start: StartFromTimestamp(now.Add(time.Hour))})
	cfg, _, err := cfg.withDefaults()
	if err != nil {
		t.Fatalf("a future timestamp is rejected: %v", err)
	}
	w := cfg.warnings(now)
	if len(w) != 1 {
		t.Fatalf("warnings %q, want one", w)
	}
	for _, want := range []string{"Setup[0].Start", "2030-01-02T04:04:05Z", "in the future", "acked", "LATEST", setupSub.String()} {
		if !strings.Contains(w[0], want) {
			t.Errorf("warning does not contain %q: %s", want, w[0])
		}
	}
	cfg.Setup[0].Start = StartFromTimestamp(now.Add(-time.Hour))
	if w := cfg.warnings(now); len(w) != 0 {
		t.Errorf("a past timestamp warns: %q", w)
	}
}
