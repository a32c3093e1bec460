package pubsubio_test

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"

	"github.com/pubsubio/beam-pubsubio/pubsubio"
	"github.com/pubsubio/beam-pubsubio/pubsubio/dlq"
)

// The table of construction-time rejections in RELIABILITY.md is this
// test's output: every row is a bad configuration built through the public
// API on a fresh pipeline, and its message is the error that build
// returned. Run with -update_rejections to rewrite the block after changing a message
// or adding a rejection:
//
//	go test ./pubsubio/ -run TestConstructionRejections -update_rejections
var update = flag.Bool("update_rejections", false, "rewrite the rejections table in RELIABILITY.md from the errors the builds return")

const (
	reliabilityFile = "../RELIABILITY.md"
	tableBegin      = "<!-- rejections:begin -->"
	tableEnd        = "<!-- rejections:end -->"
	regenerate      = "go test ./pubsubio/ -run TestConstructionRejections -update_rejections"
)

var (
	goodSub   = pubsubio.SubscriptionOf("my-project", "orders")
	otherSub  = pubsubio.SubscriptionOf("my-project", "payments")
	goodTopic = pubsubio.TopicOf("my-project", "events")
	dlTopic   = pubsubio.TopicOf("my-project", "dead-letters")
)

// rejection is one bad configuration: which API and option it exercises,
// and how to build it.
type rejection struct {
	api, option string
	build       func(s beam.Scope) error
}

func readCfg(edit func(*pubsubio.ReadConfig)) pubsubio.ReadConfig {
	cfg := pubsubio.ReadConfig{Subscriptions: []pubsubio.Subscription{goodSub}}
	edit(&cfg)
	return cfg
}

// read builds pubsubio.TryRead with the valid base configuration edited.
func read(option string, edit func(*pubsubio.ReadConfig)) rejection {
	return rejection{"Read", option, func(s beam.Scope) error {
		_, err := pubsubio.TryRead(s, readCfg(edit))
		return err
	}}
}

// setup builds a read whose only Setup entry, for goodSub, is edited.
func setup(option string, edit func(*pubsubio.SubscriptionSetup)) rejection {
	return read(option, func(c *pubsubio.ReadConfig) {
		st := pubsubio.SubscriptionSetup{Subscription: goodSub}
		edit(&st)
		c.Setup = []pubsubio.SubscriptionSetup{st}
	})
}

// create builds a read whose Setup creates goodSub from goodTopic with the
// create options edited.
func create(option string, edit func(*pubsubio.SubscriptionCreateOptions)) rejection {
	return setup(option, func(st *pubsubio.SubscriptionSetup) {
		st.Create = pubsubio.SubscriptionCreateOptions{Topic: goodTopic}
		edit(&st.Create)
	})
}

func messages(s beam.Scope) beam.PCollection {
	return pubsubio.MessagesFromStrings(s, beam.Create(s, "x"))
}

// write builds pubsubio.TryWrite with the valid base configuration edited.
func write(option string, edit func(*pubsubio.WriteConfig)) rejection {
	return rejection{"Write", option, func(s beam.Scope) error {
		cfg := pubsubio.WriteConfig{Topic: goodTopic}
		edit(&cfg)
		_, err := pubsubio.TryWrite(s, cfg, messages(s))
		return err
	}}
}

// writeInput builds pubsubio.TryWrite, valid, on the input input returns.
func writeInput(option string, input func(s beam.Scope) beam.PCollection) rejection {
	return rejection{"Write", option, func(s beam.Scope) error {
		_, err := pubsubio.TryWrite(s, pubsubio.WriteConfig{Topic: goodTopic}, input(s))
		return err
	}}
}

func deadLetters(s beam.Scope) beam.PCollection {
	return beam.Create(s, dlq.FailedMessage{})
}

// deadLetterWrite builds dlq.TryWrite with the valid base configuration
// edited, on the input input returns.
func deadLetterWrite(option string, edit func(*dlq.Config), input func(s beam.Scope) beam.PCollection) rejection {
	return rejection{"dlq.Write", option, func(s beam.Scope) error {
		cfg := dlq.Config{Topic: dlTopic}
		edit(&cfg)
		return dlq.TryWrite(s, cfg, input(s))
	}}
}

func records(option string, cfg pubsubio.RecordConfig, input func(s beam.Scope) beam.PCollection) rejection {
	return rejection{"Records", option, func(s beam.Scope) error {
		_, _, err := pubsubio.TryRecords(s, cfg, input(s))
		return err
	}}
}

func deduplicate(option string, cfg pubsubio.DedupConfig, input func(s beam.Scope) beam.PCollection) rejection {
	return rejection{"Deduplicate", option, func(s beam.Scope) error {
		_, err := pubsubio.TryDeduplicate(s, cfg, input(s))
		return err
	}}
}

