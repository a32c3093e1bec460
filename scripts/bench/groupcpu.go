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
	var cpu time.Duration
	for _, p := range procStats() {
		if p.pgrp == group {
			cpu += p.own
		}
	}
	return cpu
}

// procStat is one process's figures from /proc/PID/stat (proc(5)).
type procStat struct {
	pgrp     int
	comm     string
	own      time.Duration // utime + stime
	children time.Duration // cutime + cstime: its children reaped so far
	rss      int64         // resident bytes
}

// procStats reads every process's figures.
func procStats() []procStat {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []procStat
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended meanwhile
		}
		// The command name, in parentheses, may hold spaces: fields are
		// counted after its closing parenthesis (state is field 3, pgrp 5,
		// utime 14, stime 15, cutime 16, cstime 17, rss 24 in pages).
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 22 {
			continue
		}
		pgrp, _ := strconv.Atoi(f[2])
		ticks := func(i int) time.Duration {
			t, _ := strconv.ParseInt(f[i], 10, 64)
			return time.Duration(t) * time.Second / clockTicks
		}
		pages, _ := strconv.ParseInt(f[21], 10, 64)
		out = append(out, procStat{pgrp: pgrp, comm: s[open+1 : end], own: ticks(11) + ticks(12), children: ticks(13) + ticks(14), rss: pages * int64(os.Getpagesize())})
	}
	return out
}
