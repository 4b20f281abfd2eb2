package azuritetest

import "syscall"

// A test binary killed by the go test timeout runs no cleanup; the kernel
// then kills Azurite with it.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
