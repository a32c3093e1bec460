//go:build unix && !linux

package emulator

import "syscall"

// setPdeathsig is Linux-only; elsewhere a test binary that dies abruptly can
// leave the emulator running (kill it by the process group id it logged).
func setPdeathsig(*syscall.SysProcAttr) {}
