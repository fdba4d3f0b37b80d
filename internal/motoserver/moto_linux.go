package motoserver

import "syscall"

// setDeathSignal kills moto_server if the process that started it dies without stopping it.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
