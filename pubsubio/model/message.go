package model

import "time"

// Message is one Pub/Sub message as it flows through a pipeline. The source
// fills every field it knows; the sink reads Data, Attributes, OrderingKey
// and, when set, Topic (dynamic destinations).
type Message struct {
	// ID is the server-assigned message ID (source only).
	ID string
	// Data is the payload.
	Data []byte
	// Attributes are the message's key/value attributes.
	Attributes map[string]string
	// OrderingKey is the ordering key, empty when the message has none.
	OrderingKey string
	// PublishTime is when Pub/Sub accepted the message (source only).
	PublishTime time.Time
	// DeliveryAttempt counts deliveries when the subscription has a
	// dead-letter policy; 0 when Pub/Sub does not report it (source only).
	DeliveryAttempt int
	// Subscription is the subscription the message was read from (source
	// only).
	Subscription Subscription
	// Topic, when set on a message given to the sink, overrides the sink's
	// default destination.
	Topic Topic
}
