package flink

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The PROCESS environment: each TaskManager starts its SDK workers with the
// Go SDK container's boot program.

// ProcessRunnerArgs are the flags that submit a Beam Go pipeline to this
// Flink with SDK workers started by each TaskManager (see
// ProcessEnvironment), and pubsubio's commit flags for it.
func (f *Flink) ProcessRunnerArgs(boot, worker string) ([]string, error) {
	env, err := f.ProcessEnvironmentArgs(boot, worker)
	if err != nil {
		return nil, err
	}
	return append(append([]string{"--runner=flink", "--endpoint=" + f.Endpoint}, env...), f.commitArgs()...), nil
}

// ProcessEnvironmentArgs are the flags of SDK workers started by each
// TaskManager (see ProcessEnvironment).
func (f *Flink) ProcessEnvironmentArgs(boot, worker string) ([]string, error) {
	config, err := f.ProcessEnvironment(boot, worker)
	if err != nil {
		return nil, err
	}
	return []string{"--environment_type=PROCESS", "--environment_config=" + config, "--worker_binary=" + worker}, nil
}

// ProcessEnvironment returns the --environment_config of
// --environment_type=PROCESS for this Flink: each TaskManager starts its
// SDK workers with boot, the Go SDK container's boot program
// (github.com/apache/beam/sdks/v2/go/container, built), which fetches
// worker (the pipeline's binary, staged by the submitter from
// --worker_binary) from the job server's artifact service and runs it.
// Unlike LOOPBACK this works with a job's tasks on several TaskManagers
// (Options.SpreadTasks). Each SDK worker gets its own directory for the
// staged files (bootWrapper); Stop removes boot's copies of worker.
func (f *Flink) ProcessEnvironment(boot, worker string) (string, error) {
	wrapper, err := f.bootWrapper(boot)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.workers = append(f.workers, worker)
	f.mu.Unlock()
	return `{"command":` + strconv.Quote(wrapper) + `}`, nil
}

// bootWrapper writes a script that runs boot with a semi-persistent
// directory of its own under f.Dir. Boot fetches the staged worker binary
// into SEMI_PERSIST_DIR/staged, truncating the file in place; with the
// default /tmp, two workers starting together on one machine (two
// TaskManagers, or two jobs) overwrite the binary the other is copying,
// and the worker dies with exit code 1.
func (f *Flink) bootWrapper(boot string) (string, error) {
	script := fmt.Sprintf("#!/bin/sh\ndir=$(mktemp -d %s) || exit 1\nexec %s \"$@\" --semi_persist_dir=\"$dir\"\n",
		shellQuote(filepath.Join(f.Dir, "sdk-worker-XXXXXX")), shellQuote(boot))
	w, err := os.CreateTemp(f.Dir, "boot-*.sh")
	if err != nil {
		return "", fmt.Errorf("flink: writing the boot wrapper: %w", err)
	}
	_, err = w.WriteString(script)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(w.Name(), 0o755)
	}
	if err != nil {
		return "", fmt.Errorf("flink: writing the boot wrapper %s: %w", w.Name(), err)
	}
	return w.Name(), nil
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
