package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// emulatorGroup is the process group of the emulator this run started, 0
// when it was given with --emulator. On a 2-core machine the emulator and
// the contenders share the CPU, so what a contender makes the emulator do
// (acks, lease extensions, redeliveries) is part of its cost.
var emulatorGroup int

// clockTicks is Linux's USER_HZ, the unit of /proc/PID/stat times: 100 on
// every architecture Go supports on Linux.
const clockTicks = 100

// emulatorCPU is the CPU used so far by every process of the emulator's
// group (its launcher script and the JVM), 0 when it is not ours.
func emulatorCPU() time.Duration {
	if emulatorGroup == 0 {
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
		if pgrp, _ := strconv.Atoi(f[2]); pgrp != emulatorGroup {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += utime + stime
	}
	return time.Duration(ticks) * time.Second / clockTicks
}
