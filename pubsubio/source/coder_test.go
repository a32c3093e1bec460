package source

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestSplitAndRestrictionCoders(t *testing.T) {
	for _, s := range []Split{{}, {Index: 7, Subscription: model.SubscriptionOf("my-project", "sub")}} {
		got, err := decodeSplit(encodeSplit(s))
		if err != nil || got != s {
			t.Errorf("split %+v: got %+v, %v", s, got, err)
		}
	}
	for _, r := range []Restriction{{}, {AckIDs: []string{}}, {Seq: 3, Owner: "o", AckIDs: []string{"a", "b"}, Emitted: -1, Final: true}} {
		got, err := decodeRestriction(encodeRestriction(r))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Errorf("restriction (-want +got):\n%s", diff)
		}
	}
	if _, err := decodeRestriction([]byte{9}); err == nil {
		t.Error("a wrong version went unnoticed")
	}
}
