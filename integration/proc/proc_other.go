//go:build !unix

package proc

import (
	"os/exec"
	"time"
)

// Child is a started command; StartCmd always fails here.
type Child struct{ Cmd *exec.Cmd }

func StartCmd(*exec.Cmd, bool) (*Child, error) { return nil, ErrNoUnix }
func (c *Child) Exited() <-chan struct{}       { return nil }
func (c *Child) Err() error                    { return nil }
func (c *Child) Running() bool                 { return false }

// Process is a running child; Start always fails here.
type Process struct {
	*Child
	Name    string
	PID     int
	Started time.Time
}

func Start(string, string, []string, string, string, []string) (*Process, error) {
	return nil, ErrNoUnix
}
func (p *Process) Kill() error           { return nil }
func (p *Process) Output(int) string     { return "" }
func ReadTail(string, int64, int) string { return "" }
