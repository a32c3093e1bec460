package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/grpc"
)

// satServeFlag makes this binary the saturation server: the bench starts
// itself with it, so the server's CPU is a process of its own, measured
// apart from the contenders' as the emulator's is.
var satServeFlag = flag.Bool("sat_serve", false, "internal: serve the saturation cases' Pub/Sub on 127.0.0.1 until stdin closes")

// serveSaturation is the child's main: it prints "grpc=ADDR http=ADDR" and
// serves the Pub/Sub services on the first and satStats on the second
// (GET /stats?subscription=NAME) until its stdin closes, which it does when
// the bench ends however it ends.
func serveSaturation() int {
	shape, err := shapeFromFlags()
	if err != nil {
		return fail(err)
	}
	srv := newSatServer(shape)
	grpcLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	httpLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	g := grpc.NewServer(grpc.MaxRecvMsgSize(64<<20), grpc.UnaryInterceptor(shape.delayUnary))
	pubsubpb.RegisterPublisherServer(g, srv)
	pubsubpb.RegisterSubscriberServer(g, srv)
	go g.Serve(grpcLis)
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := srv.statsOf(r.URL.Query().Get("subscription"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(st)
	})
	go http.Serve(httpLis, mux)
	fmt.Printf("grpc=%s http=%s\n", grpcLis.Addr(), httpLis.Addr())
	io.Copy(io.Discard, os.Stdin)
	return 0
}

// satProcess is the running saturation server, seen from the bench.
type satProcess struct {
	endpoint, stats string
	cmd             *exec.Cmd
	stdin           io.Closer
}

// startSaturationServer starts this binary with --sat_serve in a process
// group of its own and waits for its addresses.
func startSaturationServer() (*satProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this binary to start the saturation server: %w", err)
	}
	cmd := exec.Command(self, append([]string{"--sat_serve"}, shapeArgs()...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the saturation server: %w", err)
	}
	p := &satProcess{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("the saturation server did not print its addresses: %w", err)
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(line), "grpc=%s http=%s", &p.endpoint, &p.stats); err != nil {
		p.stop()
		return nil, fmt.Errorf("the saturation server printed %q: %w", line, err)
	}
	return p, nil
}

func (p *satProcess) pid() int { return p.cmd.Process.Pid }

func (p *satProcess) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// statsOf asks the server what sub saw.
func (p *satProcess) statsOf(ctx context.Context, sub string) (satStats, error) {
	var st satStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.stats+"/stats?subscription="+url.QueryEscape(sub), nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("asking the saturation server about %s: %w", sub, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return st, fmt.Errorf("asking the saturation server about %s: %s", sub, b)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}
