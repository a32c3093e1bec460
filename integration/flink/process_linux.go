package flink

import "syscall"

// setPdeathsig makes the kernel SIGKILL a JVM when the thread that started
// it dies, so a test binary killed by `go test -timeout` or a panic does
// not leak a job server or TaskManager. startProcess keeps that thread
// locked and alive until the child is reaped.
func setPdeathsig(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
