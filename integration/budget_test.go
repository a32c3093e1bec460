package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/x/beamx"

	"github.com/pubsubio/beam-pubsubio/integration/collect"
	"github.com/pubsubio/beam-pubsubio/integration/crash"
	"github.com/pubsubio/beam-pubsubio/integration/emulator"
	"github.com/pubsubio/beam-pubsubio/integration/sample"
	"github.com/pubsubio/beam-pubsubio/pubsubio"
)

// The memory budget under a stalled downstream: a backlog of 200,000 4 KiB
// messages, a read whose client flow control is off (so the source's own
// buffer budget is the only bound), and a downstream DoFn that blocks for a
// minute. Each budget runs in a fresh child process (this test binary
// re-executed), so one run's heap cannot hide in the next one's RSS and the
// baseline is a clean process's.
const (
	budgetBacklog = 200_000
	budgetSize    = 4096
	budgetStall   = 60 * time.Second // how long the downstream is held
	budgetEnter   = 2 * time.Minute  // bound on the first element reaching the stall
	budgetFinish  = 10 * time.Minute // bound on the stalled read finishing after the stall
	budgetLate    = 15 * time.Minute // bound on the read of the rest finishing

	// budgetLateIdle ends the read of the rest if not every message came
	// back (it is cancelled once every one did). The emulator strands what
	// it pushed into a stream the subscriber cancelled (the budget's stop)
	// and gives it back in bursts up to two minutes apart (RELIABILITY.md),
	// so a shorter idle timeout would end the read with messages still on
	// their way.
	budgetLateIdle = 5 * time.Minute
	budgetSampleE  = 500 * time.Millisecond // RSS sample interval during the stall

	// The asserted bound: peak RSS during the stall <= baseline +
	// budgetPerByte * budget bytes + budgetOverhead. See RELIABILITY.md for
	// the measured slope and intercept these leave room above.
	budgetPerByte  = 3.0       // RSS bytes per budgeted byte
	budgetOverhead = 160 << 20 // bytes

	envBudgetChild  = "PUBSUB_IT_BUDGET_CHILD" // the child's parameters, JSON
	budgetResultTag = "BUDGET-RESULT "
)

func init() {
	register.DoFn1x1[pubsubio.Message, string](&stallFn{})
}

// stallRelease is closed by the child test to end the stall; stallEntered
// is closed by the first element that reaches it.
var (
	stallRelease = make(chan struct{})
	stallEntered = make(chan struct{})
	stallOnce    = make(chan struct{}, 1)
)

// stallFn blocks every element until stallRelease is closed, then passes
// its key on: a downstream that stops consuming, fused into the read's
// bundle on Prism, so the read's ProcessElement is blocked too.
type stallFn struct{}

func (f *stallFn) ProcessElement(m pubsubio.Message) string {
	select {
	case stallOnce <- struct{}{}:
		close(stallEntered)
	default:
	}
	<-stallRelease
	return subscriptionAndID(m)
}

// budgetCase is one child run: its subscription and its budget.
type budgetCase struct {
	Subscription pubsubio.Subscription
	Endpoint     string
	MaxMessages  int
	MaxBytes     int64
}

// budgetBytes is the budget in bytes as it binds for budgetSize messages:
// whichever of the two caps is reached first.
func (c budgetCase) budgetBytes() int64 {
	return min(c.MaxBytes, int64(c.MaxMessages)*budgetSize)
}

// budgetResult is what a child measured.
type budgetResult struct {
	BaselineRSS         int64   // before the pipeline was submitted
	StallPeakRSS        int64   // highest RSS sampled while the downstream was held
	StallLastRSS        int64   // RSS at the end of the stall
	PeakHWM             int64   // the kernel's peak RSS over the whole child run
	StallSeries         []int64 // RSS every 5 s of the stall, MiB
	Delivered           int     // distinct message IDs emitted after the stall
	Duplicates          int     // emissions beyond one per ID
	StalledRunDelivered int     // what the stalled pipeline emitted before it finished
	NackedBudget        int64   // messages_nacked_budget
	NackedOther         int64   // the other nack counters, summed
	Restarts            int64   // subscriber_restarts
	LateDelivered       int     // distinct IDs only the read after the stalled one emitted
	StallEnteredS       float64 // seconds from submission to the first element stalled
	LastArrivalS        float64 // seconds from release to the last emission of the read of the rest
	DrainS              float64 // seconds from release to the read of the rest finishing
}

