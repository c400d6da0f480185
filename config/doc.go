// Package config decodes and validates ovfwd's single TOML configuration file
// (by default /etc/ovfwd/ovfwd.toml; the packaged example, packaging/ovfwd.toml,
// documents every key and its default).
//
// Decoding is strict: an unknown key, a value of the wrong type, a bad address
// or prefix, an out-of-range number or an inconsistent combination (two ports
// with one name, a route via a port that does not exist, overlapping VPN
// pools, …) is an *Error that names the file, the line, the key and a fix.
// Parse and Load report every error they find at once, as an ErrorList, so an
// operator fixes a file in one round trip.
//
// The result is a plain value (*Config) with every default filled in and every
// address already parsed into net/netip types. It is built once by the control
// plane (at start and on SIGHUP) and never touched by the data plane, so it
// needs no locking: treat a *Config as immutable once returned.
//
// config is a leaf package: it never imports the data-plane packages (fwd,
// vpn, mlx5, appliance). Names that mirror their enums (drivers, ciphers,
// modes) are plain strings here; the appliance maps them.
package config
