package sample

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// MiB is a mebibyte, the unit memory figures are reported in.
const MiB = 1 << 20

// Memory is what the kernel says about this process's resident memory.
type Memory struct {
	RSS  int64 // VmRSS: resident now, bytes
	Peak int64 // VmHWM: the highest RSS since the process started, bytes
}

// ReadMemory reads VmRSS and VmHWM from /proc/self/status. It is Linux
// only: elsewhere it returns an error saying so.
func ReadMemory() (Memory, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return Memory{}, fmt.Errorf("sample: reading resident memory needs Linux's /proc/self/status: %w", err)
	}
	defer f.Close()
	var m Memory
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch key {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.Peak
		default:
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("sample: /proc/self/status %s %q is not a kB count: %w", key, val, err)
		}
		*dst = kib << 10
		found++
	}
	if err := sc.Err(); err != nil {
		return Memory{}, fmt.Errorf("sample: reading /proc/self/status: %w", err)
	}
	if found != 2 {
		return Memory{}, fmt.Errorf("sample: /proc/self/status lacks VmRSS or VmHWM")
	}
	return m, nil
}

// Goroutines is the number of goroutines in this process now.
func Goroutines() int { return runtime.NumGoroutine() }
