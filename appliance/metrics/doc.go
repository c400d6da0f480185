// Package metrics exposes an appliance's counters in the Prometheus text
// exposition format (version 0.0.4). Counters are read at scrape time from
// the same status.Snapshot `ovfwd status` shows, so the data plane does no
// per-packet work for metrics.
//
// Why not client_golang: the module's go.sum does not yet carry
// client_golang's own dependencies (prometheus/common, client_model,
// procfs, protobuf), so importing it would break every build. The format
// written here is the one client_golang's promhttp writes for counters and
// gauges; swapping it in later is a change to this package only.
//
// Threading: the handler runs on net/http's goroutines and calls the
// snapshot function once per scrape.
package metrics