// connection builds a read whose Connection is c. Write and dlq.Write run
// the same Settings.Validate; one row each below shows it.
func connection(option string, c pubsubio.Connection) rejection {
	return read(option, func(cfg *pubsubio.ReadConfig) { cfg.Connection = c })
}

// directRunner builds a valid read while --runner is "direct".
// sharedTopicSubscription builds two reads of one pipeline with the same
// TopicSubscriptions.Name and topic.
func sharedTopicSubscription() rejection {
	return rejection{"Read", "TopicSubscriptions.Name and topic of another read of the pipeline", func(s beam.Scope) error {
		cfg := readCfg(func(c *pubsubio.ReadConfig) {
			c.Subscriptions, c.Topics, c.TopicSubscriptions.Name = nil, []pubsubio.Topic{goodTopic}, "nightly"
		})
		if _, err := pubsubio.TryRead(s, cfg); err != nil {
			return fmt.Errorf("test setup: the first read: %w", err)
		}
		_, err := pubsubio.TryRead(s, cfg)
		return err
	}}
}

func directRunner() rejection {
	return rejection{"Read", "--runner=direct", func(s beam.Scope) error {
		f := flag.Lookup("runner")
		if f == nil {
			flag.String("runner", "", "the runner, as Beam's launchers define it")
			f = flag.Lookup("runner")
		}
		old := f.Value.String()
		defer flag.Set("runner", old)
		if err := flag.Set("runner", "direct"); err != nil {
			return fmt.Errorf("test setup: %w", err)
		}
		_, err := pubsubio.TryRead(s, readCfg(func(*pubsubio.ReadConfig) {}))
		return err
	}}
}

