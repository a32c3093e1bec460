package localport

import (
	"net"
	"strconv"
	"testing"
)

// TestReservePicksBelowTheEphemeralRange: the ports are distinct, free,
// and outside the range the kernel hands out to other programs.
func TestReservePicksBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low-floor < minSpan {
		t.Skipf("the ephemeral range starts at %d: Reserve lets the kernel choose", low)
	}
	ports, err := Reserve(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < floor || p >= low {
			t.Errorf("port %d outside %d-%d", p, floor, low-1)
		}
		if seen[p] {
			t.Errorf("port %d reserved twice in %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free after Reserve: %v", p, err)
			continue
		}
		l.Close()
	}
	t.Logf("reserved %v; the ephemeral range starts at %d", ports, low)
}
