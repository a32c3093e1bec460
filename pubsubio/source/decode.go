package source

import (
	"fmt"
	"strconv"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/graph/mtime"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// decoded is what the read makes of a message before it can emit it,
// worked out once, as the message arrives (on the client's goroutine, so
// that a bundle only emits).
type decoded struct {
	// eventTime is what the message is emitted at: the time in
	// TimestampAttribute when that is set and present, else the publish
	// time, which is also what a dead letter of a malformed attribute gets.
	eventTime time.Time
	// err says why the message cannot be emitted as a message: its
	// timestamp attribute is malformed, or its payload does not hold
	// Format. It then follows DecodePolicy.
	err error
}

// decode decodes m under cfg.
func decode(cfg *Config, m model.Message) decoded {
	t, err := eventTime(cfg.TimestampAttribute, m.Attributes, m.PublishTime)
	if err != nil {
		return decoded{eventTime: m.PublishTime, err: err}
	}
	return decoded{eventTime: t, err: cfg.Format.Check(m.Data)}
}

// eventTime is a message's event time: the timestamp attribute when one is
// configured and present, else the publish time. The attribute holds RFC
// 3339 or Unix milliseconds, the two forms Beam's other Pub/Sub connectors
// accept; anything else is an error naming the attribute and the value.
// So is a time Beam cannot carry (inRange).
func eventTime(attribute string, attrs map[string]string, publish time.Time) (time.Time, error) {
	v, ok := attrs[attribute]
	if attribute == "" || !ok {
		if err := inRange(publish); err != nil {
			return publish, fmt.Errorf("publish time %w", err)
		}
		return publish, nil
	}
	return parseEventTime(attribute, v)
}

// Beam's timestamps run from mtime.MinTimestamp to the end of the global
// window; an element outside them cannot be emitted as what it says.
var (
	minEventTime = mtime.MinTimestamp.ToTime()
	maxEventTime = mtime.EndOfGlobalWindowTime.ToTime()
)

// inRange says why t is not a time Beam can carry, or returns nil.
func inRange(t time.Time) error {
	if t.Before(minEventTime) || t.After(maxEventTime) {
		return fmt.Errorf("%s is outside the timestamps Beam can carry (%s to %s)", t.UTC().Format(time.RFC3339Nano), minEventTime.Format(time.RFC3339), maxEventTime.Format(time.RFC3339))
	}
	return nil
}

// parseEventTime parses v, the value of the timestamp attribute. It is
// apart from eventTime so that the common path, no attribute, keeps a
// small stack frame: it runs on a fresh goroutine per message.
func parseEventTime(attribute, v string) (time.Time, error) {
	var t time.Time
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		t = time.UnixMilli(ms)
	} else if t, err = time.Parse(time.RFC3339Nano, v); err != nil {
		return time.Time{}, fmt.Errorf("timestamp attribute %q has value %q, which is neither RFC 3339 nor Unix milliseconds", attribute, text.Truncate(v, text.MaxQuoted))
	}
	if err := inRange(t); err != nil {
		return time.Time{}, fmt.Errorf("timestamp attribute %q has value %q: %w", attribute, text.Truncate(v, text.MaxQuoted), err)
	}
	return t, nil
}
