package flinkjob

import (
	"bytes"
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

// statusError is an answer other than 200 OK or 202 Accepted.
type statusError struct {
	request string // method and path
	code    int
	detail  string // what Flink said, cut short
}

func (e *statusError) Error() string {
	if e.detail == "" {
		return fmt.Sprintf("%s: %d %s", e.request, e.code, http.StatusText(e.code))
	}
	return fmt.Sprintf("%s: %d %s: %s", e.request, e.code, http.StatusText(e.code), e.detail)
}

// maxDetail bounds what an error quotes of an answer.
const maxDetail = 300

// get decodes the JSON answer to GET path into v.
func (c *client) get(ctx context.Context, path string, v any) error {
	return c.do(ctx, http.MethodGet, path, nil, v)
}

// post sends in as JSON to path and decodes the answer into v.
func (c *client) post(ctx context.Context, path string, in, v any) error {
	return c.do(ctx, http.MethodPost, path, in, v)
}

// do makes one request, in as its JSON body unless nil, and decodes the
// JSON answer into v.
func (c *client) do(ctx context.Context, method, path string, in, v any) error {
	request := method + " " + path
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s: %w", request, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.addr+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", request, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s: reading the answer: %w", request, err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		var flinkErr struct {
			Errors []string `json:"errors"`
		}
		_ = json.Unmarshal(answer, &flinkErr)
		return &statusError{request: request, code: resp.StatusCode, detail: text.Truncate(strings.Join(flinkErr.Errors, "; "), maxDetail)}
	}
	if err := json.Unmarshal(answer, v); err != nil {
		return fmt.Errorf("%s: decoding the answer: %w", request, err)
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
