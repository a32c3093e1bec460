//go:build !unix

package emulator

import (
	"context"
	"errors"
)

// Starting and killing a process group needs Unix; elsewhere use
// PUBSUB_IT_EMULATOR or Docker.

type process struct{ pid int }

var errNoUnix = errors.New("starting the emulator process needs a Unix system; set " + EnvEndpoint + "=host:port instead")

func startProcess(context.Context, string, string) (*process, error) { return nil, errNoUnix }
func (p *process) stop() error                                       { return nil }
func (p *process) output(int) string                                 { return "" }
