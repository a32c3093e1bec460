// Package localport picks loopback ports for test servers that must come
// back on the same port after they are killed: an emulator restarted under
// a running pipeline, a Flink job server restarted from a checkpoint.
//
// A port the kernel handed out for listen("127.0.0.1:0") lies in its
// ephemeral range, which every process on the machine also draws from for
// the source ports of its outgoing connections and for its own
// listen(":0"). While the killed server is down, any of them may take its
// port, and the restart then fails to bind. Ports below that range are
// handed out by no one but the programs that name them, so Reserve picks
// there.
package localport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"slices"
)

// rangeFile holds the kernel's ephemeral port range, "low high".
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// floor is the lowest port Reserve picks: well above the ports system
// services are configured on.
const floor = 10000

// minSpan is the fewest ports below the ephemeral range for Reserve to
// pick from them; with fewer it falls back to the kernel's choice.
const minSpan = 1000

// Reserve returns n distinct loopback ports that were free a moment ago,
// each probed by listening on it. They are released before it returns, so
// the caller's server binds them; a start that still loses one to another
// program should pick again.
func Reserve(n int) ([]int, error) {
	low, high := floor, ephemeralLow()
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for attempts := 0; len(ports) < n; attempts++ {
		if attempts == 100*n {
			return nil, fmt.Errorf("localport: no %d free ports in %d-%d after %d probes", n, low, high-1, attempts)
		}
		addr := "127.0.0.1:0"
		if high-low >= minSpan {
			addr = fmt.Sprintf("127.0.0.1:%d", low+rand.IntN(high-low))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ls = append(ls, l)
		if p := l.Addr().(*net.TCPAddr).Port; !slices.Contains(ports, p) {
			ports = append(ports, p)
		}
	}
	return ports, nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, or 0
// when it cannot be read (then Reserve lets the kernel choose).
func ephemeralLow() int {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0
	}
	var low int
	if _, err := fmt.Sscan(string(b), &low); err != nil {
		return 0
	}
	return low
}
