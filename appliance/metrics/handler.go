package metrics

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ovfwd/ovfwd/appliance/status"
)

// NewRegistry is a registry of snap's metrics plus the Go runtime and
// process collectors. It is private to the endpoint (not the global
// DefaultRegisterer), so a reload that re-listens starts from a clean one.
func NewRegistry(snap func() status.Snapshot) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		NewCollector(snap),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// Handler serves snap as Prometheus metrics. A metric that cannot be
// collected (an invalid label value, /proc unreadable) is left out of the
// scrape rather than failing all of it.
func Handler(snap func() status.Snapshot) http.Handler {
	return handlerFor(NewRegistry(snap))
}

func handlerFor(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		ErrorLog:            slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
		Timeout:             10 * time.Second,
		MaxRequestsInFlight: 4,
	})
}
