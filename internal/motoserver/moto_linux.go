package dynamotest

import "syscall"

// setDeathSignal kills moto_server if the test binary dies without stopping it.
func setDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
