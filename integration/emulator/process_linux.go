package emulator

import "syscall"

// setPdeathsig makes the kernel SIGKILL the emulator if the thread that
// started it dies, so a test binary killed by `go test -timeout`, a panic or
// Ctrl-C (the emulator is in its own process group and does not get the
// terminal's SIGINT) does not leak a JVM. startProcess keeps that thread
// locked and alive until the child is reaped.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
