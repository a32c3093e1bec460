package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// serverGroup is the process group of the Pub/Sub server of the cases
// running now (the emulator this run started, or the saturation server), 0
// when the emulator was given with --emulator. On a 2-core machine the
// server and the contenders share the CPU, so what a contender makes the
// server do (acks, lease extensions, redeliveries) is part of its cost.
var serverGroup int

// runnerGroup is the process group of a standalone Prism the cases running
// now submit to, 0 when pipelines run on Prism in this process.
var runnerGroup int

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat times: 100 on
// every architecture Go supports on Linux.
const clockTicks = 100

// groupCPU is the CPU used so far by every process of the group (for the
// emulator its launcher script and the JVM), 0 for group 0.
func groupCPU(group int) time.Duration {
	if group == 0 {
		return 0
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended meanwhile
		}
		// The command name, in parentheses, may hold spaces: fields are
		// counted after its closing parenthesis (proc(5): state is field 3,
		// pgrp 5, utime 14, stime 15).
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		if pgrp, _ := strconv.Atoi(f[2]); pgrp != group {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * time.Second / clockTicks
}
