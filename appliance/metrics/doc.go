// Package metrics serves an appliance's counters as Prometheus metrics with
// client_golang. A Collector turns one status.Snapshot — the same one
// `ovfwd status` shows — into const metrics at scrape time, so the data
// plane does no per-packet work for metrics. The endpoint's registry also
// holds the Go runtime and process collectors.
//
// Transition: the module's go.sum does not yet carry client_golang's
// dependencies (client_model, common, procfs, protobuf, …), so the
// client_golang implementation (collector.go, handler.go) builds only with
// `-tags client_golang`, and the default build keeps the hand-written
// exposition (handwritten.go) under the same metric names. Once go.mod and
// go.sum have the dependencies, delete handwritten*.go and the build tags.
//
// Threading: promhttp runs Collect on net/http's goroutines, possibly for
// concurrent scrapes; each Collect calls the snapshot function exactly once
// and shares nothing between scrapes, so the function must be safe to call
// from any goroutine (the daemon's is).
package metrics
