//go:build unix && !linux

package flink

import "syscall"

// setPdeathsig is Linux-only; elsewhere a test binary that dies abruptly
// can leave JVMs running (kill them by the process group ids in the logs).
func setPdeathsig(*syscall.SysProcAttr) {}
