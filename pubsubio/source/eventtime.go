package source

import (
	"fmt"
	"strconv"
	"time"
)

// eventTime is a message's event time: the timestamp attribute when one is
// configured and present, else the publish time. The attribute holds RFC
// 3339 or Unix milliseconds, the two forms Beam's other Pub/Sub connectors
// accept; anything else is an error naming the attribute and the value.
func eventTime(attribute string, attrs map[string]string, publish time.Time) (time.Time, error) {
	if attribute == "" {
		return publish, nil
	}
	v, ok := attrs[attribute]
	if !ok {
		return publish, nil
	}
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("timestamp attribute %q has value %q, which is neither RFC 3339 nor Unix milliseconds", attribute, truncate(v, 64))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
