package proc

import (
	"errors"
	"strings"
)

// ErrPortTaken says a server could not bind its port: a caller that picked
// the port retries on another.
var ErrPortTaken = errors.New("port already in use")

// ErrNoUnix says this system cannot start process groups.
var ErrNoUnix = errors.New("proc: starting process groups needs a Unix system")

// PortTaken reports whether a JVM's output says it could not bind a port.
// A failed bind does not end the JVM (netty's threads keep it alive), so
// its starter watches the output instead of waiting for an exit.
func PortTaken(output string) bool {
	return strings.Contains(output, "Address already in use") || strings.Contains(output, "BindException")
}
