//go:build unix && !linux

package proc

import "syscall"

// setPdeathsig is Linux-only; elsewhere a test binary that dies abruptly
// can leave its children running (kill them by the process group IDs in
// the logs).
func setPdeathsig(*syscall.SysProcAttr) {}