func TestBudgetStalledDownstream(t *testing.T) {
	t.Parallel()
	longTests(t)
	e := emulator.Require(t)
	topic := e.CreateTopic(t, "budget")
	cases := []budgetCase{
		{MaxMessages: 1_000, MaxBytes: 8 << 20},
		{MaxMessages: 20_000, MaxBytes: 128 << 20},
	}
	for i := range cases {
		cases[i].Subscription = e.CreateSubscription(t, topic, fmt.Sprintf("budget-%d", cases[i].MaxMessages), 60*time.Second)
		cases[i].Endpoint = e.Endpoint
	}
	start := time.Now()
	e.Publish(t, topic, budgetBacklog, budgetSize, nil)
	t.Logf("published %d messages of %d bytes in %v", budgetBacklog, budgetSize, time.Since(start).Round(time.Second))

	results := make([]budgetResult, len(cases))
	for i, c := range cases {
		results[i] = runBudgetChild(t, c)
		r := results[i]
		t.Logf("BUDGET-RUN budget=%d msgs/%d MiB (binding %.1f MiB) baseline=%.1fMiB stall_peak=%.1fMiB stall_end=%.1fMiB hwm=%.1fMiB delivered=%d (stalled run %d, read of the rest %d new) duplicates=%d nacked_budget=%d nacked_other=%d restarts=%d stall_entered=%.1fs last_arrival=%.1fs drain=%.1fs stall_series_MiB=%v",
			c.MaxMessages, c.MaxBytes>>20, float64(c.budgetBytes())/sample.MiB,
			mib(r.BaselineRSS), mib(r.StallPeakRSS), mib(r.StallLastRSS), mib(r.PeakHWM),
			r.Delivered, r.StalledRunDelivered, r.LateDelivered, r.Duplicates, r.NackedBudget, r.NackedOther, r.Restarts, r.StallEnteredS, r.LastArrivalS, r.DrainS, r.StallSeries)
	}

	// The fit: growth over baseline = overhead + slope * budget bytes,
	// least squares over the runs.
	var x, y []float64
	for i, c := range cases {
		x = append(x, float64(c.budgetBytes()))
		y = append(y, float64(results[i].StallPeakRSS-results[i].BaselineRSS))
	}
	slope, overhead := sample.LeastSquares(x, y)
	t.Logf("BUDGET-FIT stall peak - baseline = %.1f MiB + %.2f x budget bytes (least squares over %d runs)", overhead/sample.MiB, slope, len(x))

	for i, c := range cases {
		r := results[i]
		limit := r.BaselineRSS + int64(budgetPerByte*float64(c.budgetBytes())) + budgetOverhead
		if r.StallPeakRSS > limit {
			t.Errorf("budget %d msgs/%d MiB: peak RSS %.1f MiB during the stall exceeds baseline %.1f + %.1f x %.1f MiB + %d MiB = %.1f MiB",
				c.MaxMessages, c.MaxBytes>>20, mib(r.StallPeakRSS), mib(r.BaselineRSS), budgetPerByte, float64(c.budgetBytes())/sample.MiB, budgetOverhead>>20, mib(limit))
		}
		if r.Delivered != budgetBacklog {
			t.Errorf("budget %d msgs: %d of %d messages delivered after the stall", c.MaxMessages, r.Delivered, budgetBacklog)
		}
		if r.NackedBudget == 0 {
			t.Errorf("budget %d msgs: no message was nacked for the budget, so the stall never filled it: the test proved nothing", c.MaxMessages)
		}
	}
}

func mib(b int64) float64 { return float64(b) / sample.MiB }

