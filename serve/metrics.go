package serve

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spl-dev/spl/sdk"
)

// metrics are the server's Prometheus metrics. Names are part of the
// operator contract (docs/http-api.yaml lists them).
type metrics struct {
	requests     *prometheus.CounterVec   // route, code
	reqSeconds   *prometheus.HistogramVec // route
	appends      *prometheus.CounterVec   // result
	appendSecs   prometheus.Histogram
	refused      *prometheus.CounterVec // reason
	evicted      prometheus.Counter
	retained     prometheus.Counter
	corrupt      *prometheus.CounterVec // where
	tails        prometheus.Gauge
	batchRecords prometheus.Histogram
	batchSeconds prometheus.Histogram
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spl_http_requests_total", Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		reqSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "spl_http_request_duration_seconds", Help: "HTTP request latency by route pattern (SSE tails excluded).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"route"}),
		appends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spl_appends_total", Help: "Appends through the HTTP API by result: ok, invalid, conflict, unavailable, error.",
		}, []string{"result"}),
		appendSecs: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "spl_append_duration_seconds", Help: "Time from an HTTP append's arrival at the log to its durable ack (group commit and fsync included).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spl_http_refused_total", Help: "HTTP requests refused before reaching the log, by reason: bad_json, too_large, invalid, bad_param, stopping, not_ready, unauthorized, forbidden, csrf, login_failed, login_limited, conn_limit.",
		}, []string{"reason"}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spl_http_conns_evicted_total", Help: "HTTP connections closed before their request was read (or while idle) to make room for new ones (limits.go).",
		}),
		retained: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "spl_retention_erased_total", Help: "Checkpoints the retention schedule (--retention-every) erased.",
		}),
		corrupt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spl_corrupt_records_total", Help: "Stored messages that failed verification when read, by where they were met: query, tail, checkpoint.",
		}, []string{"where"}),
		tails: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spl_sse_tails", Help: "Server-Sent Events tails open now.",
		}),
		// Fed by observeBatch through the log's Observe hook.
		batchRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "spl_log_batch_records", Help: "Records per group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "spl_log_batch_commit_seconds", Help: "Latency of one group commit: send to durable ack (one fsync).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
	}
	reg.MustRegister(m.requests, m.reqSeconds, m.appends, m.appendSecs, m.refused, m.evicted, m.retained, m.corrupt, m.tails,
		m.batchRecords, m.batchSeconds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&logCollector{s: s})
	return m
}

// observeBatch records one group commit; it is the log's Observe hook.
func (m *metrics) observeBatch(st sdk.BatchStats) {
	if st.Err != nil {
		return
	}
	m.batchRecords.Observe(float64(st.Records))
	m.batchSeconds.Observe(st.Commit.Seconds())
}

var (
	descReady = prometheus.NewDesc("spl_log_ready", "1 when the log is open and appends are accepted.", nil, nil)
	descMsgs  = prometheus.NewDesc("spl_log_records", "Messages in the log's stream.", nil, nil)
	descBytes = prometheus.NewDesc("spl_log_bytes", "Bytes in the log's stream.", nil, nil)
	descClock = prometheus.NewDesc("spl_log_last_clock", "Clock (stream sequence) of the newest record.", nil, nil)
	descLag   = prometheus.NewDesc("spl_projection_lag_records", "Clocks between the newest record and a projection's position.", []string{"projection"}, nil)
)

// logCollector reads the stream's state at scrape time.
type logCollector struct{ s *Server }

// Describe implements prometheus.Collector.
func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReady, descMsgs, descBytes, descClock, descLag} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	l := c.s.Client()
	if l == nil || c.s.stopping.Load() {
		ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descReady, prometheus.GaugeValue, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := l.Stats(ctx)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descMsgs, prometheus.GaugeValue, float64(st.Records))
	ch <- prometheus.MustNewConstMetric(descBytes, prometheus.GaugeValue, float64(st.Bytes))
	ch <- prometheus.MustNewConstMetric(descClock, prometheus.GaugeValue, float64(st.LastClock))
	c.s.projMu.Lock()
	ps := c.s.projectors
	c.s.projMu.Unlock()
	for _, p := range ps {
		lag := float64(0)
		if pos := p.Position(); pos < st.LastClock {
			lag = float64(st.LastClock - pos)
		}
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, lag, p.Name())
	}
}
