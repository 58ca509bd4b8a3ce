//go:build !linux

package redistest

import "syscall"

// sysProcAttr returns nil: outside Linux there is no parent-death signal, so
// servers are only stopped by the tests' cleanups.
func sysProcAttr() *syscall.SysProcAttr { return nil }
