// Package metrics serves an appliance's counters as Prometheus metrics with
// client_golang. A Collector turns one status.Snapshot — the same one
// `ovfwd status` shows — into const metrics at scrape time, so the data
// plane does no per-packet work for metrics. The endpoint's registry also
// holds the Go runtime and process collectors, and the endpoint's own
// connection counts (Listen states its limits).
//
// Threading: promhttp runs Collect on net/http's goroutines, possibly for
// concurrent scrapes; each Collect calls the snapshot function exactly once
// and shares nothing between scrapes, so the function must be safe to call
// from any goroutine (the daemon's is).
package metrics
