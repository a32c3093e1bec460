package flinkjob

import "testing"

// Beam's Flink runner names the Flink job after the Beam job: lower case,
// every other character a 0, then -user-date-random.
func TestNameOf(t *testing.T) {
	if got := NameOf("my_Orders-job.2"); got != "my0orders0job02" {
		t.Errorf("NameOf = %q, want my0orders0job02", got)
	}
}
