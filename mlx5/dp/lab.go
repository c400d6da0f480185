package dp

import "errors"

// Lab selects receive-path variants that exist only to be measured or
// compared against the product's path. They are compiled in only with the
// build tag mlx5lab (lab_on.go); the product build's RxQueue holds no
// switch, its checks are constants that compile away (lab_product.go), and
// SetLab refuses every variant.
type Lab struct {
	// FreshContext zeroes a 120-byte packet context before every
	// completion, one packet per delivery run: what a per-CQE struct costs
	// in Go, which zeroes every new variable (the kernel's
	// CONFIG_INIT_STACK_ALL_ZERO). The product reuses one context per queue.
	FreshContext bool
	// NoCQEPrefetch: no prefetch of the burst's CQE lines when a poll starts.
	NoCQEPrefetch bool
	// NoFarPrefetch: no L2 prefetch, at decode, of the packets past the
	// first N of a burst.
	NoFarPrefetch bool
	// NoRecord: no shinfo record written and no PREFETCHW of its line
	// (the decode-time L2 prefetch still asks for it), to weigh what the
	// record costs; Hold and Resume do not work on packets received so.
	NoRecord bool
	// GeneralDecoder: every CQE through the general decoder (decodeOne),
	// none through the inline loop (pollPlain), so tests can compare them.
	GeneralDecoder bool
}

var errNoLab = errors.New("dp: receive-path variants need the mlx5lab build tag")
