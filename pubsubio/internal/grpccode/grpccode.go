// Package grpccode reads the gRPC status code of an error, and names codes
// the way Pub/Sub's documentation does.
package grpccode

import (
	"context"
	"errors"
	"strings"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Of returns the gRPC status code err carries, looking through wrapping,
// and reports whether it carries one. A context's deadline or cancellation
// counts as DEADLINE_EXCEEDED or CANCELLED.
func Of(err error) (codes.Code, bool) {
	if err == nil {
		return codes.OK, true
	}
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code(), true
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, true
	case errors.Is(err, context.Canceled):
		return codes.Canceled, true
	}
	return codes.Unknown, false
}

// Name returns the canonical name of c as Pub/Sub's documentation and
// error messages spell it: "INVALID_ARGUMENT", "NOT_FOUND".
func Name(c codes.Code) string {
	if c == codes.Canceled {
		return "CANCELLED" // the canonical spelling; Go's name drops an L
	}
	name := c.String() // "InvalidArgument", or "Code(17)" for an unknown one
	var b strings.Builder
	prev := rune(0)
	for _, r := range name {
		if unicode.IsUpper(r) && unicode.IsLower(prev) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
		prev = r
	}
	return b.String()
}
