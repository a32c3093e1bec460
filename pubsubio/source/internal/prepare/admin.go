package prepare

import (
	"context"
	"fmt"

	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/connection"
	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// Admin is the few subscription-admin calls the prepare step makes, and
// the delete of a read's own subscriptions once it is done. An interface
// so that the check, create and seek logic is tested against a fake that
// records every call. The only update is of the labels of a read's own
// topic subscription (owners.go): creation never changes an existing
// subscription.
type Admin interface {
	GetSubscription(ctx context.Context, name string) (*pubsubpb.Subscription, error)
	CreateSubscription(ctx context.Context, sub *pubsubpb.Subscription) (*pubsubpb.Subscription, error)
	UpdateLabels(ctx context.Context, name string, labels map[string]string) error
	Seek(ctx context.Context, req *pubsubpb.SeekRequest) error
	DeleteSubscription(ctx context.Context, name string) error
	Close() error
}

// clientAdmin is Admin through the Pub/Sub client, built like every other
// client of the read (connection.NewClient), so it reaches the same
// service as the same identity as the splits.
type clientAdmin struct {
	client *pubsub.Client
	conn   connection.Settings
}

// Dial connects to Pub/Sub as conn says. Every call names its resource in
// full, so project, the client's, only has to be a valid one.
func Dial(ctx context.Context, project string, conn connection.Settings) (Admin, error) {
	c, err := connection.NewClient(ctx, project, conn)
	if err != nil {
		return nil, fmt.Errorf("pubsubio.Read: connecting to prepare the subscriptions: %w", err)
	}
	return &clientAdmin{client: c, conn: conn}, nil
}

// Each call runs under Connection.RPCTimeout (connection.Settings.Call).

func (a *clientAdmin) GetSubscription(ctx context.Context, name string) (desc *pubsubpb.Subscription, err error) {
	err = a.conn.Call(ctx, "pubsubio.Read", "GetSubscription "+name, func(ctx context.Context) error {
		desc, err = a.client.SubscriptionAdminClient.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: name})
		return err
	})
	return desc, err
}

func (a *clientAdmin) CreateSubscription(ctx context.Context, sub *pubsubpb.Subscription) (created *pubsubpb.Subscription, err error) {
	err = a.conn.Call(ctx, "pubsubio.Read", "CreateSubscription "+sub.GetName(), func(ctx context.Context) error {
		created, err = a.client.SubscriptionAdminClient.CreateSubscription(ctx, sub)
		return err
	})
	return created, err
}

func (a *clientAdmin) UpdateLabels(ctx context.Context, name string, labels map[string]string) error {
	return a.conn.Call(ctx, "pubsubio.Read", "UpdateSubscription "+name, func(ctx context.Context) error {
		_, err := a.client.SubscriptionAdminClient.UpdateSubscription(ctx, &pubsubpb.UpdateSubscriptionRequest{
			Subscription: &pubsubpb.Subscription{Name: name, Labels: labels},
			UpdateMask:   &fieldmaskpb.FieldMask{Paths: []string{"labels"}},
		})
		return err
	})
}

func (a *clientAdmin) Seek(ctx context.Context, req *pubsubpb.SeekRequest) error {
	return a.conn.Call(ctx, "pubsubio.Read", "Seek "+req.GetSubscription(), func(ctx context.Context) error {
		_, err := a.client.SubscriptionAdminClient.Seek(ctx, req)
		return err
	})
}

func (a *clientAdmin) DeleteSubscription(ctx context.Context, name string) error {
	return a.conn.Call(ctx, "pubsubio.Read", "DeleteSubscription "+name, func(ctx context.Context) error {
		return a.client.SubscriptionAdminClient.DeleteSubscription(ctx, &pubsubpb.DeleteSubscriptionRequest{Subscription: name})
	})
}

func (a *clientAdmin) Close() error { return a.client.Close() }

// The errors of each call say what to do; PERMISSION_DENIED names the
// permission the worker's credentials lack, since the prepare step runs with
// the workers' identity, which is easy to mistake for the launcher's.

func describeGetError(sub model.Subscription, err error) error {
	if status.Code(err) == codes.PermissionDenied {
		return fmt.Errorf("permission denied describing %s: the workers' credentials need pubsub.subscriptions.get on it (roles/pubsub.viewer), "+
			"which the read uses to check it before reading: %w", sub, err)
	}
	return fmt.Errorf("describing %s before reading it: %w", sub, err)
}

func describeCreateError(sub model.Subscription, o SubscriptionCreateOptions, err error) error {
	switch status.Code(err) {
	case codes.PermissionDenied:
		return fmt.Errorf("permission denied creating %s: the workers' credentials need pubsub.subscriptions.create on project %s "+
			"and pubsub.topics.attachSubscription on %s (roles/pubsub.editor has both), or create the subscription beforehand: %w",
			sub, sub.Project, o.Topic, err)
	case codes.NotFound:
		return fmt.Errorf("creating %s: its topic %s (or its dead-letter topic) does not exist; the read never creates topics: create it first, or fix Setup's Create.Topic: %w",
			sub, o.Topic, err)
	}
	return fmt.Errorf("creating %s on %s: %w", sub, o.Topic, err)
}

func describeSeekError(sub model.Subscription, pos StartPosition, req *pubsubpb.SeekRequest, err error) error {
	snapshot := req.GetSnapshot()
	switch status.Code(err) {
	case codes.PermissionDenied:
		need := "pubsub.subscriptions.consume on it (roles/pubsub.subscriber)"
		if snapshot != "" {
			need += " and pubsub.snapshots.seek on " + snapshot
		}
		return fmt.Errorf("permission denied seeking %s to start position %s: the workers' credentials need %s: %w", sub, pos.describe(), need, err)
	case codes.NotFound:
		if snapshot != "" {
			return fmt.Errorf("seeking %s: snapshot %s does not exist (snapshots expire after 7 days at most): create it, or fix the start position: %w", sub, snapshot, err)
		}
	case codes.Unimplemented:
		return fmt.Errorf("seeking %s to start position %s: the server does not implement this seek "+
			"(the Pub/Sub emulator cannot seek an ordering-enabled subscription to a time); use the default position there: %w", sub, pos.describe(), err)
	case codes.FailedPrecondition, codes.InvalidArgument:
		if snapshot != "" {
			return fmt.Errorf("seeking %s to snapshot %s: Pub/Sub refused it; a snapshot can only seek subscriptions of the topic it was taken from: %w", sub, snapshot, err)
		}
	}
	return fmt.Errorf("seeking %s to start position %s: %w", sub, pos.describe(), err)
}
