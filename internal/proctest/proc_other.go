//go:build unix && !linux

package proctest

import "syscall"

// sysProcAttr puts the child in a process group of its own (its pgid is its pid).
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// Running would list the group's live processes; without /proc it lists none.
func Running(pgid int) []int { return nil }

// Alive would tell whether pid runs; without /proc it says no.
func Alive(pid int) bool { return false }