// runBudgetChild runs TestBudgetChild in a fresh process for c and returns
// what it reported.
func runBudgetChild(t *testing.T, c budgetCase) budgetResult {
	t.Helper()
	spec, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), budgetEnter+budgetStall+budgetFinish+budgetLate+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestBudgetChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envBudgetChild+"="+string(spec), envLong+"=1", emulator.EnvEndpoint+"="+c.Endpoint)
	var out bytes.Buffer
	logFile, err := os.CreateTemp("", "pubsubio-budget-child-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	t.Logf("budget child for %d msgs: output in %s", c.MaxMessages, logFile.Name())
	w := io.MultiWriter(&out, logFile)
	cmd.Stdout, cmd.Stderr = w, w
	runErr := cmd.Run()
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if _, after, ok := strings.Cut(line, budgetResultTag); ok {
			var r budgetResult
			if err := json.Unmarshal([]byte(after), &r); err != nil {
				t.Fatalf("budget child: unreadable result %q: %v", after, err)
			}
			if runErr != nil {
				t.Errorf("budget child for %d msgs exited with %v after reporting:\n%s", c.MaxMessages, runErr, crash.Tail(out.String(), 4000))
			}
			return r
		}
	}
	t.Fatalf("budget child for %d msgs reported nothing (%v); its output ends:\n%s", c.MaxMessages, runErr, crash.Tail(out.String(), 8000))
	return budgetResult{}
}

