//go:build !unix

package flink

import (
	"errors"
	"fmt"
	"time"
)

// Starting and killing process groups needs Unix.

type process struct {
	name    string
	pid     int
	started time.Time
	exited  chan struct{}
	waitErr error
}

var errNoUnix = fmt.Errorf("%w: starting Flink processes needs a Unix system", ErrUnavailable)

func startProcess(string, string, []string, string, string, []string) (*process, error) {
	return nil, errNoUnix
}
func (p *process) running() bool         { return false }
func (p *process) kill() error           { return nil }
func (p *process) output(int) string     { return "" }
func readTail(string, int64, int) string { return "" }
func lockFile(string) (func(), error)    { return nil, errors.New("flink: no file locks") }
