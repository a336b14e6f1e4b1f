package proctest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// sysProcAttr puts the child in a process group of its own (its pgid is its pid) and has the
// kernel kill it should the test binary die without cleaning up.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// Running lists the processes of the group pgid that have not exited (zombies excluded), from
// /proc.
func Running(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, group, ok := stat(pid); ok && group == pgid && state != "Z" && state != "X" {
			pids = append(pids, pid)
		}
	}
	return pids
}

// Alive reports whether the process pid exists and has not exited (a zombie has).
func Alive(pid int) bool {
	state, _, ok := stat(pid)
	return ok && state != "Z" && state != "X"
}

// stat reads a process's state and process group from /proc/PID/stat: "pid (comm) state ppid
// pgrp ...", where comm may hold spaces and parentheses (so the fields start after the last ')').
func stat(pid int) (state string, pgrp int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 3 {
		return "", 0, false
	}
	pgrp, err = strconv.Atoi(fields[2])
	return fields[0], pgrp, err == nil
}
