//go:build !linux

package motoserver

import "syscall"

// setDeathSignal does nothing where the kernel has no parent-death signal; Stop stops the
// server itself.
func setDeathSignal(*syscall.SysProcAttr) {}
