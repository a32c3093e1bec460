package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/source"
)

// verdict is what the command makes of one subscription a read created.
type verdict string

const (
	running    verdict = "running"           // its job is one of those still running
	orphan     verdict = "orphan"            // its job is gone and its name was generated: nobody reads it again
	keptNamed  verdict = "kept: named"       // its job is gone, but a run with the same Name reads on from it
	keptShared verdict = "kept: shared"      // read by several jobs under Shared; the label names only the last
	keptNoJob  verdict = "kept: no job name" // created without --job_name: which job it is for is unknown
	deleted    verdict = "deleted"
)

// found is one subscription a pubsubio read created for a topic.
type found struct {
	name, job, readName string
	verdict             verdict
}

// options are what the command looks for and what it may delete.
type options struct {
	project      string
	running      []string // the jobs still running, as their labels (source.JobLabel)
	delete       bool
	includeNamed bool // delete the orphans of a Name the user gave too
}

// findOrphans lists project's subscriptions created by pubsubio
// (created-by=pubsubio), judges each against the jobs still running and,
// with o.delete, deletes the orphans, writing one line per subscription to
// out. It returns what it found.
func findOrphans(ctx context.Context, client *pubsub.Client, o options, out io.Writer) ([]found, error) {
	var all []found
	it := client.SubscriptionAdminClient.ListSubscriptions(ctx, &pubsubpb.ListSubscriptionsRequest{Project: "projects/" + o.project})
	for {
		sub, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return all, fmt.Errorf("listing the subscriptions of project %s: %w", o.project, err)
		}
		labels := sub.GetLabels()
		if labels[source.LabelCreatedBy] != source.LabelCreatedByValue {
			continue
		}
		f := found{name: sub.GetName(), job: labels[source.LabelJob], readName: labels[source.LabelName]}
		f.verdict = judge(f, labels[source.LabelShared] == "true", o)
		if f.verdict == orphan && o.delete {
			err := client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: f.name})
			if err != nil && status.Code(err) != codes.NotFound {
				return all, fmt.Errorf("deleting %s: %w", f.name, err)
			}
			f.verdict = deleted
		}
		all = append(all, f)
	}
	slices.SortFunc(all, func(a, b found) int { return strings.Compare(a.name, b.name) })
	for _, f := range all {
		job := f.job
		if job == "" {
			job = "-"
		}
		fmt.Fprintf(out, "%s\tjob=%s\tname=%s\t%s\n", f.name, job, f.readName, f.verdict)
	}
	return all, nil
}

// judge says what becomes of f: only the subscription of a job that is
// gone, whose name was generated (or any, with includeNamed), is an
// orphan.
func judge(f found, shared bool, o options) verdict {
	switch {
	case f.job == "":
		return keptNoJob
	case slices.Contains(o.running, f.job):
		return running
	case shared && !o.includeNamed:
		return keptShared
	case !source.IsGeneratedName(f.readName) && !o.includeNamed:
		return keptNamed
	}
	return orphan
}
