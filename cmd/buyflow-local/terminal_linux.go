package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// ownTerminal moves this process into a process group of its own and makes that group the
// terminal's foreground group, so that Ctrl-C reaches the stack alone and not the make that
// started it: make catches SIGINT, waits for its child and then kills itself with SIGINT
// (exit 130) whatever the child returned, so a clean Ctrl-C would still end `make local` as
// interrupted. The stack stops on Ctrl-C as before, exits 0, and make sees an ordinary 0.
// While it owns the terminal, Ctrl-Z (SIGTSTP) is ignored: it would stop the stack alone and
// leave make waiting on it with no prompt to resume it from. It returns the function that gives
// the terminal back to the group that had it. Without a controlling terminal, or when not in the
// terminal's foreground (started with &), it changes nothing.
func ownTerminal() (restore func()) {
	nothing := func() {}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nothing
	}
	fd := tty.Fd()
	orig, err := foregroundGroup(fd)
	if err != nil || orig != syscall.Getpgrp() || syscall.Getpid() == orig {
		_ = tty.Close() // read-only use; nothing was changed
		return nothing
	}
	if err := syscall.Setpgid(0, 0); err != nil {
		_ = tty.Close()
		return nothing
	}
	// A process outside the foreground group that sets the foreground group gets SIGTTOU.
	signal.Ignore(syscall.SIGTTOU)
	if err := setForegroundGroup(fd, syscall.Getpid()); err != nil {
		_ = syscall.Setpgid(0, orig) // back where it was, so Ctrl-C still reaches it
		signal.Reset(syscall.SIGTTOU)
		_ = tty.Close()
		return nothing
	}
	signal.Ignore(syscall.SIGTSTP)
	return func() {
		_ = setForegroundGroup(fd, orig) // best effort: the shell takes the terminal back when make ends
		signal.Reset(syscall.SIGTTOU, syscall.SIGTSTP)
		_ = tty.Close()
	}
}

func foregroundGroup(fd uintptr) (int, error) {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, errno
	}
	return int(pgrp), nil
}

func setForegroundGroup(fd uintptr, pgrp int) error {
	p := int32(pgrp)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p))); errno != 0 {
		return errno
	}
	return nil
}
