// Package sample measures a long-running test process: its resident memory
// and goroutine count read from the kernel and the Go runtime, the live
// metrics of the Prism job it runs, and summaries of the series collected
// (minimum, median, maximum, least-squares trend).
//
// Pipelines in the integration tests run on Prism in-process (loopback), so
// the connector's subscribers, buffers and publishers live in the test
// process: its RSS and goroutines are the connector's, plus a constant
// share for the test's own clients and the runner.
package sample
