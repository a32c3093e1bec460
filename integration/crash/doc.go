// Package crash is the machinery of the integration suite's crash tests:
// it builds integration/crashpipeline (Read -> tag -> Write) and runs it
// as a child process that a test can SIGKILL at any point, creates the
// Pub/Sub resources and backlog of one test on the emulator, and watches
// the output topic, so a test can say, under deadlines, which input IDs
// arrived and how often. DeliveryCounter, a proxy in front of the
// emulator, tells a test when a process has received its whole backlog.
//
// It also holds the test side of what crashpipeline and the tests must
// agree on: the attribute carrying the input ID and the lines the pipeline
// prints.
//
// Environment variables (EnvMessages, EnvKills, EnvSeed, EnvWorkerKills)
// scale and replay the tests.
package crash
