package pubsubio

import "github.com/pubsubio/beam-pubsubio/pubsubio/internal/construct"

// ErrInvalidConfig is wrapped by every error that Read, Write, Decode,
// Encode, Records, WriteDeadLetters and their Try variants return at
// graph construction for an invalid configuration or input: match it with
// errors.Is. The error's text names the option, the value and what to do.
var ErrInvalidConfig = construct.ErrInvalidConfig
