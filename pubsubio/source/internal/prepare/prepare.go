// Package prepare is the read's prepare step: once per job, before any
// split reads, it describes every subscription, rejects those the read
// cannot consume (checks.go), creates missing ones that have create
// options (createoptions.go), marks the read's own topic subscriptions
// (owners.go) and seeks those with a start position (startposition.go).
// It also holds those options' validation, which construction runs, the
// subscriptions a read creates for its topics (topics.go) and their
// deletion once the read is done (cleanup.go).
package prepare

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/metrics"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Counts are what one prepare run did, reported as metrics (Report)
// whether or not the run succeeded.
type Counts struct {
	created  int // subscriptions created
	seeks    int // seeks performed
	rejected int // subscriptions refused by a check, or missing without create options
	warned   int // backwards start positions that can recover only unacked messages
}

// The prepare step's counters. It runs once per job in a DoFn, so it
// counts straight into Beam metrics with its context.
var (
	subscriptionsCreatedCounter = beam.NewCounter(metrics.Namespace, "subscriptions_created")
	seeksPerformedCounter       = beam.NewCounter(metrics.Namespace, "seeks_performed")
	checksRejectedCounter       = beam.NewCounter(metrics.Namespace, "checks_rejected")
	checksWarnedCounter         = beam.NewCounter(metrics.Namespace, "checks_warned")
)

// Report adds what one prepare run did to the job's metrics.
func (c Counts) Report(ctx context.Context) {
	for _, m := range []struct {
		counter beam.Counter
		n       int
	}{
		{subscriptionsCreatedCounter, c.created},
		{seeksPerformedCounter, c.seeks},
		{checksRejectedCounter, c.rejected},
		{checksWarnedCounter, c.warned},
	} {
		if m.n > 0 {
			m.counter.Inc(ctx, int64(m.n))
		}
	}
}

// Job is what the prepare step readies: a read's subscriptions with their
// setup, the subscriptions it creates for its topics, and what the read
// needs of them. It is built on the worker from the read's plan.
type Job struct {
	// Subscriptions are every subscription the read consumes, those of its
	// topics included (WithTopics).
	Subscriptions []model.Subscription
	// Setup is the setup of those that have one, defaults set
	// (SetupWithDefaults).
	Setup []SubscriptionSetup
	// Owned are the subscriptions the read creates for its topics.
	Owned Owned
	// Risks are how the read may spend delivery attempts (attempts.go).
	Risks AttemptRisks
	// Needs are the read's settings every subscription must suit.
	Needs Requirements
}

// target is one configured subscription as the prepare step sees it.
type target struct {
	sub   model.Subscription
	setup SubscriptionSetup
	desc  *pubsubpb.Subscription // nil while missing
}

// Run readies p's subscriptions for reading, in phases, so that no
// action is taken on the strength of a check that has not run yet:
//
//  1. Describe every subscription and check each one. Any rejection, or a
//     missing subscription without create options, fails here, before
//     anything is created or sought: a rejection never leaves another
//     subscription already rewound.
//  2. Create the missing subscriptions that have create options.
//     ALREADY_EXISTS (another job got there first) is success; that
//     subscription's own settings apply, so it is described and checked.
//     Mark the read's own topic subscriptions that existed with its labels
//     (owners.go).
//  3. Warn about backwards start positions that can recover only unacked
//     messages, and dead-letter policies that leave the read little room
//     (attempts.go).
//  4. Seek every subscription with a non-default start position. now is
//     read at each seek, which is when PositionLatest resolves.
func Run(ctx context.Context, adm Admin, p Job, now func() time.Time) (Counts, error) {
	var counts Counts
	targets, err := describeAll(ctx, adm, p, &counts)
	if err != nil {
		return counts, fmt.Errorf("pubsubio.Read: preparing the read's subscriptions failed; nothing was created or sought:\n%w", err)
	}
	for i := range targets {
		if targets[i].desc == nil {
			if err := create(ctx, adm, p, &targets[i], &counts); err != nil {
				return counts, fmt.Errorf("pubsubio.Read: %w\n(nothing was sought; subscriptions already created stay, and a new run finds them)", err)
			}
		}
		if err := markOwned(ctx, adm, p, targets[i]); err != nil {
			return counts, fmt.Errorf("pubsubio.Read: %w\n(nothing was sought)", err)
		}
	}
	for _, t := range targets {
		for _, w := range []string{retentionWarning(t.sub.String(), t.setup.Start, t.desc), p.Risks.warning(t.sub.String(), t.desc)} {
			if w != "" {
				counts.warned++
				log.Warn(ctx, w)
			}
		}
	}
	for _, t := range targets {
		if !t.setup.Start.seeks() {
			continue
		}
		req := t.setup.Start.seekRequest(t.sub, now())
		if err := adm.Seek(ctx, req); err != nil {
			return counts, fmt.Errorf("pubsubio.Read: %w", describeSeekError(t.sub, t.setup.Start, req, err))
		}
		counts.seeks++
		log.Infof(ctx, "pubsubio.Read: sought %s to start position %s (Pub/Sub applies a seek asynchronously: deliveries in flight can take up to a minute to reflect it)",
			t.sub, t.setup.Start.describe())
	}
	return counts, nil
}