func rejections() []rejection {
	neg := -time.Second
	return []rejection{
		read("Subscriptions empty", func(c *pubsubio.ReadConfig) { c.Subscriptions = nil }),
		read("Subscriptions: bad project", func(c *pubsubio.ReadConfig) { c.Subscriptions[0].Project = "My-Project" }),
		read("Subscriptions: bad ID", func(c *pubsubio.ReadConfig) { c.Subscriptions[0].ID = "goog-orders" }),
		read("Subscriptions: listed twice", func(c *pubsubio.ReadConfig) { c.Subscriptions = append(c.Subscriptions, goodSub) }),
		read("Ordering unknown", func(c *pubsubio.ReadConfig) { c.Ordering = "SORTED" }),
		read("Ordering PER_KEY with ParallelPullCount 2", func(c *pubsubio.ReadConfig) {
			c.Ordering, c.ParallelPullCount = pubsubio.OrderingPerKey, 2
		}),
		read("Ordering PER_KEY with Splits 2", func(c *pubsubio.ReadConfig) { c.Ordering, c.Splits = pubsubio.OrderingPerKey, 2 }),
		read("Finalization unknown", func(c *pubsubio.ReadConfig) { c.Finalization = "SOMETIMES" }),
		read("Finalization unknown, 1,000 bytes", func(c *pubsubio.ReadConfig) { c.Finalization = pubsubio.FinalizationMode(strings.Repeat("x", 1000)) }),
		read("Format unknown", func(c *pubsubio.ReadConfig) { c.Format = "XML" }),
		read("Format typed", func(c *pubsubio.ReadConfig) { c.Format = pubsubio.FormatAvro }),
		read("DecodePolicy unknown", func(c *pubsubio.ReadConfig) { c.DecodePolicy = "IGNORE" }),
		read("DecodePolicy DEAD_LETTER on Read", func(c *pubsubio.ReadConfig) { c.DecodePolicy = pubsubio.DecodeDeadLetter }),
		read("LatePolicy unknown", func(c *pubsubio.ReadConfig) { c.LatePolicy = "DROP" }),
		read("Commit unknown", func(c *pubsubio.ReadConfig) { c.Commit = "SOMETIMES" }),
		read("Commit FLINK_CHECKPOINT without Flink.REST", func(c *pubsubio.ReadConfig) {
			c.Commit, c.Flink.Job = pubsubio.CommitFlinkCheckpoint, "orders"
		}),
		read("Flink.REST a URL", func(c *pubsubio.ReadConfig) {
			c.Commit, c.Flink = pubsubio.CommitFlinkCheckpoint, pubsubio.FlinkCheckpoints{REST: "http://jobmanager:8081", Job: "orders"}
		}),
		read("LatePolicy DEAD_LETTER on Read", func(c *pubsubio.ReadConfig) { c.LatePolicy = pubsubio.LateDeadLetter }),
		read("Splits negative", func(c *pubsubio.ReadConfig) { c.Splits = -1 }),
		read("ParallelPullCount negative", func(c *pubsubio.ReadConfig) { c.ParallelPullCount = -1 }),
		read("MaxRecordsPerBundle negative", func(c *pubsubio.ReadConfig) { c.MaxRecordsPerBundle = -1 }),
		read("BufferMaxMessages negative", func(c *pubsubio.ReadConfig) { c.BufferMaxMessages = -1 }),
		read("BufferMaxBytes negative", func(c *pubsubio.ReadConfig) { c.BufferMaxBytes = -1 }),
		read("MaxOutstandingMessages below -1", func(c *pubsubio.ReadConfig) { c.MaxOutstandingMessages = -2 }),
		read("MaxOutstandingBytes below -1", func(c *pubsubio.ReadConfig) { c.MaxOutstandingBytes = -2 }),
		read("MaxMessages negative", func(c *pubsubio.ReadConfig) { c.MaxMessages = -1 }),
		read("MaxExtension negative", func(c *pubsubio.ReadConfig) { c.MaxExtension = neg }),
		read("ShutdownTimeout negative", func(c *pubsubio.ReadConfig) { c.ShutdownTimeout = neg }),
		read("LeaseIdle negative", func(c *pubsubio.ReadConfig) { c.LeaseIdle = neg }),
		read("PollDelay negative", func(c *pubsubio.ReadConfig) { c.PollDelay = neg }),
		read("WatermarkWindow negative", func(c *pubsubio.ReadConfig) { c.WatermarkWindow = neg }),
		read("WatermarkIdle negative", func(c *pubsubio.ReadConfig) { c.WatermarkIdle = neg }),
		read("WatermarkLateness negative", func(c *pubsubio.ReadConfig) { c.WatermarkLateness = neg }),
		read("WatermarkMaxOutage negative", func(c *pubsubio.ReadConfig) { c.WatermarkMaxOutage = neg }),
		read("IdleTimeout negative", func(c *pubsubio.ReadConfig) { c.IdleTimeout = neg }),
		read("MaxDurationPerAckExtension out of range", func(c *pubsubio.ReadConfig) { c.MaxDurationPerAckExtension = 5 * time.Second }),
		read("Splits 1<<30", func(c *pubsubio.ReadConfig) { c.Splits = 1 << 30 }),
		read("ParallelPullCount 1<<20", func(c *pubsubio.ReadConfig) { c.ParallelPullCount = 1 << 20 }),
		read("Splits x ParallelPullCount over 1000 streams", func(c *pubsubio.ReadConfig) { c.Splits, c.ParallelPullCount = 100, 20 }),
		read("LeaseIdle a bare 1 (nanoseconds)", func(c *pubsubio.ReadConfig) { c.LeaseIdle = 1 }),
		read("IdleTimeout a bare 1 (nanoseconds)", func(c *pubsubio.ReadConfig) { c.IdleTimeout = 1 }),
		read("PollDelay an hour", func(c *pubsubio.ReadConfig) { c.PollDelay = time.Hour }),
		read("PollDelay against IdleTimeout", func(c *pubsubio.ReadConfig) { c.PollDelay, c.IdleTimeout = time.Second, 5*time.Second }),
		read("PollDelay against LeaseIdle", func(c *pubsubio.ReadConfig) { c.PollDelay, c.LeaseIdle = time.Second, 5*time.Second }),
		read("MaxExtension over a day", func(c *pubsubio.ReadConfig) { c.MaxExtension = 48 * time.Hour }),
		read("MaxOutstandingMessages 1e9", func(c *pubsubio.ReadConfig) { c.MaxOutstandingMessages = 1e9 }),
		read("WatermarkIdle against PollDelay", func(c *pubsubio.ReadConfig) { c.PollDelay, c.WatermarkIdle = time.Second, 5*time.Second }),
		read("MaxDurationPerAckExtension over MaxExtension", func(c *pubsubio.ReadConfig) {
			c.MaxDurationPerAckExtension, c.MaxExtension = 5*time.Minute, time.Minute
		}),
		read("TimestampAttribute of 300 bytes", func(c *pubsubio.ReadConfig) { c.TimestampAttribute = strings.Repeat("t", 300) }),
		read("TimestampAttribute not UTF-8", func(c *pubsubio.ReadConfig) { c.TimestampAttribute = "ts\xff" }),
		read("TimestampAttribute reserved", func(c *pubsubio.ReadConfig) { c.TimestampAttribute = "googTs" }),
		read("TimestampAttribute blank", func(c *pubsubio.ReadConfig) { c.TimestampAttribute = "  " }),
		read("Subscriptions: project with a 2,000-byte domain", func(c *pubsubio.ReadConfig) {
			c.Subscriptions[0].Project = strings.Repeat("a", 2000) + ":my-project"
		}),
		directRunner(),
		read("Topics: listed twice", func(c *pubsubio.ReadConfig) { c.Topics = []pubsubio.Topic{goodTopic, goodTopic} }),
		read("Topics: bad ID", func(c *pubsubio.ReadConfig) {
			c.Topics = []pubsubio.Topic{pubsubio.TopicOf("my-project", "goog-events")}
		}),
		read("TopicSubscriptions without Topics", func(c *pubsubio.ReadConfig) { c.TopicSubscriptions.Name = "nightly" }),
		read("TopicSubscriptions.Name too long for the topic", func(c *pubsubio.ReadConfig) {
			c.Topics, c.TopicSubscriptions.Name = []pubsubio.Topic{goodTopic}, "n"+strings.Repeat("x", 250)
		}),
		read("TopicSubscriptions.Name not a subscription ID", func(c *pubsubio.ReadConfig) {
			c.Topics, c.TopicSubscriptions.Name = []pubsubio.Topic{goodTopic}, "9lives"
		}),
		read("TopicSubscriptions.Name gives a subscription also in Subscriptions", func(c *pubsubio.ReadConfig) {
			c.Topics, c.TopicSubscriptions.Name = []pubsubio.Topic{pubsubio.TopicOf("my-project", "y2026")}, "orders"
			c.Subscriptions = []pubsubio.Subscription{pubsubio.SubscriptionOf("my-project", "orders-y2026")}
		}),
		read("TopicSubscriptions.Create.Topic set", func(c *pubsubio.ReadConfig) {
			c.Topics, c.TopicSubscriptions.Create.Topic = []pubsubio.Topic{goodTopic}, dlTopic
		}),
		read("TopicSubscriptions.Create.ExpirationTTL under a day", func(c *pubsubio.ReadConfig) {
			c.Topics, c.TopicSubscriptions.Create.ExpirationTTL = []pubsubio.Topic{goodTopic}, time.Hour
		}),
		read("TopicSubscriptions.Create.Labels: a key the read sets", func(c *pubsubio.ReadConfig) {
			c.Topics, c.TopicSubscriptions.Create.Labels = []pubsubio.Topic{goodTopic}, map[string]string{"pubsubio-read": "mine"}
		}),
		sharedTopicSubscription(),

		read("Setup: bad subscription", func(c *pubsubio.ReadConfig) {
			c.Setup = []pubsubio.SubscriptionSetup{{Subscription: pubsubio.SubscriptionOf("my-project", "ab")}}
		}),
		read("Setup: subscription not in Subscriptions", func(c *pubsubio.ReadConfig) {
			c.Setup = []pubsubio.SubscriptionSetup{{Subscription: otherSub}}
		}),
		read("Setup: two entries for one subscription", func(c *pubsubio.ReadConfig) {
			c.Setup = []pubsubio.SubscriptionSetup{{Subscription: goodSub}, {Subscription: goodSub}}
		}),
		setup("Create without Topic", func(st *pubsubio.SubscriptionSetup) { st.Create.AckDeadline = 30 * time.Second }),
		create("Create.Topic bad", func(o *pubsubio.SubscriptionCreateOptions) { o.Topic.ID = "x" }),
		create("Create.AckDeadline out of range", func(o *pubsubio.SubscriptionCreateOptions) { o.AckDeadline = 5 * time.Second }),
		create("Create.AckDeadline not whole seconds", func(o *pubsubio.SubscriptionCreateOptions) { o.AckDeadline = 10500 * time.Millisecond }),
		create("Create.MessageRetention out of range", func(o *pubsubio.SubscriptionCreateOptions) { o.MessageRetention = time.Minute }),
		create("Create.ExpirationTTL negative", func(o *pubsubio.SubscriptionCreateOptions) { o.ExpirationTTL = neg }),
		create("Create.ExpirationTTL with NeverExpire", func(o *pubsubio.SubscriptionCreateOptions) {
			o.ExpirationTTL, o.NeverExpire = 48*time.Hour, true
		}),
		create("Create.ExpirationTTL under a day", func(o *pubsubio.SubscriptionCreateOptions) { o.ExpirationTTL = time.Hour }),
		create("Create.ExpirationTTL over a year", func(o *pubsubio.SubscriptionCreateOptions) { o.ExpirationTTL = 400 * 24 * time.Hour }),
		create("Create.ExpirationTTL under the retention", func(o *pubsubio.SubscriptionCreateOptions) { o.ExpirationTTL = 48 * time.Hour }),
		create("Create.DeadLetterTopic bad", func(o *pubsubio.SubscriptionCreateOptions) {
			o.DeadLetterTopic = pubsubio.TopicOf("my-project", "1dead")
		}),
		create("Create.DeadLetterTopic is the Topic", func(o *pubsubio.SubscriptionCreateOptions) { o.DeadLetterTopic = goodTopic }),
		create("Create.MaxDeliveryAttempts out of range", func(o *pubsubio.SubscriptionCreateOptions) {
			o.DeadLetterTopic, o.MaxDeliveryAttempts = dlTopic, 4
		}),
		create("Create.MaxDeliveryAttempts without DeadLetterTopic", func(o *pubsubio.SubscriptionCreateOptions) { o.MaxDeliveryAttempts = 5 }),
		create("Create.Filter too long", func(o *pubsubio.SubscriptionCreateOptions) {
			o.Filter = `attributes.kind = "` + strings.Repeat("x", 250) + `"`
		}),
		create("Create.Filter blank", func(o *pubsubio.SubscriptionCreateOptions) { o.Filter = "  " }),
		create("Create.Filter unterminated string", func(o *pubsubio.SubscriptionCreateOptions) { o.Filter = `attributes.kind = "order` }),
		create("Create.Labels: key and value Pub/Sub refuses", func(o *pubsubio.SubscriptionCreateOptions) {
			o.Labels = map[string]string{"Team": "billing", "env": "Prod"}
		}),
		create("Create.Filter not on attributes", func(o *pubsubio.SubscriptionCreateOptions) { o.Filter = `kind = "order"` }),
		read("Create without message ordering under PER_KEY", func(c *pubsubio.ReadConfig) {
			c.Ordering = pubsubio.OrderingPerKey
			c.Setup = []pubsubio.SubscriptionSetup{{Subscription: goodSub, Create: pubsubio.SubscriptionCreateOptions{Topic: goodTopic}}}
		}),
		read("Create without dead-letter policy under NACK", func(c *pubsubio.ReadConfig) {
			c.DecodePolicy = pubsubio.DecodeNack
			c.Setup = []pubsubio.SubscriptionSetup{{Subscription: goodSub, Create: pubsubio.SubscriptionCreateOptions{Topic: goodTopic}}}
		}),
		read("Create with exactly-once delivery under a short MaxDurationPerAckExtension", func(c *pubsubio.ReadConfig) {
			c.MaxDurationPerAckExtension = 30 * time.Second
			c.Setup = []pubsubio.SubscriptionSetup{{Subscription: goodSub, Create: pubsubio.SubscriptionCreateOptions{Topic: goodTopic, EnableExactlyOnceDelivery: true}}}
		}),
		setup("Start TIMESTAMP without Time", func(st *pubsubio.SubscriptionSetup) { st.Start.Kind = pubsubio.PositionTimestamp }),
		setup("Start Time in year 10000", func(st *pubsubio.SubscriptionSetup) {
			st.Start = pubsubio.StartFromTimestamp(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
		}),
		setup("Start SNAPSHOT without Snapshot", func(st *pubsubio.SubscriptionSetup) { st.Start.Kind = pubsubio.PositionSnapshot }),
		setup("Start SNAPSHOT: malformed name", func(st *pubsubio.SubscriptionSetup) {
			st.Start = pubsubio.StartFromSnapshot("projects/my-project/topics/snap")
		}),
		setup("Start SNAPSHOT: bad ID", func(st *pubsubio.SubscriptionSetup) { st.Start = pubsubio.StartFromSnapshot("goog-snap") }),
		setup("Start Kind unknown", func(st *pubsubio.SubscriptionSetup) { st.Start.Kind = "NEWEST" }),
		setup("Start Time without TIMESTAMP", func(st *pubsubio.SubscriptionSetup) {
			st.Start = pubsubio.StartLatest()
			st.Start.Time = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		}),
		setup("Start Snapshot without SNAPSHOT", func(st *pubsubio.SubscriptionSetup) {
			st.Start = pubsubio.StartEarliestRetained()
			st.Start.Snapshot = "snap-1"
		}),

		connection("Connection.EmulatorEndpoint without port", pubsubio.Connection{EmulatorEndpoint: "localhost"}),
		connection("Connection.EmulatorEndpoint port 0", pubsubio.Connection{EmulatorEndpoint: "localhost:0"}),
		connection("Connection.EmulatorEndpoint port not a number", pubsubio.Connection{EmulatorEndpoint: "localhost:http"}),
		connection("Connection.EmulatorEndpoint with a scheme", pubsubio.Connection{EmulatorEndpoint: "http://localhost:8085"}),
		connection("Connection.EmulatorEndpoint without host", pubsubio.Connection{EmulatorEndpoint: ":8085"}),
		connection("Connection.EmulatorEndpoint bad host character", pubsubio.Connection{EmulatorEndpoint: "local host:8085"}),
		connection("Connection.EmulatorEndpoint IPv6 without brackets", pubsubio.Connection{EmulatorEndpoint: "::1:8085"}),
		connection("Connection.RPCTimeout a bare number", pubsubio.Connection{RPCTimeout: 30}),
		connection("Connection.RPCTimeout over 10 minutes", pubsubio.Connection{RPCTimeout: time.Hour}),
		connection("Connection.EmulatorEndpoint host of 300 bytes", pubsubio.Connection{EmulatorEndpoint: strings.Repeat("a", 300) + ":8085"}),
		connection("Connection.EmulatorEndpoint empty label", pubsubio.Connection{EmulatorEndpoint: "local..host:8085"}),
		connection("Connection: EmulatorEndpoint and CredentialsFile", pubsubio.Connection{EmulatorEndpoint: "localhost:8085", CredentialsFile: "/secrets/key.json"}),
		connection("Connection.CredentialsFile inline JSON", pubsubio.Connection{CredentialsFile: `{"type": "service_account"}`}),
		connection("Connection.CredentialsFile JSON behind a byte-order mark", pubsubio.Connection{CredentialsFile: "\ufeff{}"}),
		connection("Connection.CredentialsFile base64 of a key", pubsubio.Connection{CredentialsFile: "eyJ0eXBlIjogInNlcnZpY2VfYWNjb3VudCJ9"}),
		connection("Connection.CredentialsFile base64 of a PEM key", pubsubio.Connection{
			CredentialsFile: "LS0tLS1CRUdJTiBQUklWQVRFIEtFWS0tLS0tCk1JSUV2Z0lCQURBTkJna3Foa2lHOXcwQkFRRUZBQVNDQktnd2dnU2tBZ0VBQW9JQkFRQwotLS0tLUVORCBQUklWQVRFIEtFWS0tLS0tCg==",
		}),
		connection("Connection.CredentialsFile PEM", pubsubio.Connection{CredentialsFile: "-----BEGIN PRIVATE KEY-----\nMIIE"}),
		connection("Connection.CredentialsFile a URL", pubsubio.Connection{CredentialsFile: "gs://bucket/key.json"}),
		connection("Connection.CredentialsFile blank", pubsubio.Connection{CredentialsFile: " "}),
		connection("Connection.CredentialsFile with a newline", pubsubio.Connection{CredentialsFile: "/secrets/key.json\n"}),

		write("Topic bad", func(c *pubsubio.WriteConfig) { c.Topic.Project = "p" }),
		write("MaxInFlightMessages negative", func(c *pubsubio.WriteConfig) { c.MaxInFlightMessages = -1 }),
		write("MaxInFlightBytes negative", func(c *pubsubio.WriteConfig) { c.MaxInFlightBytes = -1 }),
		write("MaxActivePublishers negative", func(c *pubsubio.WriteConfig) { c.MaxActivePublishers = -1 }),
		write("RecoveryMaxAttempts negative", func(c *pubsubio.WriteConfig) { c.RecoveryMaxAttempts = -1 }),
		write("MaxConsecutiveRejections below -1", func(c *pubsubio.WriteConfig) { c.MaxConsecutiveRejections = -2 }),
		write("DestinationIdleTimeout negative", func(c *pubsubio.WriteConfig) { c.DestinationIdleTimeout = neg }),
		write("PublishProgressTimeout negative", func(c *pubsubio.WriteConfig) { c.PublishProgressTimeout = neg }),
		write("ShutdownTimeout negative", func(c *pubsubio.WriteConfig) { c.ShutdownTimeout = neg }),
		write("RecoveryInitialBackoff negative", func(c *pubsubio.WriteConfig) { c.RecoveryInitialBackoff = neg }),
		write("RecoveryMaxBackoff negative", func(c *pubsubio.WriteConfig) { c.RecoveryMaxBackoff = neg }),
		write("RecoveryInitialBackoff over RecoveryMaxBackoff", func(c *pubsubio.WriteConfig) {
			c.RecoveryInitialBackoff, c.RecoveryMaxBackoff = time.Minute, time.Second
		}),
		write("RecoveryJitter not a fraction", func(c *pubsubio.WriteConfig) { c.RecoveryJitter = 1.5 }),
		write("FailurePolicy unknown", func(c *pubsubio.WriteConfig) { c.FailurePolicy = "RETRY" }),
		write("CreateDisposition unknown", func(c *pubsubio.WriteConfig) { c.CreateDisposition = "CREATE_ALWAYS" }),
		write("TopicCreate with CreateNever", func(c *pubsubio.WriteConfig) {
			c.CreateDisposition, c.TopicCreate.MessageRetention = pubsubio.CreateNever, time.Hour
		}),
		write("TopicCreate.MessageRetention out of range", func(c *pubsubio.WriteConfig) { c.TopicCreate.MessageRetention = time.Minute }),
		write("TopicCreate.KMSKeyName malformed", func(c *pubsubio.WriteConfig) { c.TopicCreate.KMSKeyName = "my-key" }),
		write("TopicCreate.AllowedPersistenceRegions bad name", func(c *pubsubio.WriteConfig) {
			c.TopicCreate.AllowedPersistenceRegions = []string{"Europe West"}
		}),
		write("TopicCreate.AllowedPersistenceRegions twice", func(c *pubsubio.WriteConfig) {
			c.TopicCreate.AllowedPersistenceRegions = []string{"europe-west1", "europe-west1"}
		}),
		write("TopicCreate.EnforceInTransit without regions", func(c *pubsubio.WriteConfig) { c.TopicCreate.EnforceInTransit = true }),
		write("Publisher.DelayThreshold negative", func(c *pubsubio.WriteConfig) { c.Publisher.DelayThreshold = neg }),
		write("Publisher.CountThreshold over 1000", func(c *pubsubio.WriteConfig) { c.Publisher.CountThreshold = 1001 }),
		write("Publisher.ByteThreshold over 10 MB", func(c *pubsubio.WriteConfig) { c.Publisher.ByteThreshold = 10_000_001 }),
		write("Publisher.NumGoroutines negative", func(c *pubsubio.WriteConfig) { c.Publisher.NumGoroutines = -1 }),
		write("Publisher.Timeout negative", func(c *pubsubio.WriteConfig) { c.Publisher.Timeout = neg }),
		write("Publisher.CompressionBytesThreshold negative", func(c *pubsubio.WriteConfig) {
			c.Publisher.EnableCompression, c.Publisher.CompressionBytesThreshold = true, -1
		}),
		write("Publisher.CompressionBytesThreshold without compression", func(c *pubsubio.WriteConfig) { c.Publisher.CompressionBytesThreshold = 1024 }),
		write("Publisher.RetryInitialBackoff negative", func(c *pubsubio.WriteConfig) { c.Publisher.RetryInitialBackoff = neg }),
		write("Publisher.RetryInitialBackoff over RetryMaxBackoff", func(c *pubsubio.WriteConfig) {
			c.Publisher.RetryInitialBackoff, c.Publisher.RetryMaxBackoff = time.Minute, time.Second
		}),
		write("Publisher.RetryMultiplier under 1", func(c *pubsubio.WriteConfig) { c.Publisher.RetryMultiplier = 0.5 }),
		write("Publisher.RetryMultiplier +Inf", func(c *pubsubio.WriteConfig) { c.Publisher.RetryMultiplier = math.Inf(1) }),
		write("Publisher.CompressionBytesThreshold over a request", func(c *pubsubio.WriteConfig) {
			c.Publisher.EnableCompression, c.Publisher.CompressionBytesThreshold = true, 1<<30
		}),
		write("RecoveryJitter NaN", func(c *pubsubio.WriteConfig) { c.RecoveryJitter = math.NaN() }),
		write("MaxConsecutiveRejections 1<<40", func(c *pubsubio.WriteConfig) { c.MaxConsecutiveRejections = 1 << 40 }),
		write("Publisher.Timeout a bare 1 (nanoseconds)", func(c *pubsubio.WriteConfig) { c.Publisher.Timeout = 1 }),
		write("Publisher.Timeout over PublishProgressTimeout", func(c *pubsubio.WriteConfig) { c.PublishProgressTimeout = 30 * time.Second }),
		write("Publisher.NumGoroutines 1<<20", func(c *pubsubio.WriteConfig) { c.Publisher.NumGoroutines = 1 << 20 }),
		write("MaxActivePublishers a million", func(c *pubsubio.WriteConfig) { c.MaxActivePublishers = 1e6 }),
		write("RecoveryMaxAttempts a billion", func(c *pubsubio.WriteConfig) { c.RecoveryMaxAttempts = 1e9 }),
		write("PublishProgressTimeout over a day", func(c *pubsubio.WriteConfig) { c.PublishProgressTimeout = 48 * time.Hour }),
		write("IDAttribute reserved", func(c *pubsubio.WriteConfig) { c.IDAttribute = "googID" }),
		write("TimestampAttribute blank", func(c *pubsubio.WriteConfig) { c.TimestampAttribute = " " }),
		write("IDAttribute equal to TimestampAttribute", func(c *pubsubio.WriteConfig) { c.IDAttribute, c.TimestampAttribute = "meta", "meta" }),
		write("Connection (as for Read)", func(c *pubsubio.WriteConfig) { c.Connection.EmulatorEndpoint = "localhost" }),
		writeInput("input not a valid PCollection", func(beam.Scope) beam.PCollection { return beam.PCollection{} }),
		writeInput("input not of Message", func(s beam.Scope) beam.PCollection { return beam.Create(s, "x") }),

		deadLetterWrite("Topic unset", func(c *dlq.Config) { c.Topic = pubsubio.Topic{} }, deadLetters),
		deadLetterWrite("Topic bad", func(c *dlq.Config) { c.Topic.ID = "dead letters" }, deadLetters),
		deadLetterWrite("MaxInFlightMessages below -1", func(c *dlq.Config) { c.MaxInFlightMessages = -2 }, deadLetters),
		deadLetterWrite("MaxInFlightMessages 1<<40", func(c *dlq.Config) { c.MaxInFlightMessages = 1 << 40 }, deadLetters),
		deadLetterWrite("FlushTimeout negative", func(c *dlq.Config) { c.FlushTimeout = neg }, deadLetters),
		deadLetterWrite("ShutdownTimeout negative", func(c *dlq.Config) { c.ShutdownTimeout = neg }, deadLetters),
		deadLetterWrite("FlushTimeout math.MaxInt64", func(c *dlq.Config) { c.FlushTimeout = math.MaxInt64 }, deadLetters),
		deadLetterWrite("Connection (as for Read)", func(c *dlq.Config) { c.Connection.EmulatorEndpoint = "localhost" }, deadLetters),
		deadLetterWrite("input not a valid PCollection", func(*dlq.Config) {}, func(beam.Scope) beam.PCollection { return beam.PCollection{} }),
		deadLetterWrite("input not of FailedMessage", func(*dlq.Config) {}, messages),

		records("Format unknown", pubsubio.RecordConfig{Format: "XML"}, messages),
		records("AttributesKey one of the record's keys", pubsubio.RecordConfig{AttributesKey: "data"}, messages),
		records("AttributesKey Data under case folding", pubsubio.RecordConfig{AttributesKey: "Data"}, messages),
		records("AttributesKey of 300 bytes", pubsubio.RecordConfig{AttributesKey: strings.Repeat("a", 300)}, messages),
		records("AttributesKey not UTF-8", pubsubio.RecordConfig{AttributesKey: "\xff"}, messages),
		records("input not a valid PCollection", pubsubio.RecordConfig{}, func(beam.Scope) beam.PCollection { return beam.PCollection{} }),
		records("input not of Message", pubsubio.RecordConfig{}, func(s beam.Scope) beam.PCollection { return beam.Create(s, "x") }),

		deduplicate("IDAttribute reserved", pubsubio.DedupConfig{IDAttribute: "googID"}, messages),
		deduplicate("IDAttribute blank", pubsubio.DedupConfig{IDAttribute: " "}, messages),
		deduplicate("Horizon a bare 1 (nanoseconds)", pubsubio.DedupConfig{Horizon: 1}, messages),
		deduplicate("Horizon over 31 days", pubsubio.DedupConfig{Horizon: 32 * 24 * time.Hour}, messages),
		deduplicate("TimeDomain unknown", pubsubio.DedupConfig{TimeDomain: "WALL_CLOCK"}, messages),
		deduplicate("Missing unknown", pubsubio.DedupConfig{Missing: "DROP"}, messages),
		deduplicate("input not of Message", pubsubio.DedupConfig{}, func(s beam.Scope) beam.PCollection { return beam.Create(s, "x") }),
	}
}

// cell renders text as a markdown table cell: a code span per line, so that
// no character of a message is read as markup.
func cell(text string) string {
	var spans []string
	for _, line := range strings.Split(text, "\n") {
		spans = append(spans, "`"+strings.ReplaceAll(line, "|", `\|`)+"`")
	}
	return strings.Join(spans, "<br>")
}

// renderTable builds every rejection on a fresh pipeline and renders the
// table; a configuration that builds fails the test.
func renderTable(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("| API | option / case | error message |\n| --- | --- | --- |\n")
	seen := map[string]bool{}
	for _, r := range rejections() {
		name := r.api + ": " + r.option
		if seen[name] {
			t.Errorf("two rows are named %q", name)
		}
		seen[name] = true
		err := r.build(beam.NewPipeline().Root())
		if err == nil {
			t.Errorf("%s: the configuration was accepted, want a construction-time error", name)
			continue
		}
		if strings.Contains(err.Error(), "test setup") {
			t.Fatalf("%s: %v", name, err)
		}
		if !errors.Is(err, pubsubio.ErrInvalidConfig) {
			t.Errorf("%s: the error does not wrap ErrInvalidConfig: %v", name, err)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.api, r.option, cell(err.Error()))
	}
	return b.String()
}

// TestConstructionRejections: every bad configuration is refused when the
// pipeline is built, with an error that wraps ErrInvalidConfig, and
// RELIABILITY.md shows exactly what each refusal says.
func TestConstructionRejections(t *testing.T) {
	table := renderTable(t)
	if t.Failed() {
		return
	}
	raw, err := os.ReadFile(reliabilityFile)
	if err != nil {
		t.Fatalf("reading %s: %v", reliabilityFile, err)
	}
	doc := string(raw)
	before, rest, ok1 := strings.Cut(doc, tableBegin+"\n")
	current, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("%s has no block between %q and %q (each on a line of its own) under \"## Construction-time rejections\"; add the two markers and run\n\t%s", reliabilityFile, tableBegin, tableEnd, regenerate)
	}
	if current == table {
		return
	}
	if *update {
		path, _ := filepath.Abs(reliabilityFile)
		if err := os.WriteFile(reliabilityFile, []byte(before+tableBegin+"\n"+table+tableEnd+after), 0o644); err != nil {
			t.Fatalf("updating %s: %v", path, err)
		}
		t.Logf("rewrote the rejections table in %s (%d rows)", path, strings.Count(table, "\n")-2)
		return
	}
	t.Errorf("the rejections table in %s is out of date; regenerate it with\n\t%s\n%s", reliabilityFile, regenerate, lineDiff(current, table))
}

// lineDiff lists the lines only in want or only in got, in order.
func lineDiff(got, want string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	gotLines, wantLines := in(got), in(want)
	var b strings.Builder
	for _, l := range strings.Split(got, "\n") {
		if !wantLines[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(want, "\n") {
		if !gotLines[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
