package source

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

// A stream that fails for good says which subscription and what to do, and
// keeps the status for errors.Is/status.Code.
func TestDescribeReceiveError(t *testing.T) {
	sub := model.SubscriptionOf("my-project", "orders")
	for _, tc := range []struct {
		code codes.Code
		want []string
	}{
		{codes.NotFound, []string{sub.String(), "does not exist", "create it"}},
		{codes.PermissionDenied, []string{sub.String(), "pubsub.subscriptions.consume", "roles/pubsub.subscriber"}},
		{codes.Unavailable, []string{sub.String(), "failed"}},
	} {
		cause := status.Error(tc.code, "from the server")
		err := describeReceiveError(sub, cause)
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: %q does not contain %q", tc.code, err, w)
			}
		}
		if !errors.Is(err, cause) || status.Code(errors.Unwrap(err)) != tc.code {
			t.Errorf("%v: the status is not wrapped: %v", tc.code, err)
		}
	}
}
