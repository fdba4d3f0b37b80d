//go:build !linux

package dynamotest

import "syscall"

// setDeathSignal does nothing where the kernel has no parent-death signal; RunBoth stops the
// server itself.
func setDeathSignal(*syscall.SysProcAttr) {}
