// Package model holds the values every part of pubsubio passes around:
// resource names (Subscription, Topic) and the Message that flows through a
// pipeline. It is a leaf package so that source, sink and dlq can share the
// types without importing each other; package pubsubio re-exports them with
// type aliases, the way the Pub/Sub client re-exports its Message.
package model
