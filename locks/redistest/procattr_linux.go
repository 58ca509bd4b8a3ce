//go:build linux

package redistest

import "syscall"

// sysProcAttr asks the kernel to SIGKILL redis-server when the test binary
// dies without running its cleanups (a go test -timeout panic, Ctrl-C, an
// OOM kill). Without it such runs leave orphaned servers holding ports.
//
// Linux ties the parent-death signal to the OS thread that started the
// child, not the process. The Go runtime only retires a thread when a
// goroutine exits while locked to it with runtime.LockOSThread, which the
// harness never does, so in practice the signal fires only when the test
// binary exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
