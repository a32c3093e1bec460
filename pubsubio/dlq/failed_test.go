package dlq

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/pubsubio/beam-pubsubio/pubsubio/model"
)

func TestCodeName(t *testing.T) {
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
		if got := CodeName(c); got != want {
			t.Errorf("CodeName(%v) = %q, want %q", c, got, want)
		}
	}
}

func TestCodeOfLooksThroughWrapping(t *testing.T) {
	err := fmt.Errorf("publishing: %w", status.Error(codes.InvalidArgument, "bad attribute"))
	if c, ok := CodeOf(err); !ok || c != codes.InvalidArgument {
		t.Errorf("CodeOf(wrapped INVALID_ARGUMENT) = %v, %v", c, ok)
	}
	if c, ok := CodeOf(fmt.Errorf("x: %w", context.DeadlineExceeded)); !ok || c != codes.DeadlineExceeded {
		t.Errorf("CodeOf(deadline) = %v, %v", c, ok)
	}
	if _, ok := CodeOf(fmt.Errorf("plain")); ok {
		t.Errorf("CodeOf(plain error) reported a status")
	}
}

func TestNewBoundsTheError(t *testing.T) {
	long := strings.Repeat("é", 2*MaxErrorBytes)
	at := time.Unix(1700000000, 0)
	f := New(StagePublish, model.Message{Data: []byte("x")}, status.Error(codes.InvalidArgument, long), 1, at)
	if len(f.Error) > MaxErrorBytes || !utf8.ValidString(f.Error) || !strings.HasSuffix(f.Error, "...") {
		t.Errorf("Error is %d bytes (valid UTF-8 %v), want at most %d ending in ...", len(f.Error), utf8.ValidString(f.Error), MaxErrorBytes)
	}
	if f.Code != "INVALID_ARGUMENT" || f.Stage != StagePublish || f.Attempts != 1 || !f.Time.Equal(at) {
		t.Errorf("New = %+v", f)
	}
}
