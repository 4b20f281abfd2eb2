//go:build unix && !linux

package azuritetest

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