// describeAll describes and checks every subscription, and returns every
// problem at once so that one run names them all.
func describeAll(ctx context.Context, adm Admin, p Job, counts *Counts) ([]target, error) {
	targets := make([]target, len(p.Subscriptions))
	var errs []error
	for i, sub := range p.Subscriptions {
		t := target{sub: sub, setup: SetupFor(p.Setup, sub)}
		desc, err := adm.GetSubscription(ctx, sub.String())
		switch {
		case err == nil:
			t.desc = desc
			rejected := rejection(p.Needs, p.Owned, sub.String(), desc)
			counts.rejected += len(rejected)
			errs = append(errs, rejected...)
			if len(rejected) == 0 && slices.Contains(p.Owned.Subscriptions, sub) && !p.Owned.CreatedBy(desc) {
				log.Infof(ctx, "pubsubio.Read: %s, the subscription of TopicSubscriptions.Name %q for its topic, already exists and this read did not create it "+
					"(its labels %v): the read consumes it from where it is, and never deletes it", sub, p.Owned.Name, desc.GetLabels())
			}
		case status.Code(err) == codes.NotFound && !t.setup.Create.IsZero():
			// Created in the next phase.
		case status.Code(err) == codes.NotFound:
			counts.rejected++
			errs = append(errs, fmt.Errorf("subscription %s does not exist, and the read has no create options for it: "+
				"create it, fix Subscriptions, or add a Setup entry for it whose Create (SubscriptionCreateOptions, with Create.Topic) authorises the read to create it: %w", sub, err))
		default:
			errs = append(errs, describeGetError(sub, err))
		}
		targets[i] = t
	}
	return targets, errors.Join(errs...)
}

// create creates t's subscription from its create options.
func create(ctx context.Context, adm Admin, p Job, t *target, counts *Counts) error {
	o := t.setup.Create
	created, err := adm.CreateSubscription(ctx, o.subscriptionProto(t.sub))
	switch {
	case err == nil:
		counts.created++
		t.desc = created
		log.Infof(ctx, "pubsubio.Read: created subscription %s on %s", t.sub, o.Topic)
		return nil
	case status.Code(err) != codes.AlreadyExists:
		return describeCreateError(t.sub, o, err)
	}
	// Created by someone else since it was described. Creation is not an
	// update: it keeps its own settings, which were never checked.
	desc, err := adm.GetSubscription(ctx, t.sub.String())
	if err != nil {
		return describeGetError(t.sub, err)
	}
	if rejected := rejection(p.Needs, p.Owned, t.sub.String(), desc); len(rejected) > 0 {
		counts.rejected += len(rejected)
		return fmt.Errorf("%s was created by someone else while this job was preparing it, with its own settings: %w", t.sub, errors.Join(rejected...))
	}
	t.desc = desc
	log.Infof(ctx, "pubsubio.Read: subscription %s already exists (created concurrently); it keeps its own settings", t.sub)
	return nil
}

// rejection returns why sub, as described, cannot be read by a read that
// needs r, or nil; name is how the error names it. Besides checks, one of the read's
// own topic subscriptions must be on its topic (wrongTopic) and not
// created for another job (ownerRejection), which construction cannot
// know and so does not check.
func rejection(r Requirements, owned Owned, name string, sub *pubsubpb.Subscription) []error {
	var errs []error
	for _, c := range checks {
		if c.rejects(r, sub) {
			errs = append(errs, fmt.Errorf("subscription %s cannot be read: %s; %s", name, c.describe(r), c.why))
		}
	}
	for _, err := range []error{owned.wrongTopic(name, sub), owned.ownerRejection(name, sub)} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// markOwned marks t, a subscription of the read p that existed, with this
// read's labels where that matters (claimedLabels).
func markOwned(ctx context.Context, adm Admin, p Job, t target) error {
	labels, changed := p.Owned.claimedLabels(t.desc, SetupFor(p.Setup, t.sub).Create.Labels[LabelJob])
	if !changed {
		return nil
	}
	err := adm.UpdateLabels(ctx, t.sub.String(), labels)
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.PermissionDenied:
		return fmt.Errorf("permission denied labelling %s as this read's: the workers' credentials need pubsub.subscriptions.update on it (roles/pubsub.editor), "+
			"so that the read that created it does not delete it from under this one: %w", t.sub, err)
	case codes.InvalidArgument, codes.Unimplemented:
		return fmt.Errorf("labelling %s as this read's: the server cannot update a subscription's labels (the Pub/Sub emulator cannot), "+
			"so the read that created it could delete it from under this one; give this read another TopicSubscriptions.Name: %w", t.sub, err)
	}
	return fmt.Errorf("labelling %s as this read's: %w", t.sub, err)
}
