package source

import "testing"

// A second drain of a job while the first runs in this process is not
// started; once the first ended, one may start again.
func TestInBackgroundOnce(t *testing.T) {
	release := make(chan struct{})
	first := inBackgroundOnce("jm:8081 orders", func() { <-release })
	if first == nil {
		t.Fatal("the first drain did not start")
	}
	if inBackgroundOnce("jm:8081 orders", func() { t.Error("a second drain of the same job ran") }) != nil {
		t.Error("a second drain of the same job started while the first ran")
	}
	if other := inBackgroundOnce("jm:8081 invoices", func() {}); other == nil {
		t.Error("the drain of another job did not start")
	} else {
		<-other
	}
	close(release)
	<-first
	again := inBackgroundOnce("jm:8081 orders", func() {})
	if again == nil {
		t.Fatal("a drain did not start after the first one ended")
	}
	<-again
}
