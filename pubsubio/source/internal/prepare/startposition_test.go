package prepare

import (
	"testing"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// seekToTime and seekToSnapshot are the Seek requests the tests expect.
func seekToTime(sub model.Subscription, at time.Time) *pubsubpb.SeekRequest {
	return &pubsubpb.SeekRequest{Subscription: sub.String(), Target: &pubsubpb.SeekRequest_Time{Time: timestamppb.New(at)}}
}

func seekToSnapshot(sub model.Subscription, name string) *pubsubpb.SeekRequest {
	return &pubsubpb.SeekRequest{Subscription: sub.String(), Target: &pubsubpb.SeekRequest_Snapshot{Snapshot: name}}
}

// Each start position becomes its Seek: earliest retained reaches back
// Pub/Sub's longest retention, latest is the worker's now, a snapshot ID is
// in the subscription's project.
func TestStartPositionSeekRequests(t *testing.T) {
	now := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	at := now.Add(-3 * time.Hour)
	cases := []struct {
		pos  StartPosition
		want *pubsubpb.SeekRequest
	}{
		{StartPosition{Kind: PositionEarliestRetained}, seekToTime(setupSub, now.Add(-31*24*time.Hour))},
		{StartPosition{Kind: PositionLatest}, seekToTime(setupSub, now)},
		{StartPosition{Kind: PositionTimestamp, Time: at}, seekToTime(setupSub, at)},
		{StartPosition{Kind: PositionSnapshot, Snapshot: "snap-1"}, seekToSnapshot(setupSub, "projects/pubsubio-test/snapshots/snap-1")},
		{StartPosition{Kind: PositionSnapshot, Snapshot: "projects/other-project/snapshots/snap-2"}, seekToSnapshot(setupSub, "projects/other-project/snapshots/snap-2")},
	}
	for _, c := range cases {
		got := c.pos.seekRequest(setupSub, now)
		if !proto.Equal(got, c.want) {
			t.Errorf("%s: seek request\n got %v\nwant %v", c.pos.describe(), got, c.want)
		}
		if !c.pos.seeks() {
			t.Errorf("%s: seeks() is false", c.pos.describe())
		}
	}
	if (StartPosition{}).withDefault().seeks() {
		t.Error("the default position seeks")
	}
}
