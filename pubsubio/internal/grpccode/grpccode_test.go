package grpccode

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestName(t *testing.T) {
	for c, want := range map[codes.Code]string{
		codes.OK:                "OK",
		codes.InvalidArgument:   "INVALID_ARGUMENT",
		codes.NotFound:          "NOT_FOUND",
		codes.DeadlineExceeded:  "DEADLINE_EXCEEDED",
		codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
		codes.Canceled:          "CANCELLED",
		codes.Unavailable:       "UNAVAILABLE",
		codes.PermissionDenied:  "PERMISSION_DENIED",
	} {
		if got := Name(c); got != want {
			t.Errorf("Name(%v) = %q, want %q", c, got, want)
		}
	}
}

func TestOfLooksThroughWrapping(t *testing.T) {
	err := fmt.Errorf("publishing: %w", status.Error(codes.InvalidArgument, "bad attribute"))
	if c, ok := Of(err); !ok || c != codes.InvalidArgument {
		t.Errorf("Of(wrapped INVALID_ARGUMENT) = %v, %v", c, ok)
	}
	if c, ok := Of(fmt.Errorf("x: %w", context.DeadlineExceeded)); !ok || c != codes.DeadlineExceeded {
		t.Errorf("Of(deadline) = %v, %v", c, ok)
	}
	if _, ok := Of(fmt.Errorf("plain")); ok {
		t.Errorf("Of(plain error) reported a status")
	}
}
