package flinkjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/pubsubio/beam-pubsubio/pubsubio/internal/text"
)

// client asks one JobManager's REST API.
type client struct {
	addr string // host:port
	http *http.Client
}

// statusError is an answer other than 200 OK.
type statusError struct {
	path   string
	code   int
	detail string // what Flink said, cut short
}

func (e *statusError) Error() string {
	if e.detail == "" {
		return fmt.Sprintf("GET %s: %d %s", e.path, e.code, http.StatusText(e.code))
	}
	return fmt.Sprintf("GET %s: %d %s: %s", e.path, e.code, http.StatusText(e.code), e.detail)
}

// maxDetail bounds what an error quotes of an answer.
const maxDetail = 300

// get decodes the JSON answer to GET path into v.
func (c *client) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addr+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("GET %s: reading the answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var flinkErr struct {
			Errors []string `json:"errors"`
		}
		_ = json.Unmarshal(body, &flinkErr)
		return &statusError{path: path, code: resp.StatusCode, detail: text.Truncate(strings.Join(flinkErr.Errors, "; "), maxDetail)}
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: decoding the answer: %w", path, err)
	}
	return nil
}

// isNotFound reports whether err is a 404 answer.
func isNotFound(err error) bool {
	var se *statusError
	return errors.As(err, &se) && se.code == http.StatusNotFound
}

// count adds a failed request to the counter of its kind: an answer of
// 5xx, no answer in time, or no connection (refused, reset, closed early).
func count(err error) {
	var se *statusError
	var ne net.Error
	var op *net.OpError
	switch {
	case errors.As(err, &se):
		if se.code >= 500 {
			restUnavailable.Add(1)
		}
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		restTimeouts.Add(1)
	case errors.As(err, &op) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		restUnreachable.Add(1)
	}
}
