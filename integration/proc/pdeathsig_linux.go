package proc

import "syscall"

// setPdeathsig makes the kernel SIGKILL the child when the thread that
// started it dies. Start keeps that thread locked and alive until the
// child is reaped.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
