// Package emulator gives every integration test binary a real Google Cloud
// Pub/Sub emulator, so connector tests exercise the actual wire protocol
// (streaming pull, ack deadlines, redelivery) instead of an in-process fake.
//
// Use it from TestMain and call Require in each test that needs Pub/Sub:
//
//	func TestMain(m *testing.M) { emulator.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		e := emulator.Require(t)
//		topic := e.CreateTopic(t, "orders")
//		sub := e.CreateSubscription(t, topic, "orders", 10*time.Second)
//		e.Publish(t, topic, 100, 1024, nil)
//		...
//	}
//
// An emulator is obtained, in order of preference, from:
//
//  1. PUBSUB_IT_EMULATOR=host:port — an emulator somebody already runs
//     (e.g. scripts/emulator start 8085). It is used as is and never stopped.
//  2. The gcloud emulator binary (cloud-pubsub-emulator, a Java program):
//     PUBSUB_EMULATOR_BIN, else $PATH, else the Cloud SDK next to gcloud or
//     under /usr/lib/google-cloud-sdk. One process per test binary on a free
//     loopback port, in its own process group, output captured in a temp
//     file; it is killed by that group id when the binary's tests finish.
//  3. Docker via testcontainers-go, only when no binary is found and a
//     Docker engine answers: the image pubsubio/pubsub-emulator:local (or
//     PUBSUB_IT_IMAGE), built on the machine by scripts/emulator-image.sh
//     from the installed emulator and JDK; nothing is pulled. Ryuk is
//     disabled (it is an image to pull); Stop removes the container.
//
// When none is available, Require skips the test with a message naming these
// three options (or fails it when PUBSUB_IT_REQUIRE=1, for CI).
//
// Fake is the exception: an in-process pstest server per test, for tests
// that need per-message ack counts or fault injection the emulator lacks.
//
// PUBSUB_EMULATOR_HOST is deliberately ignored: the connector under test does
// not honour it and tests set it to dead addresses to prove that. Clients made
// by this package are bound to the emulator through an explicit gRPC
// connection instead.
package emulator
