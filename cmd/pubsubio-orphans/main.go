// Command pubsubio-orphans finds the subscriptions pubsubio reads created
// for topics (ReadConfig.Topics) whose jobs are gone, and deletes them.
//
// A read of a topic creates a subscription of its own, labelled
// created-by=pubsubio, pubsubio-job=<--job_name> and
// pubsubio-name=<TopicSubscriptions.Name>. A read of a generated name
// deletes it once it is done (a bounded read once it finished, an
// unbounded one once a drain acked its last message), but a cancelled or
// crashed job leaves it, collecting every message of the topic until its
// TTL (a day by default; forever with NeverExpire). This command lists
// every such subscription of a project with the job it was made for, and
// judges it against the jobs still running (-running): the subscription
// of a job that is gone is an orphan when its name was generated, since no
// later job reads it; one of a Name the user gave is kept, because the next
// run with that Name reads on from it (-include-named deletes those too),
// and so is one read under TopicSubscriptions.Shared or made without a
// job name. With -delete it deletes the orphans.
//
//	go run ./cmd/pubsubio-orphans -project=my-project -running="$(gcloud dataflow jobs list --status=active --format='value(name)' | paste -sd,)"
//	go run ./cmd/pubsubio-orphans -project=my-project -running=nightly-ingest -delete
//	go run ./cmd/pubsubio-orphans -project=test-project -endpoint=localhost:8085 -running=
//
// It needs pubsub.subscriptions.list (roles/pubsub.viewer), and
// pubsub.subscriptions.delete (roles/pubsub.editor) to delete. Credentials
// are application-default credentials or -credentials, a service-account
// key file; -endpoint names an emulator, reached without credentials.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/source"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "pubsubio-orphans:", err)
		os.Exit(1)
	}
}

// run runs the command with args, writing its findings to out.
func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pubsubio-orphans", flag.ContinueOnError)
	project := fs.String("project", "", "the project whose subscriptions to look at (required)")
	running := fs.String("running", "", "comma-separated names (--job_name) of the jobs still running; required with -delete (empty: none runs)")
	del := fs.Bool("delete", false, "delete the orphans")
	includeNamed := fs.Bool("include-named", false, "count the subscriptions of a Name the user gave, and shared ones, as orphans too")
	endpoint := fs.String("endpoint", "", "host:port of a Pub/Sub emulator (plaintext, no credentials)")
	credentials := fs.String("credentials", "", "path of a service-account key file (default: application-default credentials)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *project == "" {
		return fmt.Errorf("-project is required")
	}
	if *del && !set["running"] {
		return fmt.Errorf("-delete needs -running, the jobs still running (-running= for none): without it every job would count as gone")
	}
	o := options{project: *project, delete: *del, includeNamed: *includeNamed}
	for _, j := range strings.Split(*running, ",") {
		if j = strings.TrimSpace(j); j != "" {
			o.running = append(o.running, source.JobLabel(j))
		}
	}
	conn := connection.Settings{EmulatorEndpoint: *endpoint, CredentialsFile: *credentials}
	if err := conn.Validate(); err != nil {
		return err
	}
	ctx := context.Background()
	client, err := connection.NewClient(ctx, *project, conn)
	if err != nil {
		return err
	}
	defer client.Close()
	_, err = findOrphans(ctx, client, o, out)
	return err
}
