package flink

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// PrometheusConf is the flink-conf.yaml (Options.Conf) that runs Flink's
// Prometheus reporter on port: the JobManager's and TaskManagers' metrics,
// the SDK's among them, at http://HOST:port/metrics. The reporter's jar is
// on this package's classpath (pom.xml); a Flink distribution has it in
// opt/, to copy into plugins/.
func PrometheusConf(port int) map[string]string {
	return map[string]string{
		"metrics.reporter.prom.factory.class": "org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
		"metrics.reporter.prom.port":          strconv.Itoa(port),
	}
}

// ScrapePrometheus sums, for each of names, the samples that the
// Prometheus reporter at addr (host:port) serves under a metric name
// ending in "_"+name, over every label set; a name no sample has is
// missing from the answer. The reporter names an operator's metric
// flink_taskmanager_job_task_operator_<name>, with the job, task and
// operator as labels.
func ScrapePrometheus(ctx context.Context, addr string, names ...string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("flink prometheus GET %s/metrics: %w", addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("flink prometheus GET %s/metrics: %s", addr, resp.Status)
	}
	sums := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		metric, _, _ := strings.Cut(line, "{")
		metric, _, _ = strings.Cut(metric, " ")
		for _, name := range names {
			if !strings.HasSuffix(metric, "_"+name) {
				continue
			}
			// The value follows the labels, whose values may hold spaces.
			rest := line[len(metric):]
			if i := strings.LastIndexByte(line, '}'); i >= 0 {
				rest = line[i+1:]
			}
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return nil, fmt.Errorf("flink prometheus %s: sample %q has no value", addr, line)
			}
			v, err := strconv.ParseFloat(fields[0], 64)
			if err != nil {
				return nil, fmt.Errorf("flink prometheus %s: sample %q: %w", addr, line, err)
			}
			sums[name] += v
		}
	}
	return sums, sc.Err()
}