// TestBudgetChild is one budget run, in a process of its own started by
// TestBudgetStalledDownstream; it skips when run any other way.
//
// Two pipelines. The stalled one: a bounded read (IdleTimeout 10 s) with
// the client's flow control off, held for budgetStall, which ends at its
// first poll after the release: crossing the budget stopped its subscriber
// and gave its buffer back, so nothing arrived for longer than the idle
// timeout (measured; RELIABILITY.md names this limit). Then a bounded read
// with ordinary flow control delivers the rest, including what the emulator
// stranded in the streams the budget cancelled: it is cancelled once every
// message is back, or ends after budgetLateIdle without an arrival.
func TestBudgetChild(t *testing.T) {
	spec := os.Getenv(envBudgetChild)
	if spec == "" {
		t.Skip("the child of TestBudgetStalledDownstream; runs only when that test starts it")
	}
	var c budgetCase
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatalf("%s=%q: %v", envBudgetChild, spec, err)
	}
	subs := []pubsubio.Subscription{c.Subscription}
	conn := pubsubio.Connection{EmulatorEndpoint: c.Endpoint}
	var r budgetResult
	base, err := sample.ReadMemory()
	if err != nil {
		t.Fatal(err)
	}
	r.BaselineRSS = base.RSS

	p, s := beam.NewPipelineWithRoot()
	msgs := pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions: subs,
		// Flow control off: only the source's budget bounds what it holds.
		MaxOutstandingMessages: -1,
		MaxOutstandingBytes:    -1,
		BufferMaxMessages:      c.MaxMessages,
		BufferMaxBytes:         c.MaxBytes,
		IdleTimeout:            10 * time.Second,
		Connection:             conn,
	})
	stalled := collect.Bucket(t)
	collect.Into(s, stalled, beam.ParDo(s, &stallFn{}, msgs))

	submitted := time.Now()
	type outcome struct {
		res beam.PipelineResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := beamx.RunWithMetrics(context.Background(), p)
		done <- outcome{res, err}
	}()
	select {
	case <-stallEntered:
	case o := <-done:
		t.Fatalf("the pipeline returned before any element reached the stalled step: %v", o.err)
	case <-time.After(budgetEnter):
		t.Fatalf("no element reached the stalled step within %v", budgetEnter)
	}
	r.StallEnteredS = time.Since(submitted).Seconds()

	stallStart := time.Now()
	tick := time.NewTicker(budgetSampleE)
	for now := range tick.C {
		m, err := sample.ReadMemory()
		if err != nil {
			t.Fatal(err)
		}
		r.StallPeakRSS = max(r.StallPeakRSS, m.RSS)
		r.StallLastRSS = m.RSS
		if len(r.StallSeries) < int(now.Sub(stallStart)/(5*time.Second))+1 {
			r.StallSeries = append(r.StallSeries, m.RSS>>20)
		}
		if now.Sub(stallStart) >= budgetStall {
			break
		}
	}
	tick.Stop()
	released := time.Now()
	close(stallRelease)

	var o outcome
	select {
	case o = <-done:
	case <-time.After(budgetFinish):
		t.Fatalf("the stalled read did not finish within %v of its release; %d messages emitted", budgetFinish, collect.Len(stalled))
	}
	if o.err != nil {
		t.Fatalf("the stalled pipeline failed: %v", o.err)
	}
	r.NackedBudget = counter(o.res, "messages_nacked_budget")
	for _, name := range []string{"messages_nacked_release", "messages_nacked_shutdown", "messages_nacked_superseded", "messages_nacked_uncommitted"} {
		r.NackedOther += counter(o.res, name)
	}
	r.Restarts = counter(o.res, "subscriber_restarts")
	r.StalledRunDelivered = collect.Len(stalled)

	// Everything the stalled job did not commit comes back to a bounded
	// read with ordinary flow control (one split, at most the budget
	// outstanding, so it never crosses the budget).
	p, s = beam.NewPipelineWithRoot()
	msgs = pubsubio.Read(s, pubsubio.ReadConfig{
		Subscriptions:          subs,
		MaxOutstandingMessages: min(c.MaxMessages, 1000),
		BufferMaxMessages:      c.MaxMessages,
		BufferMaxBytes:         c.MaxBytes,
		IdleTimeout:            budgetLateIdle,
		Connection:             conn,
	})
	rest := collect.Bucket(t)
	collect.Into(s, rest, beam.ParDo(s, subscriptionAndID, msgs))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	finished := make(chan error, 1)
	go func() { finished <- beamx.Run(ctx, p) }()
	lastArrival, emitted := released, 0
	check := time.NewTicker(time.Second)
	defer check.Stop()
	deadline := time.After(budgetLate)
	for running := true; running; {
		select {
		case err := <-finished:
			if err != nil && ctx.Err() == nil {
				t.Fatalf("the read of the rest after the stall failed: %v", err)
			}
			running = false
		case <-deadline:
			t.Fatalf("the read of the rest after the stall did not finish within %v; %d messages emitted", budgetLate, collect.Len(rest))
		case now := <-check.C:
			if n := collect.Len(rest); n != emitted {
				emitted, lastArrival = n, now
				if tallyBudget(t, stalled, rest).Delivered == budgetBacklog {
					cancel() // every message is back; what a cancel leaves unacked is not counted
				}
			}
		}
	}
	r.DrainS = time.Since(released).Seconds()
	r.LastArrivalS = lastArrival.Sub(released).Seconds()
	tally := tallyBudget(t, stalled, rest)
	r.Delivered, r.Duplicates, r.LateDelivered = tally.Delivered, tally.Duplicates, tally.LateDelivered
	end, err := sample.ReadMemory()
	if err != nil {
		t.Fatal(err)
	}
	r.PeakHWM = end.Peak
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	// The parent reads this line; fmt, not t.Log, so it is one plain line.
	fmt.Println(budgetResultTag + string(js))
}

// tallyBudget counts the distinct IDs over the stalled read's bucket and
// the read of the rest's, the emissions beyond one per ID, and the IDs only
// the read of the rest emitted.
func tallyBudget(t *testing.T, stalled, rest string) budgetResult {
	t.Helper()
	var r budgetResult
	seen := map[string]bool{}
	for _, bucket := range []string{stalled, rest} {
		ids, err := collect.ItemsOf[string](bucket)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if seen[id] {
				r.Duplicates++
			} else if bucket == rest {
				r.LateDelivered++
			}
			seen[id] = true
		}
	}
	r.Delivered = len(seen)
	return r
}
